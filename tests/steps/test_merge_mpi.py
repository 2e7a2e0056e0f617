"""On CPUs each rank groups keys of 4 or 8 bytes, alone or with 4- or 8-byte values, by
destination with the C scatter (partition.scattered, local/scatter.py) and sorts what it
receives; other rows (and all rows where some rank has no C compiler) it sorts first and
receives one sorted run from every rank, which it merges (finish.merged, local/merge.py), as
out of core each round's slices of the runs (outofcore/merge.py). Without a C compiler it sorts
them, with the same results.

Run as `mpiexec -n P python -m pytest --with-mpi tests/steps/test_merge_mpi.py`.
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
    reference_order,
)

import distsort
from distsort.local import clib, merge
from distsort.outofcore import merge as outofcore_merge
from distsort.report import SortReport
from distsort.steps import finish, partition

pytestmark = [pytest.mark.mpi(min_size=2)]


@pytest.fixture(params=["compiled", "no compiler", "rank 1 without compiler"])
def merges(request, monkeypatch) -> list:
    """Count the merges and scatters that ran; "no compiler": the C kernels could not be built
    here; "rank 1 without compiler": on rank 1 only (the ranks must still partition alike, all
    sorting first, and pick the same splitters)."""
    if request.param == "no compiler" or (request.param == "rank 1 without compiler"
                                          and COMM.rank == 1):
        monkeypatch.setattr(clib, "library", lambda: None)
    elif not merge.available(np.zeros(1, np.uint32)):
        pytest.skip("no C compiler here to build the C kernels")
    calls, real, real_scattered = [], finish.merged, partition.scattered

    def counted(*args, **kwargs):
        out = real(*args, **kwargs)
        if out is not None:
            calls.append(args)
        return out

    def scattered(*args, **kwargs):
        calls.append(args)
        return real_scattered(*args, **kwargs)

    monkeypatch.setattr(finish, "merged", counted)
    monkeypatch.setattr(outofcore_merge, "merged", counted)
    monkeypatch.setattr(partition, "scattered", scattered)
    return calls


@pytest.mark.parametrize("dtype", ["uint8", "int16", "uint32", "int64", "float32", "float64"])
@pytest.mark.parametrize("descending", [False, True])
def test_keys_match_numpy(merges, dtype, descending):
    x = local_data("fewdistinct", dtype, 3000 + 101 * COMM.rank, seed=9)
    shard = distsort.sort(x, backend="cpu", descending=descending)
    np.testing.assert_array_equal(everything(shard), reference(everything(x), descending))
    assert bool(merges) == (clib.library() is not None)


def test_pairs_and_argsort_keep_ties_in_input_order(merges):
    keys = local_data("fewdistinct", "float64", 2500 + 13 * COMM.rank, seed=4)
    check_pairs_and_argsort_keep_ties(keys)
    assert bool(merges) == (clib.library() is not None)


def test_ranks_without_rows(merges):
    x = local_data("uniform", "uint32", 5000 if COMM.rank == 0 else 0, seed=2)
    shard = distsort.sort(x, backend="cpu")
    np.testing.assert_array_equal(everything(shard), np.sort(everything(x)))


@pytest.mark.parametrize("dtype", ["uint32", "float64"])
def test_out_of_core_rounds_merge_their_slices_of_the_runs(merges, dtype):
    """A budget of 64 KiB: many runs a rank, many rounds; pairs keep ties in input order."""
    keys = local_data("fewdistinct", dtype, 20000 + 999 * COMM.rank, seed=3)
    start = COMM.exscan(len(keys)) or 0
    values = np.arange(start, start + len(keys), dtype=np.int64)
    k, v = distsort.sort_pairs(keys, values, backend="cpu", stable=True, device_memory="64KiB")
    order = reference_order(everything(keys), False)
    np.testing.assert_array_equal(everything(v), order)
    np.testing.assert_array_equal(everything(k), everything(keys)[order])
    report = SortReport()
    shard = distsort.sort(keys, backend="cpu", device_memory="64KiB", report=report)
    np.testing.assert_array_equal(everything(shard), reference(everything(keys), False))
    assert report.path == "out of core"
    assert bool(merges) == (clib.library() is not None)


def test_every_rank_sorts_what_it_receives_in_the_room_it_sent_from(monkeypatch):
    """Ranks that receive more keys than they sent (here the low ranks: their pieces are the
    smaller) still sort with the grouped keys' buffer as the radix sort's second one: the
    grouped keys have the receive area's size again behind it (partition.scattered), no new
    shard-sized buffer."""
    from distsort.runtime import get_runtime

    if clib.library() is None:
        pytest.skip("no C compiler here: the ranks sort first and merge")
    engine = get_runtime(COMM, "cpu").backend.engine
    fits, real = [], engine.sort

    def sort(keys, *args, scratch=None, **options):
        fits.append(clib.fitting(scratch, keys) is not None)
        return real(keys, *args, scratch=scratch, **options)

    monkeypatch.setattr(engine, "sort", sort)
    rng = np.random.default_rng(COMM.Get_rank())
    keys = rng.integers(0, 2**32, 100_000 + 20_000 * COMM.Get_rank(), dtype=np.uint64)
    keys = keys.astype(np.uint32)
    got = distsort.sort(keys, backend="cpu")
    np.testing.assert_array_equal(everything(got), np.sort(everything(keys)))
    assert fits == [True]


@pytest.mark.parametrize("transport", ["cma", "mpi"])
@pytest.mark.parametrize("values", [False, True])
def test_rows_grouped_where_they_land_arrive_over_either_transport(monkeypatch, transport,
                                                                     values):
    """partition.scattered places each rank's own rows in its receive area and the exchange
    moves only the other ranks' blocks into it (exchange._into_place): over cross-memory
    attach and over MPI (which refuses a send and a receive at one address: an empty area has
    a buffer of its own), with ranks that hold nothing or receive nothing."""
    from distsort.transport import cma

    if clib.library() is None:
        pytest.skip("no C compiler here: the ranks sort first and merge")
    if transport == "mpi":
        monkeypatch.setattr(cma, "connect", lambda comm: None)
    monkeypatch.setattr("distsort.runtime._cache", {})
    for sizes in ([0, 3], [40_000, 0], [1, 1], [90_000, 30_001]):
        keys = local_data("uniform", "uint64", sizes[COMM.rank % 2], seed=COMM.rank)
        start = COMM.exscan(len(keys)) or 0
        if values:
            moved = np.arange(start, start + len(keys), dtype=np.int64)
            k, v = distsort.sort_pairs(keys, moved, backend="cpu", stable=True)
            order = reference_order(everything(keys), False)
            np.testing.assert_array_equal(everything(v), order)
        else:
            k = distsort.sort(keys, backend="cpu")
        np.testing.assert_array_equal(everything(k), reference(everything(keys), False))
    from distsort.runtime import get_runtime

    used = get_runtime(COMM, "cpu").transport.name
    assert used == transport or (transport == "cma" and cma.connect(COMM) is None)
