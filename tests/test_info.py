"""`distsort info`: collection on a machine without CuPy, parsing of what MPI, CUDA and NCCL say."""

from __future__ import annotations

import json
import subprocess
import sys
import types
from pathlib import Path

import pytest

from distsort import info
from distsort.transport import choice

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def no_cupy(monkeypatch):
    """Make `import cupy` fail, as on a machine without it."""
    monkeypatch.setitem(sys.modules, "cupy", None)


class FakeRuntime:
    """The part of cupy.cuda.runtime that info uses, for two GPUs."""

    def __init__(self, count: int = 2, fail: bool = False):
        self.count, self.fail = count, fail

    def getDeviceCount(self) -> int:  # noqa: N802 (CuPy's name)
        if self.fail:
            raise RuntimeError("cudaErrorNoDevice: no CUDA-capable device is detected")
        return self.count

    def runtimeGetVersion(self) -> int:  # noqa: N802
        return 13000

    def driverGetVersion(self) -> int:  # noqa: N802
        return 13010

    def getDeviceProperties(self, index: int) -> dict:  # noqa: N802
        return {"name": b"NVIDIA H100 80GB HBM3", "totalGlobalMem": 80 * 2**30, "major": 9,
                "minor": 0, "pciDomainID": 0, "pciBusID": 0x1B + index, "pciDeviceID": 0}


def fake_cupy(runtime: FakeRuntime) -> types.SimpleNamespace:
    return types.SimpleNamespace(cuda=types.SimpleNamespace(runtime=runtime))


def test_collect_info_without_cupy(no_cupy, monkeypatch):
    monkeypatch.setenv("DISTSORT_BACKEND", "cpu")
    monkeypatch.setenv("NCCL_NVLS_ENABLE", "0")
    d = info.collect_info()
    json.dumps(d)  # JSON-ready, for `info --json` or a report
    assert d["gpus"]["devices"] == [] and "CuPy" in d["gpus"]["reason"]
    assert d["nccl"]["version"] is None
    assert d["packages"]["cupy"] is None and d["packages"]["numpy"]
    assert d["backend"]["selected"] == "cpu" and d["backend"]["available"] == ["cpu"]
    assert d["mpi"]["size"] >= 1 and d["mpi"]["cuda_aware"] in ("yes", "no", "unknown")
    assert d["environment"]["NCCL_NVLS_ENABLE"] == "0"
    assert d["ranks"][0]["rank"] == 0 and d["ranks"][0]["gpu"] is None
    text = info.format_info(d)
    for word in ("backend", "GPUs        none", "NCCL", "MPI", "CUDA-aware", "numpy", "ranks"):
        assert word in text
    assert f"cpu merge   {d['backend']['cpu_merge']}" in text
    assert f"cpu sort    {d['backend']['cpu_sort']}" in text and "NumPy" in d["backend"]["cpu_sort"]


@pytest.mark.parametrize("keys, pairs, words", [
    (True, True, ["our radix sort"]), (False, False, ["NumPy's (faster"]),
    (False, True, ["NumPy's for keys", "our radix sort (local/lsd.c) for pairs"]),
    (True, False, ["our radix sort (local/lsd.c) for keys", "NumPy's for pairs"]),
])
def test_info_says_which_sort_cpu_ranks_run_for_keys_and_for_pairs(keys, pairs, words):
    said = info._cpu_sort(keys, pairs)
    assert all(w in said for w in words) and "NumPy" in said


@pytest.mark.parametrize("stored, said", [({"4,0": True}, "as `compile` timed them"),
                                           ({}, "timed by each process")])
def test_info_says_whose_timing_chose_the_cpu_sort(no_cupy, monkeypatch, stored, said):
    from distsort.local import clib, lsd

    if clib.library() is None:
        pytest.skip("no C compiler here: NumPy sorts, nothing is timed")
    monkeypatch.setattr(lsd, "stored_answers", lambda: stored)
    assert said in info.collect_info()["backend"]["cpu_sort"]


def test_info_says_where_cpu_ranks_have_no_merge(no_cupy, monkeypatch):
    from distsort.local import clib

    monkeypatch.setattr(clib, "library", lambda: None)
    text = info.format_info(info.collect_info())
    assert "cpu merge   none (no C compiler here): CPU ranks sort what they receive" in text


def test_gpu_info_lists_devices():
    gpus = info.gpu_info(fake_cupy(FakeRuntime()))
    assert gpus["cuda_runtime"] == "13.0" and gpus["cuda_driver"] == "13.1"
    assert [g["index"] for g in gpus["devices"]] == [0, 1]
    assert gpus["devices"][0] == {
        "index": 0,
        "name": "NVIDIA H100 80GB HBM3",
        "memory_bytes": 80 * 2**30,
        "compute_capability": "9.0",
        "bus_id": "0000:1b:00.0",
    }
    assert gpus["devices"][1]["bus_id"] == "0000:1c:00.0"
    lines = info._gpu_lines(gpus)
    assert lines[0].startswith("GPUs        2") and "80.0 GiB" in lines[1]


def test_gpu_info_without_driver():
    gpus = info.gpu_info(fake_cupy(FakeRuntime(fail=True)))
    assert gpus["devices"] == [] and "no CUDA-capable device" in gpus["reason"]
    gpus = info.gpu_info(fake_cupy(FakeRuntime(count=0)))
    assert gpus["devices"] == [] and gpus["reason"] == "CUDA sees no GPU"


@pytest.mark.parametrize(
    ("code", "text"), [(22703, "2.27.3"), (21903, "2.19.3"), (20901, "2.9.1"), (2708, "2.7.8")]
)
def test_nccl_version_string(code, text):
    assert info.nccl_version_string(code) == text


def test_nccl_info_from_cupy(monkeypatch):
    cupy, cuda, nccl = (types.ModuleType(n) for n in ("cupy", "cupy.cuda", "cupy.cuda.nccl"))
    nccl.get_version = lambda: 22304
    cupy.cuda, cuda.nccl = cuda, nccl
    for module in (cupy, cuda, nccl):
        monkeypatch.setitem(sys.modules, module.__name__, module)
    assert info.nccl_info() == {"version": "2.23.4"}


def test_nccl_info_without_cupy(no_cupy):
    assert info.nccl_info()["version"] is None


def test_cuda_aware_from_mpix_query():
    assert info.cuda_awareness("Open MPI", "", {}, query=lambda: 1)[0] == "yes"
    aware, how = info.cuda_awareness("MPICH", "", {}, query=lambda: 0)
    assert aware == "no" and "MPIX_Query_cuda_support" in how


OMPI_INFO = "mca:mpi:base:param:mpi_built_with_cuda_support:value:{}\nmca:x:y:z:value:1\n"


@pytest.mark.parametrize(("value", "aware"), [("true", "yes"), ("false", "no")])
def test_cuda_aware_from_ompi_info(value, aware):
    result = info.cuda_awareness(
        "Open MPI", "Open MPI v5.0.8", {}, query=lambda: None,
        ompi_info=lambda: OMPI_INFO.format(value),
    )
    assert result == (aware, "ompi_info: mpi_built_with_cuda_support")


def test_cuda_aware_unknown_without_ompi_info():
    result = info.cuda_awareness("Open MPI", "", {}, query=lambda: None, ompi_info=lambda: None)
    assert result[0] == "unknown"


def test_cuda_aware_mpich():
    cuda = "MPICH Version: 4.2\nMPICH configure: --prefix=/x --with-cuda=/usr/local/cuda\n"
    assert info.cuda_awareness("MPICH", cuda, {}, query=lambda: None)[0] == "yes"
    plain = "MPICH Version: 4.2\nMPICH configure: --with-device=ch4:ofi\n"
    assert info.cuda_awareness("MPICH", plain, {}, query=lambda: None)[0] == "unknown"
    off = {"MPIR_CVAR_ENABLE_GPU": "0"}
    assert info.cuda_awareness("MPICH", cuda, off, query=lambda: 1) == (
        "no", "MPIR_CVAR_ENABLE_GPU=0"
    )


def test_cuda_aware_other_vendor():
    assert info.cuda_awareness("Intel MPI", "", {}, query=lambda: None)[0] == "unknown"


def test_ompi_built_with_cuda_parse():
    assert info.ompi_built_with_cuda(OMPI_INFO.format("true")) is True
    assert info.ompi_built_with_cuda(OMPI_INFO.format("false")) is False
    assert info.ompi_built_with_cuda("mca:other:value:1") is None
    assert info.ompi_built_with_cuda(None) is None


def test_mpix_query_on_this_mpi():
    pytest.importorskip("mpi4py.MPI")
    assert info.mpix_query_cuda_support() in (0, 1, None)


def test_rank_table_binds_like_the_runtime(monkeypatch):
    monkeypatch.delenv("DISTSORT_DEVICE", raising=False)
    (row,) = info.rank_table(None, device_count=4)
    assert row["rank"] == 0 and row["local_rank"] == 0 and row["gpu"] == 0
    monkeypatch.setenv("DISTSORT_DEVICE", "3")
    assert info.rank_table(None, device_count=4)[0]["gpu"] == 3


def test_info_flags_unknown_and_unreadable_settings(no_cupy, monkeypatch):
    """A misspelt DISTSORT_ name is otherwise ignored without a word: info says so, and says
    why a value cannot be read; good settings stand as they are."""
    monkeypatch.setenv("DISTSORT_BACKEND", "cpu")
    monkeypatch.setenv("DISTSORT_CHUNK", "3")
    monkeypatch.setenv("DISTSORT_TIMEOUT", "soon")
    env = {line.split()[1].split("=")[0]: line for line in
           info.format_info(info.collect_info()).splitlines() if line.startswith("env ")}
    assert env["DISTSORT_CHUNK"].endswith("not a distsort setting (docs/settings.md lists them)")
    assert "DISTSORT_TIMEOUT='soon': expected a float" in env["DISTSORT_TIMEOUT"]
    assert env["DISTSORT_BACKEND"].endswith("DISTSORT_BACKEND=cpu")


def test_info_command_runs(tmp_path):
    env = {"PYTHONPATH": str(ROOT), "DISTSORT_BACKEND": "cpu", "PATH": "/usr/bin:/bin"}
    result = subprocess.run(
        [sys.executable, "-m", "distsort", "info"], cwd=tmp_path, env=env,
        capture_output=True, text=True, timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert "CUDA-aware" in result.stdout and "NCCL" in result.stdout
    # the command line's own BLAS setting, made before NumPy was imported, and said to be its own
    assert "OPENBLAS_NUM_THREADS=1   <- distsort's default" in result.stdout


@pytest.mark.parametrize("backend, setting, want", [
    ("cpu", None, "MPI (host buffers)"),
    ("none: some rank sees no GPU", None, "none: no backend"),
    ("gpu", None, "none (one rank: no rows move between ranks)"),
    ("gpu", "ipc", "the GPUs' copy engines through CUDA IPC"),
    ("gpu", "nccl", "NCCL (DISTSORT_TRANSPORT=nccl)"),
    ("gpu", "tcp", "none: DISTSORT_TRANSPORT='tcp': choose one of auto, ipc, nccl"),
])
def test_transport_info_says_what_a_sort_would_take(monkeypatch, backend, setting, want):
    """One rank (COMM_SELF): nothing to build by default; what was asked for otherwise."""
    from mpi4py import MPI

    if setting is None:
        monkeypatch.delenv("DISTSORT_TRANSPORT", raising=False)
    else:
        monkeypatch.setenv("DISTSORT_TRANSPORT", setting)
    assert info.transport_info(MPI.COMM_SELF, backend).startswith(want)


@pytest.mark.mpi(min_size=2)
def test_collect_info_under_mpi():
    from mpi4py import MPI

    comm = MPI.COMM_WORLD
    d = info.collect_info(comm)
    assert d["mpi"]["size"] == comm.Get_size()
    if d["backend"]["selected"] == "cpu":  # one node: cma.py where the kernel lets it, else MPI
        pushed = choice.DESCRIBED[choice.CMA] + "; plain keys on 5 to 64 ranks written"
        assert (d["transport"] in (choice.DESCRIBED[choice.CMA], choice.DESCRIBED[choice.MPI_HOST])
                or d["transport"].startswith(pushed))
    assert [r["rank"] for r in d["ranks"]] == list(range(comm.Get_size()))
    by_host: dict[str, list[int]] = {}
    for r in d["ranks"]:
        by_host.setdefault(r["host"], []).append(r["local_rank"])
    for local_ranks in by_host.values():
        assert sorted(local_ranks) == list(range(len(local_ranks)))


def test_info_tells_distsorts_own_mpi_defaults_from_the_users(no_cupy, monkeypatch):
    """The Open MPI settings the command line set itself are marked so; the user's are not."""
    import distsort

    monkeypatch.setattr(distsort, "DEFAULTS_SET", {"OMPI_MCA_pml": "ob1"})
    monkeypatch.setenv("OMPI_MCA_pml", "ob1")
    monkeypatch.setenv("OMPI_MCA_btl_tcp_if_include", "eth0")
    env = {line.split()[1].split("=")[0]: line for line in
           info.format_info(info.collect_info()).splitlines() if line.startswith("env ")}
    assert env["OMPI_MCA_pml"].endswith("<- distsort's default for this launch (launch/README.md)")
    assert env["OMPI_MCA_btl_tcp_if_include"].endswith("=eth0")


def test_info_leaves_out_what_mpirun_hands_its_ranks(no_cupy, monkeypatch):
    """Open MPI's mpirun gives each rank some twenty OMPI_MCA_ variables of its own (its
    daemon's address, the job's ids): info lists the user's settings, not those."""
    plumbing = {"OMPI_MCA_orte_hnp_uri": "1.0;tcp://10.0.0.1:5", "OMPI_MCA_ess_base_vpid": "0",
                "OMPI_MCA_ess": "^singleton", "OMPI_MCA_pmix": "^s1,s2,cray,isolated",
                "OMPI_MCA_plm": "isolated", "OMPI_MCA_initial_wdir": "/work",
                "OMPI_MCA_shmem_RUNTIME_QUERY_hint": "mmap"}
    shown = {"OMPI_MCA_btl_tcp_if_include": "eth0", "OMPI_MCA_orte_tmpdir_base": "/dev/shm",
             "OMPI_MCA_orte_bound_at_launch": "1", "OMPI_MCA_mpi_oversubscribe": "1"}
    for name, value in {**plumbing, **shown}.items():  # shown: the user's, or worth seeing
        monkeypatch.setenv(name, value)
    env = info.collect_info()["environment"]
    assert {name: env.get(name) for name in shown} == shown
    assert not set(plumbing) & set(env)
    monkeypatch.setenv("OMPI_MCA_ess", "pmi")  # a value mpirun does not set: the user's
    assert info.collect_info()["environment"]["OMPI_MCA_ess"] == "pmi"
