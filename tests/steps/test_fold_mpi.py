"""The fold (steps/fold.py), where every rank runs on one GPU: rank 0 sorts every row, each rank
gets an even slice. Here on the CPU backend, its runtime's placement made that of ranks on one
GPU, so CI runs the fold's moves and its results against NumPy: keys of every kind, pairs,
argsort and records; and DISTSORT_SHARED_GPU=split sorts as before.

Run as `mpiexec -n P python -m pytest --with-mpi tests/steps/test_fold_mpi.py`.
"""

from __future__ import annotations

import numpy as np
import pytest
from helpers import (
    COMM,
    check_pairs_and_argsort_keep_ties,
    everything,
    local_data,
    reference,
)

import distsort
from distsort.errors import DistsortError, RemoteError
from distsort.report import SortReport
from distsort.runtime import get_runtime
from distsort.steps.fold import PATH, even_shards, sort_folded
from distsort.transport.choice import Placement

pytestmark = pytest.mark.mpi
RANKS = COMM.Get_size()


@pytest.fixture
def one_gpu(monkeypatch):
    """The CPU runtime, its ranks placed on one GPU (restored after the test)."""
    rt = get_runtime(COMM, "cpu")
    monkeypatch.setattr(rt, "placement", Placement(((0, "host"),) * RANKS, ("gpu0",) * RANKS))
    return rt


def folded(report: SortReport) -> bool:
    return report.path == PATH


@pytest.mark.parametrize("dtype", ["uint32", "int64", "float32", "float64", "bool"])
@pytest.mark.parametrize("descending", [False, True])
def test_folded_sort_matches_numpy_in_even_shards(one_gpu, dtype, descending):
    x = local_data("fewdistinct", dtype if dtype != "bool" else "uint8", 1000 + 37 * COMM.rank,
                   seed=5)
    x = x.astype(dtype)
    report = SortReport()
    shard = distsort.sort(x, backend="cpu", descending=descending, report=report)
    np.testing.assert_array_equal(everything(shard), reference(everything(x), descending))
    total = len(everything(x))
    assert len(shard) == even_shards(total, RANKS)[COMM.rank] and shard.dtype == x.dtype
    assert folded(report) == (RANKS > 1) and report.global_count == total


def test_folded_pairs_and_argsort_keep_ties_in_input_order(one_gpu):
    keys = local_data("fewdistinct", "float64", 2000 + 11 * COMM.rank, seed=6)
    check_pairs_and_argsort_keep_ties(keys)


def test_folded_records_match_numpy(one_gpu):
    records = np.random.default_rng([COMM.rank, 8]).integers(0, 4, (500 + COMM.rank, 7),
                                                               dtype=np.uint8)
    shard = distsort.sort_records(records, 3, backend="cpu")
    everyone = everything(records)
    want = everyone[np.lexsort(everyone[:, :3].T[::-1])]
    np.testing.assert_array_equal(everything(shard), want)


def test_some_ranks_without_rows_and_split_setting(one_gpu, monkeypatch):
    """Only the last rank holds rows: the fold still evens the shards. With
    DISTSORT_SHARED_GPU=split the same sort runs split (the sample sort's path)."""
    x = local_data("uniform", "uint64", 3000 if COMM.rank == RANKS - 1 else 0, seed=9)
    report = SortReport()
    shard = distsort.sort(x, backend="cpu", report=report)
    np.testing.assert_array_equal(everything(shard), reference(everything(x), False))
    assert len(shard) == even_shards(3000, RANKS)[COMM.rank] and folded(report) == (RANKS > 1)
    monkeypatch.setenv("DISTSORT_SHARED_GPU", "split")
    report = SortReport()
    shard = distsort.sort(x, backend="cpu", report=report)
    np.testing.assert_array_equal(everything(shard), reference(everything(x), False))
    assert not folded(report) and report.path == "in memory"


def test_rank_0_out_of_memory_fails_the_fold_on_every_rank_alike(one_gpu):
    """Rank 0 alone sorts, so it alone can run out of memory: every rank raises the agreed
    error (rank 0 its message, the others RemoteError), none waits, and the ranks sort on."""
    x = np.arange(100 + COMM.rank, dtype=np.uint32)[::-1].copy()

    def run(columns, overwrite=False):
        raise MemoryError("no room")

    with pytest.raises(DistsortError) as caught:
        sort_folded(one_gpu, SortReport(), [x], COMM.allgather(len(x)), run)
    error = caught.value
    assert error.agreed and isinstance(error, RemoteError) == (COMM.rank != 0)
    assert "rank 0 ran out of memory (no room); nothing was written" in str(error)
    shard = distsort.sort(x, backend="cpu")
    np.testing.assert_array_equal(everything(shard), reference(everything(x), False))
