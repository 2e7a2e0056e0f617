"""Rank-to-GPU binding from the launcher's environment (distsort/binding.py)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from distsort import binding


@pytest.mark.parametrize(
    "var",
    [
        "OMPI_COMM_WORLD_LOCAL_RANK",
        "MPI_LOCALRANKID",
        "SLURM_LOCALID",
        "PMIX_LOCAL_RANK",
        "MV2_COMM_WORLD_LOCAL_RANK",
        "PALS_LOCAL_RANKID",
        "FLUX_TASK_LOCAL_ID",
        "JSM_NAMESPACE_LOCAL_RANK",
        "DISTSORT_LOCAL_RANK",
    ],
)
def test_local_rank_from_each_launcher(var):
    assert binding.local_rank_from_env({var: "3"}) == 3
    assert binding.local_rank_from_env({var: " 5 "}) == 5


def test_no_launcher_no_local_rank():
    assert binding.local_rank_from_env({}) is None
    assert binding.local_rank_from_env({"OMPI_COMM_WORLD_LOCAL_RANK": "", "PATH": "/bin"}) is None


def test_mpi_launcher_wins_over_inherited_slurm_localid():
    # mpirun inside an sbatch job: every rank inherits the batch step's SLURM_LOCALID=0
    env = {"SLURM_LOCALID": "0", "OMPI_COMM_WORLD_LOCAL_RANK": "2"}
    assert binding.local_rank_from_env(env) == 2
    env = {"SLURM_LOCALID": "0", "MPI_LOCALRANKID": "1"}
    assert binding.local_rank_from_env(env) == 1


def test_user_override_wins():
    env = {"DISTSORT_LOCAL_RANK": "7", "OMPI_COMM_WORLD_LOCAL_RANK": "2"}
    assert binding.local_rank_from_env(env) == 7


@pytest.mark.parametrize("value", ["x", "-1", "1.5"])
def test_bad_local_rank_names_the_variable(value):
    with pytest.raises(ValueError, match="MPI_LOCALRANKID"):
        binding.local_rank_from_env({"MPI_LOCALRANKID": value})


@pytest.mark.parametrize(
    ("local_rank", "count", "device"), [(0, 4, 0), (3, 4, 3), (4, 4, 0), (9, 4, 1), (5, 1, 0)]
)
def test_device_for_rank_wraps_around(local_rank, count, device):
    assert binding.device_for_rank(local_rank, count) == device


def test_device_for_rank_rejects_nonsense():
    with pytest.raises(ValueError, match="no GPU"):
        binding.device_for_rank(0, 0)
    with pytest.raises(ValueError, match="non-negative"):
        binding.device_for_rank(-1, 4)


def test_visible_devices_from_count():
    env = {"OMPI_COMM_WORLD_LOCAL_RANK": "5"}
    assert binding.visible_devices_for(env, device_count=4) == "1"


def test_visible_devices_pick_from_the_allowed_list():
    env = {"SLURM_LOCALID": "1", "CUDA_VISIBLE_DEVICES": "4,5,6,7"}
    assert binding.visible_devices_for(env) == "5"
    env = {"SLURM_LOCALID": "3", "CUDA_VISIBLE_DEVICES": "GPU-aaaa, GPU-bbbb"}
    assert binding.visible_devices_for(env, device_count=8) == "GPU-bbbb"


def test_visible_devices_idempotent():
    env = {"MPI_LOCALRANKID": "3", "CUDA_VISIBLE_DEVICES": "0,1,2,3"}
    once = binding.visible_devices_for(env)
    assert once == "3"
    assert binding.visible_devices_for({**env, "CUDA_VISIBLE_DEVICES": once}) == "3"


@pytest.mark.parametrize("visible", ["", "NoDevFiles", "-1", "-1,0"])
def test_visible_devices_none_when_no_gpu_allowed(visible):
    env = {"MPI_LOCALRANKID": "0", "CUDA_VISIBLE_DEVICES": visible}
    assert binding.visible_devices_for(env, device_count=4) is None


def test_visible_devices_none_without_rank_or_gpus():
    assert binding.visible_devices_for({}, device_count=4) is None
    assert binding.visible_devices_for({"SLURM_LOCALID": "0"}) is None
    assert binding.visible_devices_for({"SLURM_LOCALID": "0"}, device_count=0) is None


def test_visible_list_stops_at_invalid_entry():
    assert binding.visible_device_list({"CUDA_VISIBLE_DEVICES": "2,3,-1,4"}) == ["2", "3"]
    assert binding.visible_device_list({}, device_count=2) == ["0", "1"]


def test_device_from_env():
    assert binding.device_from_env({"OMPI_COMM_WORLD_LOCAL_RANK": "6"}, 4) == 2
    assert binding.device_from_env({"OMPI_COMM_WORLD_LOCAL_RANK": "6"}, 1) == 0
    assert binding.device_from_env({}, 4) is None
    assert binding.device_from_env({"SLURM_LOCALID": "1"}, 0) is None
    assert binding.device_from_env({"DISTSORT_DEVICE": "3", "SLURM_LOCALID": "1"}, 4) == 3
    with pytest.raises(ValueError, match="DISTSORT_DEVICE=4"):
        binding.device_from_env({"DISTSORT_DEVICE": "4"}, 4)


def test_detect_device_count(tmp_path):
    for bus_id in ("0000:07:00.0", "0000:0a:00.0"):
        (tmp_path / bus_id).mkdir()
    assert binding.detect_device_count({}, proc_dir=str(tmp_path)) == 2
    assert binding.detect_device_count({}, proc_dir=str(tmp_path / "absent")) is None
    env = {"DISTSORT_DEVICE_COUNT": "8"}
    assert binding.detect_device_count(env, proc_dir=str(tmp_path)) == 8


@pytest.mark.parametrize(
    ("given", "count"), [("all", 2), ("0,3,5", 3), ("GPU-aaaa,GPU-bbbb", 2), ("none", 0),
                         ("void", 0), ("", 2)]
)
def test_detect_device_count_in_a_container(tmp_path, given, count):
    # the container sees the GPUs it was given as 0..n-1, whatever /proc shows
    for bus_id in ("0000:07:00.0", "0000:0a:00.0"):
        (tmp_path / bus_id).mkdir()
    env = {"NVIDIA_VISIBLE_DEVICES": given}
    assert binding.detect_device_count(env, proc_dir=str(tmp_path)) == count


def test_every_gpu_gets_the_same_number_of_ranks():
    for count in range(1, 9):
        devices = [binding.device_for_rank(r, count) for r in range(3 * count)]
        assert sorted(devices) == sorted(list(range(count)) * 3)


@pytest.mark.parametrize(
    ("program", "launcher"),
    [("mpirun", True), ("/opt/mpi/bin/mpiexec", True), ("srun", True),
     ("/usr/sbin/sshd", True), ("python", False), ("/usr/bin/python3", False)],
)
def test_is_launcher(program, launcher):
    assert binding.is_launcher(program) is launcher


def test_launch_env_defaults_and_visible_binding():
    env = {"OMPI_COMM_WORLD_LOCAL_RANK": "1"}
    assert binding.launch_env(env, "visible", device_count=2) == {
        "NCCL_NVLS_ENABLE": "0",
        "NCCL_DEBUG": "WARN",
        "CUDA_VISIBLE_DEVICES": "1",
    }


def test_launch_env_never_overrides_the_user():
    env = {"NCCL_NVLS_ENABLE": "1", "NCCL_DEBUG": "INFO", "SLURM_LOCALID": "0"}
    assert binding.launch_env(env, "visible") == {}


def test_launch_env_device_mode_keeps_all_gpus_visible():
    env = {"MPI_LOCALRANKID": "3", "CUDA_VISIBLE_DEVICES": "0,1"}
    updates = binding.launch_env(env, "device")
    assert updates["DISTSORT_DEVICE"] == "1"
    assert "CUDA_VISIBLE_DEVICES" not in updates
    assert "DISTSORT_DEVICE" not in binding.launch_env({**env, "DISTSORT_DEVICE": "0"}, "device")


def test_launch_env_none_mode_only_defaults():
    env = {"MPI_LOCALRANKID": "3", "CUDA_VISIBLE_DEVICES": "0,1"}
    assert binding.launch_env(env, "none") == {"NCCL_NVLS_ENABLE": "0", "NCCL_DEBUG": "WARN"}


def test_launch_env_rejects_unknown_mode():
    with pytest.raises(ValueError, match="bind mode"):
        binding.launch_env({}, "all")


ONE_NODE, ALONE = binding.ONE_NODE_OPEN_MPI, binding.SINGLETON_OPEN_MPI
OMPI_ONE_NODE = {"OMPI_COMM_WORLD_SIZE": "4", "OMPI_COMM_WORLD_LOCAL_SIZE": "4",
                 "OMPI_COMM_WORLD_LOCAL_RANK": "2", "OMPI_NUM_APP_CTX": "1"}


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        (OMPI_ONE_NODE, ONE_NODE),  # mpirun, every rank on this node
        ({**OMPI_ONE_NODE, "OMPI_COMM_WORLD_SIZE": "8"}, {}),  # several nodes: Open MPI's choice
        ({**OMPI_ONE_NODE, "OMPI_NUM_APP_CTX": "2"}, {}),  # `mpirun A : B`: maybe other layers
        ({"OMPI_COMM_WORLD_SIZE": "4", "OMPI_COMM_WORLD_LOCAL_RANK": "0"}, {}),  # no local size
        ({}, ALONE),  # a singleton
        ({"DISTSORT_LOCAL_RANK": "1"}, {}),  # a launcher distsort does not know
        ({"PMIX_RANK": "0"}, {}),
        ({"PMI_RANK": "0", "MPI_LOCALRANKID": "0"}, {}),  # MPICH's launcher
        ({"SLURM_JOB_ID": "7", "SLURM_PROCID": "0"}, {}),  # srun, or a batch job's script
        ({**OMPI_ONE_NODE, "OMPI_MCA_pml": "ucx"}, {}),  # the user's layer (mpirun --mca pml)
        ({**OMPI_ONE_NODE, "OMPI_MCA_pml_ucx_tls": "any"}, {}),  # settings of the user's layer
        ({**OMPI_ONE_NODE, "OMPI_MCA_btl": "^vader"}, {}),
        ({**OMPI_ONE_NODE, "OMPI_MCA_mca_base_param_files": "/etc/site.conf"}, {}),
        ({**OMPI_ONE_NODE, "OMPI_MCA_btl_vader_single_copy_mechanism": "cma"}, {}),
        ({**OMPI_ONE_NODE, "OMPI_MCA_smsc": "cma"},
         {k: v for k, v in ONE_NODE.items() if k != "OMPI_MCA_smsc"}),  # the user's stay
    ],
)
def test_mpi_defaults(env, expected, tmp_path):
    assert binding.mpi_defaults(env, home=str(tmp_path)) == expected


@pytest.mark.parametrize(("text", "expected"), [
    (b"# site\nbtl_tcp_if_include = eth0\n", ALONE),
    (b"pml = ucx\n", {}),
    (b"btl=self,tcp\n", {}),
    (b"# r\xe9seau\npml = ucx\n", {}),  # not UTF-8: read all the same
    (b"# r\xe9seau\n", ALONE),
])
def test_mpi_defaults_leave_the_users_parameter_file_be(tmp_path, text, expected):
    (tmp_path / ".openmpi").mkdir()
    (tmp_path / ".openmpi" / "mca-params.conf").write_bytes(text)
    assert binding.mpi_defaults({}, home=str(tmp_path)) == expected


@pytest.mark.parametrize(("env", "blas"), [
    ({}, {"OPENBLAS_NUM_THREADS": "1"}),
    ({"OPENBLAS_NUM_THREADS": "8"}, {}),  # the user's stands
])
def test_command_line_defaults_add_blas_threads_to_mpis(env, blas, tmp_path):
    assert binding.command_line_defaults(env, home=str(tmp_path)) == {**ALONE, **blas}


@pytest.mark.parametrize(
    ("argv", "command_line"),
    [
        (["python3", "-m", "distsort", "sort", "a.npy"], True),
        (["python3", "-X", "importtime", "-m", "distsort", "info"], True),
        (["python3", "-Xdev", "-I", "-m", "distsort", "info"], True),
        (["python3", "-mdistsort", "info"], True),
        (["python3", "-Im", "distsort", "info"], True),
        (["python3", "-uW", "error", "-m", "distsort"], True),
        (["python3", "--check-hash-based-pycs", "always", "-m", "distsort"], True),
        (["python3", "-m", "distsort.cli", "info"], True),
        (["/venv/bin/python", "/venv/bin/distsort", "sort"], True),
        (["python3", "-m", "pytest", "tests"], False),
        (["python3", "-m", "mpi4py", "-m", "distsort"], False),  # MPI starts before distsort
        (["python3", "script.py", "distsort"], False),
        (["python3", "-", "distsort"], False),  # a program on stdin
        (["python3", "-c", "import distsort", "-m", "distsort"], False),
        (["python3"], False),
    ],
)
def test_runs_command_line(argv, command_line):
    assert binding.runs_command_line(argv) is command_line


def test_command_line_ranks_start_mpi_with_the_defaults(tmp_path):
    """The defaults are in the environment when MPI starts (an mpi4py stand-in reports the
    environment at its import and ends the process) in a rank of the command line, and not
    where a program imports distsort."""
    fake = tmp_path / "site" / "mpi4py"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("")
    (fake / "MPI.py").write_text("import os\nprint('PML', os.environ.get('OMPI_MCA_pml'))\n"
                                 "raise SystemExit(0)\n")
    env = {k: v for k, v in os.environ.items()
           if k not in binding.LAUNCHED_VARS and not k.startswith("OMPI_")}
    env.update(HOME=str(tmp_path), PYTHONPATH=os.pathsep.join(
        [str(tmp_path / "site"), os.path.dirname(os.path.dirname(binding.__file__))]))
    for argv, pml in ((["-m", "distsort", "info"], "ob1"), (["-c", "import distsort"], "None")):
        run = subprocess.run([sys.executable, *argv], capture_output=True, text=True, env=env,
                             check=True)
        assert run.stdout.split() == ["PML", pml], run.stdout + run.stderr
