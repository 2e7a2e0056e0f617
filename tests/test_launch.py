"""The launch wrapper, the container entrypoint and the cluster manifests, without GPU or cluster.

launch/distsort-run and docker/entrypoint.sh run as subprocesses with launcher variables set; the
Slurm script runs against a stand-in srun; the MPIJob manifest and the Dockerfile are parsed.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from distsort import binding

ROOT = Path(__file__).resolve().parent.parent
WRAPPER = ROOT / "launch" / "distsort-run"
ENTRYPOINT = ROOT / "docker" / "entrypoint.sh"
SBATCH = ROOT / "launch" / "slurm" / "distsort.sbatch"
MPIJOB = ROOT / "launch" / "k8s" / "mpijob.yaml"
SERVICE = ROOT / "launch" / "k8s" / "service.yaml"
DOCKERFILE = ROOT / "docker" / "Dockerfile"
PRINT_ENV = [sys.executable, "-c", "import json, os; print(json.dumps(dict(os.environ)))"]


def clean_env(**extra: str) -> dict[str, str]:
    """This process's environment less anything that would bind a rank, plus extra."""
    drop = set(binding.LOCAL_RANK_VARS) | {"CUDA_VISIBLE_DEVICES", "K_MPI_JOB_ROLE"}
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in drop and not k.startswith(("NCCL_", "DISTSORT_", "SLURM_"))
    }
    env["DISTSORT_DEVICE_COUNT"] = "0"  # no GPU unless a test says otherwise
    env.update(extra)
    return env


def run(cmd: list[str], env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=60)


def wrapper(*args: str, **env: str) -> subprocess.CompletedProcess:
    return run([sys.executable, str(WRAPPER), *args], clean_env(**env))


def dry_run(*args: str, **env: str) -> tuple[dict[str, str], str]:
    """(variables it would set, the command line) from `distsort-run --dry-run`."""
    result = wrapper("--dry-run", *args, **env)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[-1].startswith("exec ")
    return dict(line.split("=", 1) for line in lines[:-1]), lines[-1][len("exec ") :]


def child_env(result: subprocess.CompletedProcess) -> dict[str, str]:
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


# ---- launch/distsort-run -------------------------------------------------------------------


def test_wrapper_is_executable():
    assert os.access(WRAPPER, os.X_OK)
    assert WRAPPER.read_text().startswith("#!/usr/bin/env python3\n")


def test_wrapper_binds_open_mpi_rank_and_sets_nccl_defaults():
    updates, command = dry_run(OMPI_COMM_WORLD_LOCAL_RANK="3", CUDA_VISIBLE_DEVICES="0,1")
    assert updates == {"CUDA_VISIBLE_DEVICES": "1", "NCCL_NVLS_ENABLE": "0", "NCCL_DEBUG": "WARN"}
    assert command.endswith(" -m distsort")  # the default command


@pytest.mark.parametrize(
    ("var", "rank", "device"),
    [("MPI_LOCALRANKID", "2", "2"), ("SLURM_LOCALID", "5", "1"), ("PMIX_LOCAL_RANK", "3", "3")],
)
def test_wrapper_execs_with_binding(var, rank, device):
    env = child_env(wrapper(*PRINT_ENV, **{var: rank, "DISTSORT_DEVICE_COUNT": "4"}))
    assert env["CUDA_VISIBLE_DEVICES"] == device
    assert env["NCCL_NVLS_ENABLE"] == "0"


def test_wrapper_keeps_users_nccl_settings():
    env = child_env(wrapper(*PRINT_ENV, NCCL_NVLS_ENABLE="1", NCCL_DEBUG="INFO"))
    assert env["NCCL_NVLS_ENABLE"] == "1"
    assert env["NCCL_DEBUG"] == "INFO"


def test_wrapper_leaves_unlaunched_process_alone():
    updates, _ = dry_run(CUDA_VISIBLE_DEVICES="0,1,2,3")
    assert "CUDA_VISIBLE_DEVICES" not in updates
    updates, _ = dry_run(MPI_LOCALRANKID="1")  # no GPU on this node
    assert "CUDA_VISIBLE_DEVICES" not in updates


def test_wrapper_does_not_bind_a_launcher():
    # inside an sbatch job SLURM_LOCALID=0 is inherited by mpirun: binding it would give every
    # rank GPU 0
    env = {"SLURM_LOCALID": "0", "CUDA_VISIBLE_DEVICES": "0,1"}
    updates, command = dry_run("mpirun", "-n", "4", "x", **env)
    assert "CUDA_VISIBLE_DEVICES" not in updates
    assert updates["NCCL_NVLS_ENABLE"] == "0"
    assert command == "mpirun -n 4 x"


def test_wrapper_bind_modes():
    env = {"MPI_LOCALRANKID": "3", "CUDA_VISIBLE_DEVICES": "0,1"}
    updates, _ = dry_run("--bind", "device", **env)
    assert updates["DISTSORT_DEVICE"] == "1" and "CUDA_VISIBLE_DEVICES" not in updates
    updates, _ = dry_run("--bind=none", **env)
    assert set(updates) == {"NCCL_NVLS_ENABLE", "NCCL_DEBUG"}
    updates, _ = dry_run(DISTSORT_BIND="device", **env)
    assert updates["DISTSORT_DEVICE"] == "1"


def test_wrapper_options_stop_at_the_command():
    _, command = dry_run("--", "--weird-program", "--bind", "x", SLURM_LOCALID="0")
    assert command == "--weird-program --bind x"


def test_wrapper_verbose_says_what_it_bound():
    result = wrapper("--verbose", "--dry-run", SLURM_LOCALID="1", CUDA_VISIBLE_DEVICES="6,7")
    assert "local rank 1" in result.stderr and "'7'" in result.stderr


@pytest.mark.parametrize(
    ("args", "env", "message"),
    [
        (["true"], {"MPI_LOCALRANKID": "x"}, "MPI_LOCALRANKID='x'"),
        (["--bind", "gpu0", "true"], {}, "bind mode"),
        (["--frobnicate", "true"], {}, "unknown option"),
    ],
)
def test_wrapper_errors_are_clear(args, env, message):
    result = wrapper(*args, **env)
    assert result.returncode != 0
    assert message in result.stderr and "distsort-run" in result.stderr


def test_wrapper_missing_command():
    result = wrapper("no-such-program-distsort")
    assert result.returncode == 127
    assert "no-such-program-distsort" in result.stderr


def test_wrapper_help():
    result = wrapper("--help")
    assert result.returncode == 0 and "Usage" in result.stdout


def test_wrapper_loads_no_mpi_cuda_or_distsort_package():
    # MPI must not be initialised before exec: the wrapper may load binding.py only
    probe = (
        "import runpy, sys; ns = runpy.run_path(sys.argv[1]); ns['main'](['--dry-run', 'true']);"
        "bad = [m for m in ('mpi4py', 'numpy', 'cupy', 'distsort') if m in sys.modules];"
        "sys.exit(f'loaded {bad}' if bad else 0)"
    )
    result = run([sys.executable, "-c", probe, str(WRAPPER)], clean_env())
    assert result.returncode == 0, result.stderr


def test_wrapper_finds_installed_package(tmp_path):
    # installed layout: the wrapper in a bin directory, distsort importable from sys.path
    copy = tmp_path / "bin" / "distsort-run"
    copy.parent.mkdir()
    shutil.copy(WRAPPER, copy)
    env = clean_env(PYTHONPATH=str(ROOT), MPI_LOCALRANKID="1", CUDA_VISIBLE_DEVICES="4,5")
    result = run([sys.executable, str(copy), "--dry-run"], env)
    assert result.returncode == 0, result.stderr
    assert "CUDA_VISIBLE_DEVICES=5" in result.stdout
    # and nowhere to be found (-S: no site-packages, where distsort may be installed)
    bare = clean_env(PYTHONPATH=str(tmp_path))
    result = run([sys.executable, "-S", str(copy), "--dry-run"], bare)
    assert result.returncode != 0 and "binding.py" in result.stderr


# ---- docker/entrypoint.sh --------------------------------------------------------------------


def entrypoint(*args: str, **env: str) -> subprocess.CompletedProcess:
    env = clean_env(DISTSORT_RUN=str(WRAPPER), **env)
    return run(["bash", str(ENTRYPOINT), *args], env)


def test_entrypoint_is_executable_bash():
    assert os.access(ENTRYPOINT, os.X_OK)
    assert run(["bash", "-n", str(ENTRYPOINT)], clean_env()).returncode == 0


def test_entrypoint_binds_one_gpu_per_local_rank():
    rank = {"OMPI_COMM_WORLD_LOCAL_RANK": "2", "DISTSORT_DEVICE_COUNT": "8"}
    env = child_env(entrypoint(*PRINT_ENV, **rank))
    assert env["CUDA_VISIBLE_DEVICES"] == "2"
    assert env["NCCL_NVLS_ENABLE"] == "0"


def test_entrypoint_keeps_nvls_overridable():
    env = child_env(entrypoint(*PRINT_ENV, NCCL_NVLS_ENABLE="1"))
    assert env["NCCL_NVLS_ENABLE"] == "1"


def test_entrypoint_default_command_is_distsort():
    result = entrypoint(DISTSORT_DRY_RUN="1", SLURM_LOCALID="1", CUDA_VISIBLE_DEVICES="0,1")
    assert result.returncode == 0, result.stderr
    assert "CUDA_VISIBLE_DEVICES=1" in result.stdout
    assert result.stdout.splitlines()[-1].endswith(" -m distsort")


def test_entrypoint_mpijob_launcher_waits_for_hosts_bounded(tmp_path):
    hostfile = tmp_path / "hostfile"
    hostfile.write_text("localhost slots=4\nno-such-worker.invalid:4\n")
    env = {"K_MPI_JOB_ROLE": "launcher", "DISTSORT_HOSTFILE": str(hostfile)}
    result = entrypoint("true", DISTSORT_DNS_TRIES="1", **env)
    assert result.returncode == 0, result.stderr
    assert "no-such-worker.invalid does not resolve" in result.stderr
    assert "localhost" not in result.stderr


# ---- launch/slurm/distsort.sbatch --------------------------------------------------------------


def sbatch_options() -> dict[str, str]:
    pairs = re.findall(r"^#SBATCH --([\w-]+)=(\S+)", SBATCH.read_text(), re.MULTILINE)
    return dict(pairs)


def test_sbatch_one_rank_per_gpu():
    options = sbatch_options()
    assert options["ntasks-per-node"] == options["gpus-per-node"]
    assert "gpus-per-task" not in options


def test_sbatch_directives_come_before_commands():
    lines = SBATCH.read_text().splitlines()
    assert lines[0].startswith("#!")
    last_directive = max(i for i, line in enumerate(lines) if line.startswith("#SBATCH"))
    assert all(line.startswith("#") or not line.strip() for line in lines[:last_directive])


@pytest.fixture
def fake_srun(tmp_path: Path) -> Path:
    """A stand-in srun that prints its arguments, one a line."""
    srun = tmp_path / "srun"
    srun.write_text('#!/bin/sh\nfor a in "$@"; do echo "$a"; done\n')
    srun.chmod(0o755)
    return tmp_path


def test_sbatch_runs_srun_pmix_with_the_wrapper(fake_srun):
    env = clean_env(PATH=f"{fake_srun}{os.pathsep}{os.environ['PATH']}", SLURM_SUBMIT_DIR=str(ROOT))
    result = run(["bash", str(SBATCH), "sort", "in.npy", "-o", "out.npy"], env)
    assert result.returncode == 0, result.stderr
    argv = result.stdout.splitlines()[1:]
    assert argv[0] == "--mpi=pmix"
    assert argv[-7:] == ["python3", "-m", "distsort", "sort", "in.npy", "-o", "out.npy"]
    assert argv[-8] == str(WRAPPER)


def test_sbatch_in_a_container(fake_srun):
    env = clean_env(
        PATH=f"{fake_srun}{os.pathsep}{os.environ['PATH']}",
        SLURM_SUBMIT_DIR=str(ROOT),
        DISTSORT_IMAGE="registry.example.com/distsort:0.1.0",
    )
    argv = run(["bash", str(SBATCH), "info"], env).stdout.splitlines()[1:]
    assert "--container-image=registry.example.com/distsort:0.1.0" in argv
    assert argv[-5:] == ["distsort-run", "python3", "-m", "distsort", "info"]


# ---- launch/k8s/mpijob.yaml ------------------------------------------------------------------


@pytest.fixture(scope="module")
def mpijob() -> dict:
    yaml = pytest.importorskip("yaml")
    return yaml.safe_load(MPIJOB.read_text())


def container(job: dict, role: str) -> dict:
    (only,) = job["spec"]["mpiReplicaSpecs"][role]["template"]["spec"]["containers"]
    return only


def test_mpijob_kind(mpijob):
    assert mpijob["apiVersion"] == "kubeflow.org/v2beta1"
    assert mpijob["kind"] == "MPIJob"
    assert set(mpijob["spec"]["mpiReplicaSpecs"]) == {"Launcher", "Worker"}
    assert mpijob["spec"]["mpiReplicaSpecs"]["Launcher"]["replicas"] == 1


def test_mpijob_names_image_and_command(mpijob):
    launcher, worker = container(mpijob, "Launcher"), container(mpijob, "Worker")
    assert "distsort" in launcher["image"] and launcher["image"] == worker["image"]
    argv = launcher["command"] + launcher["args"]
    assert argv[0] == "/usr/local/bin/distsort-entrypoint" and argv[1] == "mpirun"
    start = argv.index("distsort-run")
    assert argv[start + 1 : start + 4] == ["python3", "-m", "distsort"]
    assert worker["command"] == ["/usr/sbin/sshd"]


def test_mpijob_one_rank_per_gpu(mpijob):
    spec = mpijob["spec"]
    workers = spec["mpiReplicaSpecs"]["Worker"]["replicas"]
    gpus = container(mpijob, "Worker")["resources"]["limits"]["nvidia.com/gpu"]
    assert spec["slotsPerWorker"] == gpus
    args = container(mpijob, "Launcher")["args"]
    assert int(args[args.index("-n") + 1]) == workers * gpus
    assert "nvidia.com/gpu" not in str(container(mpijob, "Launcher").get("resources", {}))


def test_mpijob_matches_the_image_user(mpijob):
    dockerfile = DOCKERFILE.read_text()
    uid = re.search(r"useradd .*--uid (\d+).* (\w+)$", dockerfile, re.MULTILINE)
    assert uid, "Dockerfile creates no user with a fixed uid"
    assert mpijob["spec"]["sshAuthMountPath"] == f"/home/{uid.group(2)}/.ssh"
    for role in ("Launcher", "Worker"):
        security = mpijob["spec"]["mpiReplicaSpecs"][role]["template"]["spec"]["securityContext"]
        assert security["runAsUser"] == int(uid.group(1))
    assert f"/home/{uid.group(2)}/.sshd_config" in container(mpijob, "Worker")["args"]


# ---- launch/k8s/service.yaml -----------------------------------------------------------------


def test_the_service_manifest_serves_on_tcp_behind_a_service_with_a_secret_token():
    yaml = pytest.importorskip("yaml")
    job, front = yaml.safe_load_all(SERVICE.read_text())
    launcher, worker = container(job, "Launcher"), container(job, "Worker")
    args = launcher["args"]
    start = args.index("distsort-run")
    assert args[start + 1 : start + 5] == ["python3", "-m", "distsort", "serve"]
    port = int(args[args.index("--tcp") + 1].rsplit(":", 1)[1])
    assert args[args.index("DISTSORT_TOKEN") - 1] == "-x"  # passed to the ranks by name
    (token,) = [e for e in launcher["env"] if e["name"] == "DISTSORT_TOKEN"]
    assert "value" not in token and token["valueFrom"]["secretKeyRef"]["name"]
    gpus = worker["resources"]["limits"]["nvidia.com/gpu"]
    workers = job["spec"]["mpiReplicaSpecs"]["Worker"]["replicas"]
    assert job["spec"]["slotsPerWorker"] == gpus
    assert int(args[args.index("-n") + 1]) == workers * gpus
    (opened,) = worker["ports"]
    assert opened["containerPort"] == port
    assert front["kind"] == "Service" and front["spec"]["type"] == "ClusterIP"
    assert front["spec"]["selector"] == {"training.kubeflow.org/job-name": job["metadata"]["name"],
                                         "training.kubeflow.org/job-role": "worker",
                                         "training.kubeflow.org/replica-index": "0"}  # rank 0
    (served,) = front["spec"]["ports"]
    assert served["port"] == port and served["targetPort"] == opened["name"]
    assert args[args.index("--root") + 1] in [m["mountPath"] for m in worker["volumeMounts"]]


# ---- docker/Dockerfile -------------------------------------------------------------------------


def test_dockerfile_contract():
    text = DOCKERFILE.read_text()
    stages = re.findall(r"^FROM (\S+)", text, re.MULTILINE)
    assert stages[-1].startswith("nvidia/cuda:") and "-runtime-" in stages[-1]
    user = re.findall(r"^USER (\S+)", text, re.MULTILINE)[-1]
    assert user.split(":")[0] not in ("root", "0")
    assert 'ENTRYPOINT ["/usr/local/bin/distsort-entrypoint"]' in text
    assert "COPY docker/entrypoint.sh /usr/local/bin/distsort-entrypoint" in text
    assert "COPY launch/distsort-run /usr/local/bin/distsort-run" in text
    assert re.search(r"NCCL_NVLS_ENABLE=0", text)
    for package in ("mpi4py", "cupy", "--with-cuda", "--with-ucx"):
        assert package in text


def test_dockerfile_context_files_exist_and_are_not_ignored():
    text = DOCKERFILE.read_text()
    ignore = (ROOT / "docker" / "Dockerfile.dockerignore").read_text().split()
    sources = []
    for line in re.findall(r"^COPY (?!--from)(.+)$", text, re.MULTILINE):
        words = [w for w in line.split() if not w.startswith("--")]
        sources += words[:-1]
    assert sources
    for source in sources:
        assert (ROOT / source).exists(), source
        assert f"!{source}" in ignore or f"!{source}/" in ignore, source


@pytest.mark.parametrize("ranks", ["x", "0", "2.5", None, " 2 "])
def test_quickstart_refuses_a_rank_count_that_is_no_whole_number(ranks):
    """Checked before any rank starts (MPICH would run one rank for 'x', and exit 0); unset,
    the default; blanks around a number are no matter."""
    env = dict(os.environ, DISTSORT_BACKEND="cpu",
               PATH=os.pathsep.join([os.path.dirname(sys.executable), os.environ["PATH"]]))
    env.pop("DISTSORT_RANKS", None)
    if ranks is not None:
        env["DISTSORT_RANKS"] = ranks
    run = subprocess.run(["bash", str(ROOT / "launch" / "quickstart.sh"), "--count", "2^10"],
                         capture_output=True, text=True, timeout=120, env=env)
    if ranks is None or (ranks.strip().isdigit() and int(ranks) > 0):
        want = "4 rank(s)" if ranks is None else "2 rank(s)"
        assert run.returncode == 0 and want in run.stdout and "check: OK" in run.stdout, \
            run.stdout + run.stderr
    else:
        assert run.returncode == 2 and f"DISTSORT_RANKS='{ranks}'" in run.stderr, run.stderr


@pytest.mark.skipif(any(shutil.which(m, path="/usr/bin:/bin") for m in ("mpirun", "mpiexec")),
                    reason="this machine has an MPI launcher of its own on PATH")
def test_quickstart_says_so_where_python_has_mpi4py_but_path_has_no_launcher(tmp_path):
    """mpi4py and NumPy import (pip install --user mpi4py mpich), but no mpirun or mpiexec is
    on PATH (~/.local/bin missing from it): one line says what to add, exit 2 (it ended
    silently, exit 1)."""
    wrapper = tmp_path / "python3"
    wrapper.write_text(f'#!/bin/sh\nexec "{sys.executable}" "$@"\n')
    wrapper.chmod(0o755)
    env = dict(os.environ, PATH=f"{tmp_path}:/usr/bin:/bin")
    run = subprocess.run(["bash", str(ROOT / "launch" / "quickstart.sh")], capture_output=True,
                         text=True, timeout=60, env=env)
    assert run.returncode == 2, run.stdout + run.stderr
    assert "neither mpirun nor mpiexec is on PATH" in run.stderr
