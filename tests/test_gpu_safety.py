"""Out of memory never gives a wrong result (distsort/gpu_safety.py), tested without a GPU: the
refusal of CuPy versions that can sort wrongly on OOM (faked versions), the budget under a CuPy
pool limit (a faked CuPy), and the one-line message the CLI prints for an OOM (a faked error).

The GPU side (a real OOM) is tests/job/test_oom_gpu.py.
"""

from __future__ import annotations

import sys
import types

import pytest

from distsort import cli, commands, gpu_safety, memory, runtime
from distsort.errors import DistsortError, RemoteError

MPI = pytest.importorskip("mpi4py.MPI")
COMM = MPI.COMM_WORLD


@pytest.mark.parametrize("version, unsafe", [
    ("13.6.0", True), ("13.6.1", True), ("12.3.0", True), ("9.0.0b1", True), ("v13.0", True),
    ("13.7.0", False), ("14.0.0rc1", False), ("14.2.0", False), ("15", False),
    ("not a version", True),
])
def test_cupy_versions_that_can_sort_wrongly_on_oom_are_unsafe(version, unsafe):
    assert gpu_safety.unsafe_cupy(version) is unsafe


def test_an_unsafe_cupy_is_refused_with_what_to_do():
    with pytest.raises(DistsortError) as caught:
        gpu_safety.require_safe_cupy("13.6.0")
    message = str(caught.value)
    assert "CuPy 13.6.0" in message and gpu_safety.CUPY_ISSUE in message
    assert "--backend cpu" in message and "pip install" in message
    gpu_safety.require_safe_cupy("14.2.0")  # a safe one passes


@pytest.fixture
def fake_gpus(monkeypatch):
    """Every rank 'sees' a GPU; returns a setter for the CuPy version the ranks report."""
    monkeypatch.setattr(runtime, "gpu_count", lambda: 1)
    monkeypatch.delenv("DISTSORT_BACKEND", raising=False)

    def installed(version: str) -> None:
        monkeypatch.setattr(gpu_safety, "cupy_version", lambda: version)

    return installed


@pytest.mark.parametrize("requested", ["gpu", "auto"], ids=["asked-gpu", "asked-auto"])
def test_the_gpu_backend_refuses_an_unsafe_cupy(fake_gpus, requested):
    fake_gpus("13.6.0")
    with pytest.raises(DistsortError, match="CuPy 13.6.0"):
        runtime.choose_backend(MPI.COMM_SELF, requested)
    assert runtime.choose_backend(MPI.COMM_SELF, "cpu") == "cpu"  # the CPU backend still runs
    fake_gpus("14.2.0")
    assert runtime.choose_backend(MPI.COMM_SELF, requested) == "gpu"


def test_the_backend_is_chosen_once_per_communicator_and_request(monkeypatch):
    """Choosing asks every rank (two collectives); a process asks once per request."""
    asked = []
    monkeypatch.setattr(runtime, "_chosen", {})
    monkeypatch.setattr(runtime, "choose_backend", lambda comm, req: asked.append(req) or "cpu")
    monkeypatch.delenv("DISTSORT_BACKEND", raising=False)
    for _ in range(3):
        assert runtime.get_runtime(MPI.COMM_SELF, "cpu").backend.name == "cpu"
        assert runtime.get_runtime(MPI.COMM_SELF).backend.name == "cpu"
    assert asked == ["cpu", "auto"]


@pytest.mark.mpi
def test_an_unsafe_cupy_gets_one_message_from_one_rank_and_stops_every_rank(fake_gpus):
    fake_gpus("13.6.0")
    with pytest.raises(DistsortError) as caught:
        runtime.choose_backend(COMM, "gpu")
    printed = COMM.allgather(not isinstance(caught.value, RemoteError))
    assert printed == [True] + [False] * (COMM.Get_size() - 1)
    assert caught.value.agreed


class OutOfMemoryError(Exception):
    """Stands in for cupy.cuda.memory.OutOfMemoryError."""


OutOfMemoryError.__module__ = "cupy.cuda.memory"


class CUDARuntimeError(RuntimeError):
    """Stands in for cupy_backends.cuda.api.runtime.CUDARuntimeError."""


@pytest.mark.parametrize("exc, says", [
    (OutOfMemoryError("Out of memory allocating 1,073,741,824 bytes"), "ran out of GPU memory"),
    (CUDARuntimeError("cudaErrorMemoryAllocation: out of memory"), "ran out of GPU memory"),
    (MemoryError(), "ran out of memory;"),
    (ValueError("not memory"), None),
    (CUDARuntimeError("cudaErrorIllegalAddress"), None),
])
def test_out_of_memory_errors_get_a_message_that_says_what_to_do(exc, says):
    message = gpu_safety.out_of_memory_message(3, exc)
    if says is None:
        assert message is None
    else:
        assert message.startswith("rank 3 " + says) and "--device-memory" in message


class AbortCalled(Exception):
    pass


def test_the_cli_prints_one_line_for_an_oom_and_aborts_the_job(monkeypatch, capsys):
    def sort_file(args, comm):
        raise OutOfMemoryError("Out of memory allocating 512 bytes")

    def abort(code):
        raise AbortCalled(code)

    world = types.SimpleNamespace(Get_rank=lambda: 1, Get_size=lambda: 4, Abort=abort,
                                  allgather=lambda mine: [mine] * 4)  # the settings' check
    monkeypatch.setattr(commands, "sort_file", sort_file)
    monkeypatch.setattr(cli, "MPI", types.SimpleNamespace(COMM_WORLD=world))
    with pytest.raises(AbortCalled) as aborted:
        cli.main(["sort", "in.npy", "-o", "out.npy"])
    assert aborted.value.args == (2,)  # MPI_Abort: every rank ends, non-zero
    err = capsys.readouterr().err
    assert err.startswith("distsort: error: rank 1 ran out of GPU memory")
    assert "--device-memory" in err
    assert err.count("\n") == 1 and "Traceback" not in err


@pytest.mark.parametrize("rank", [0, 1])
def test_ctrl_c_is_said_once_and_ends_every_rank(monkeypatch, capsys, rank):
    """Ctrl-C reaches every rank of the job: rank 0 says so, each ends the job with 130."""
    def sort_file(args, comm):
        raise KeyboardInterrupt

    def abort(code):
        raise AbortCalled(code)

    world = types.SimpleNamespace(Get_rank=lambda: rank, Get_size=lambda: 4, Abort=abort,
                                  allgather=lambda mine: [mine] * 4)  # the settings' check
    monkeypatch.setattr(commands, "sort_file", sort_file)
    monkeypatch.setattr(cli, "MPI", types.SimpleNamespace(COMM_WORLD=world))
    with pytest.raises(AbortCalled) as aborted:
        cli.main(["sort", "in.npy", "-o", "out.npy"])
    assert aborted.value.args == (130,)
    assert capsys.readouterr().err == ("distsort: interrupted\n" if rank == 0 else "")


def fake_cupy(free: int, cached: int, limit: int, used: int,
              total: int = 80 << 30) -> types.ModuleType:
    pool = types.SimpleNamespace(free_bytes=lambda: cached, get_limit=lambda: limit,
                                 used_bytes=lambda: used)
    cupy = types.ModuleType("cupy")
    cupy.get_default_memory_pool = lambda: pool
    info = types.SimpleNamespace(memGetInfo=lambda: (free, total))
    cupy.cuda = types.SimpleNamespace(runtime=info)
    return cupy


@pytest.mark.parametrize("limit, budget", [
    (0, 0.7 * (60 << 30)),  # no limit: 70% of what the device and the pool's cache have free
    (1 << 30, 0.7 * ((1 << 30) - (100 << 20))),  # a pool limit: 70% of what is left under it
])
def test_the_default_gpu_budget_stays_under_a_pool_limit(monkeypatch, limit, budget):
    monkeypatch.setitem(sys.modules, "cupy", fake_cupy(56 << 30, 4 << 30, limit, 100 << 20))
    assert memory.default_budget("gpu") == int(budget)


@pytest.mark.parametrize("sharers, budget", [
    (1, 0.7 * (60 << 30)),  # alone on the GPU: what is free
    (2, 0.7 * (40 << 30)),  # half of the 80 GiB device, below what is free
    (4, 0.7 * (20 << 30)),
])
def test_ranks_that_share_a_gpu_split_its_budget(monkeypatch, sharers, budget):
    monkeypatch.setitem(sys.modules, "cupy", fake_cupy(56 << 30, 4 << 30, 0, 0))
    assert memory.default_budget("gpu", sharers) == int(budget)
