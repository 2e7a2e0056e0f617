"""The out-of-core path on the GPU backend against NumPy: runs sorted on the device, kept in
pinned host memory, merged on the device.

`pytest -m gpu tests/outofcore/test_external_gpu.py` on one GPU, or under `mpirun -n 4 python -m
pytest --with-mpi -m gpu` on four. Skipped where no GPU is found.
"""

from __future__ import annotations

import numpy as np
import pytest
from helpers import odd_values, tie_heavy

import distsort
from distsort.outofcore import layout as ooc_layout
from distsort.outofcore import sort as ooc

MPI = pytest.importorskip("mpi4py.MPI")
COMM = MPI.COMM_WORLD
N = 400_000
BUDGET = "1MiB"  # ~52k plain uint32 keys a run: 8 runs of N keys, more of anything wider

pytestmark = pytest.mark.gpu


def everything(x) -> np.ndarray:
    import cupy

    return np.concatenate(COMM.allgather(cupy.asnumpy(x)))


@pytest.fixture
def layouts(monkeypatch):
    seen = []
    plan = ooc.plan_layout
    monkeypatch.setattr(ooc, "plan_layout", lambda *a: seen.append(plan(*a)) or seen[-1])
    return seen


def ran_out_of_core(layouts) -> bool:
    return bool(layouts) and min(layouts[-1].runs_per_rank) >= 6


@pytest.mark.parametrize("dtype", ["uint32", "int64", "float32"])
@pytest.mark.parametrize("descending", [False, True])
@pytest.mark.parametrize("on_device", [False, True])
def test_gpu_keys_out_of_core(layouts, dtype, descending, on_device):
    import cupy

    rng = np.random.default_rng([COMM.Get_rank(), 21])
    x = rng.integers(0, 256, N * np.dtype(dtype).itemsize, dtype=np.uint8).view(dtype)
    given = cupy.asarray(x) if on_device else x
    shard = distsort.sort(given, descending=descending, backend="gpu", device_memory=BUDGET)
    assert isinstance(shard, cupy.ndarray if on_device else np.ndarray)
    ref = np.sort(np.concatenate(COMM.allgather(x)))
    if descending:
        nan = np.isnan(ref) if ref.dtype.kind == "f" else np.zeros(len(ref), bool)
        ref = np.concatenate([ref[~nan][::-1], ref[nan]])
    np.testing.assert_array_equal(everything(shard), ref)
    assert ran_out_of_core(layouts)


@pytest.mark.parametrize("dist", ["equal", "fewdistinct", "sorted"])
def test_gpu_pairs_stable_and_argsort_out_of_core(layouts, dist):
    import cupy

    x, positions = tie_heavy(dist, N)
    keys, values = distsort.sort_pairs(cupy.asarray(x), cupy.asarray(positions), stable=True,
                                       device_memory=BUDGET)
    order = np.argsort(np.concatenate(COMM.allgather(x)), kind="stable")
    np.testing.assert_array_equal(everything(values), order)
    perm = distsort.argsort(cupy.asarray(x), device_memory=BUDGET)
    np.testing.assert_array_equal(everything(perm), order)
    assert max(COMM.allgather(len(keys))) <= 1.05 * N
    assert ran_out_of_core(layouts)


@pytest.mark.parametrize("kind", ["datetime", "record"])
def test_gpu_pairs_with_values_of_any_dtype_out_of_core(layouts, kind):
    x, positions = tie_heavy("fewdistinct", N)
    values = odd_values(kind, N, int(positions[0]))
    _, got = distsort.sort_pairs(x, values, stable=True, backend="gpu", device_memory=BUDGET)
    order = np.argsort(np.concatenate(COMM.allgather(x)), kind="stable")
    want = np.concatenate(COMM.allgather(values))[order]
    np.testing.assert_array_equal(np.concatenate(COMM.allgather(got)), want)
    assert ran_out_of_core(layouts)


@pytest.mark.parametrize("budget", [[], ["--device-memory", BUDGET]])
def test_gpu_sort_file_with_values_of_any_dtype(tmp_path_factory, layouts, budget):
    """`sort IN -o OUT --values V --verify` on GPUs, in memory and out of core, with datetime64
    values (which CuPy cannot hold) and strings."""
    from distsort.cli import main

    where = tmp_path_factory.getbasetemp() / "files"  # one folder for every rank: rank 0's
    where = COMM.bcast(str(where) if COMM.Get_rank() == 0 else None)
    x, positions = tie_heavy("fewdistinct", N)
    total = COMM.allreduce(N)
    every = np.concatenate(COMM.allgather(x))
    order = np.argsort(every, kind="stable")
    stamps = np.arange(total).astype("datetime64[ns]")
    names = np.char.encode(np.char.zfill(np.arange(total).astype(str), 8))
    if COMM.Get_rank() == 0:
        import os

        os.makedirs(where, exist_ok=True)
        np.save(f"{where}/k.npy", every)
        np.save(f"{where}/t.npy", stamps)
        names.tofile(f"{where}/n.raw")
    COMM.Barrier()
    for vals, dtype, out, want in (("t.npy", [], "t.out.npy", stamps[order]),
                                   ("n.raw", ["--values-dtype", "S8"], "n.out", names[order])):
        code = main(["sort", f"{where}/k.npy", "-o", f"{where}/s.npy", "--values",
                     f"{where}/{vals}", *dtype, "--values-output", f"{where}/{out}", "--stable",
                     "--verify", "--backend", "gpu", "--quiet", *budget])
        assert code == 0
        got = (np.load(f"{where}/{out}") if out.endswith(".npy")
               else np.fromfile(f"{where}/{out}", dtype="S8"))
        np.testing.assert_array_equal(got, want)
    assert bool(budget) == ran_out_of_core(layouts)


def test_gpu_records_out_of_core(layouts):
    import cupy

    rng = np.random.default_rng(COMM.Get_rank())
    records = rng.integers(0, 3, (50_000, 100), dtype=np.uint8)
    out = distsort.sort_records(cupy.asarray(records), 10, device_memory=BUDGET)
    got = everything(out)
    everyone = np.concatenate(COMM.allgather(records))
    order = np.lexsort([everyone[:, i] for i in range(9, -1, -1)])
    np.testing.assert_array_equal(got[:, :10], everyone[order][:, :10])
    assert sorted(map(bytes, got)) == sorted(map(bytes, everyone))
    assert ran_out_of_core(layouts)


def test_gpu_out_holds_the_same_shard(layouts):
    """out= on the GPU path: the shard is downloaded straight into the caller's (pinned)
    array, the same bytes as without it."""
    from distsort.memory import host_empty

    x = np.random.default_rng([COMM.Get_rank(), 26]).integers(0, 2**32, N, np.uint32)
    plain = distsort.sort(x, backend="gpu", device_memory=BUDGET)
    room = distsort.shard_capacity(COMM.allreduce(len(x)), COMM.Get_size())
    out = host_empty((room,), np.uint32, pinned=True)
    given = distsort.sort(x, backend="gpu", device_memory=BUDGET, out=out)
    assert np.shares_memory(given, out) and given.tobytes() == plain.tobytes()
    assert ran_out_of_core(layouts)


def test_a_large_budget_still_cuts_at_least_min_runs(layouts, monkeypatch):
    """Just over budget, a rank's input would make 6 runs (row cost 6x); on GPUs it is cut
    into MIN_RUNS, so copies overlap both ways."""
    monkeypatch.setattr(ooc_layout, "MIN_RUN_ROWS", 1000)
    x = np.random.default_rng([COMM.Get_rank(), 22]).integers(0, 2**32, N, dtype=np.uint32)
    budget = int(3.9 * COMM.allreduce(x.nbytes, op=MPI.MAX))  # under 4x: out of core
    shard = distsort.sort(x, device_memory=budget, backend="gpu")
    np.testing.assert_array_equal(everything(shard), np.sort(everything(x)))
    assert layouts and min(layouts[-1].runs_per_rank) >= ooc_layout.MIN_RUNS
