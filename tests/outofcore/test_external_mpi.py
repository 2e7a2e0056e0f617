"""The out-of-core sort against NumPy under MPI (pytest-mpi), with budgets that force many runs.

Run as `mpiexec -n P python -m pytest --with-mpi tests/outofcore/test_external_mpi.py` for P = 1..4.
Every case checks that each rank formed at least 8 runs, so the out-of-core path is what ran.
"""

from __future__ import annotations

import numpy as np
import pytest
from helpers import assert_balanced, everything, local_data, odd_values, reference, reference_order

import distsort
from distsort.memory import parse_size
from distsort.outofcore import layout as ooc_layout
from distsort.outofcore import sort as ooc
from distsort.transport import row_bytes

MPI = pytest.importorskip("mpi4py.MPI")
COMM = MPI.COMM_WORLD

pytestmark = pytest.mark.mpi


@pytest.fixture
def layouts(monkeypatch):
    """The layouts the out-of-core sorts chose, to check that they ran with many runs."""
    seen = []
    plan = ooc.plan_layout

    def spy(*args, **kwargs):
        seen.append(plan(*args, **kwargs))
        return seen[-1]

    monkeypatch.setattr(ooc, "plan_layout", spy)
    return seen


def tight(*arrays) -> int:
    """A budget in bytes that gives the largest rank about 12 runs of plain keys (more of
    anything wider: a row then costs more than 4x its bytes on the device)."""
    width = sum(row_bytes(a) for a in arrays)
    return max(4 * width * COMM.allreduce(len(arrays[0]), op=MPI.MAX) // 12, 64)


def assert_many_runs(layouts, at_least: int = 8) -> None:
    assert layouts, "the out-of-core path did not run"
    for layout in layouts:
        assert min(r for r, c in zip(layout.runs_per_rank, layout.counts) if c) >= at_least


@pytest.mark.parametrize("dtype", ["int8", "uint16", "int32", "uint32", "int64", "float32",
                                   "float64"])
@pytest.mark.parametrize("dist", ["uniform", "fewdistinct", "sorted", "reverse", "specials"])
def test_keys_match_numpy(layouts, dtype, dist):
    x = local_data(dist, dtype, 3000 + 17 * COMM.Get_rank(), seed=11)
    for descending in (False, True):
        shard = distsort.sort(x, descending=descending, device_memory=tight(x))
        assert shard.dtype == x.dtype
        np.testing.assert_array_equal(everything(shard), reference(everything(x), descending))
        assert_balanced(shard, len(everything(x)))
    assert_many_runs(layouts)


@pytest.mark.parametrize("dtype", ["int32", "float32", "float64", "uint64"])
@pytest.mark.parametrize("dist", ["equal", "fewdistinct", "specials"])
def test_stable_pairs_and_argsort(layouts, dtype, dist):
    x = local_data(dist, dtype, 2500, seed=12)
    data = everything(x)
    for descending in (False, True):
        order = reference_order(data, descending)
        got = distsort.argsort(x, descending=descending, device_memory=tight(x))
        np.testing.assert_array_equal(everything(got), order)
        positions = np.arange(len(x)) + (COMM.exscan(len(x)) or 0)
        keys, values = distsort.sort_pairs(x, positions, stable=True, descending=descending,
                                           device_memory=tight(x))
        np.testing.assert_array_equal(everything(values), order)
        assert everything(keys).tobytes() == data[order].tobytes()  # -0.0 and NaN bits kept
    assert_many_runs(layouts)


def test_pairs_with_record_values(layouts):
    x = local_data("fewdistinct", "uint16", 1500, seed=13)
    rows = np.random.default_rng(COMM.Get_rank()).integers(0, 256, (len(x), 24), dtype=np.uint8)
    rows[:, :2] = x.view(np.uint8).reshape(-1, 2)  # each row carries its key
    keys, values = distsort.sort_pairs(x, rows, stable=True, device_memory=tight(x, rows))
    np.testing.assert_array_equal(values[:, :2].copy().view(np.uint16).ravel(), keys)
    order = np.argsort(everything(x), kind="stable")
    np.testing.assert_array_equal(everything(values), everything(rows)[order])
    assert_many_runs(layouts)


@pytest.mark.parametrize("kind", ["datetime", "bytes", "record"])
def test_pairs_with_values_of_any_dtype(layouts, kind):
    x = local_data("fewdistinct", "int32", 2000, seed=15)
    values = odd_values(kind, len(x), COMM.exscan(len(x)) or 0)
    _, got = distsort.sort_pairs(x, values, stable=True, device_memory=tight(x, values))
    order = np.argsort(everything(x), kind="stable")
    np.testing.assert_array_equal(everything(got), everything(values)[order])
    assert_many_runs(layouts)


@pytest.mark.parametrize("key_size", [1, 10, 13])
@pytest.mark.parametrize("descending", [False, True])
def test_records_in_memcmp_order(layouts, key_size, descending):
    rng = np.random.default_rng([14, COMM.Get_rank()])
    records = rng.integers(0, 4, (1500, 20), dtype=np.uint8)  # few byte values: many ties
    out = distsort.sort_records(records, key_size, descending=descending,
                                 device_memory=tight(records))
    everyone = everything(records)
    keys = sorted(bytes(r[:key_size]) for r in everyone)
    got = everything(out)
    assert [bytes(r[:key_size]) for r in got] == (keys[::-1] if descending else keys)
    assert sorted(map(bytes, got)) == sorted(map(bytes, everyone))
    assert_many_runs(layouts)


@pytest.mark.parametrize("sizes", [(0,), (0, 4000), (4000, 0), (3000, 0, 5000), (0, 0, 0, 9000)])
def test_empty_ranks(layouts, sizes):
    n = sizes[COMM.Get_rank() % len(sizes)]
    x = (np.arange(n, dtype=np.int32)[::-1] * (COMM.Get_rank() + 1)) % 977
    shard = distsort.sort(x, device_memory=tight(x))
    np.testing.assert_array_equal(everything(shard), np.sort(everything(x)))
    if COMM.allreduce(n):
        assert_many_runs(layouts)
        assert_balanced(shard, len(everything(x)))


def test_all_equal_keys_are_balanced_and_stable(layouts):
    x = np.full(4000, 7, dtype=np.int64)
    positions = np.arange(len(x)) + (COMM.exscan(len(x)) or 0)
    keys, values = distsort.sort_pairs(x, positions, stable=True, device_memory=tight(x))
    np.testing.assert_array_equal(everything(values), np.arange(len(everything(x))))
    assert_balanced(keys, len(everything(x)))
    assert_many_runs(layouts)


@pytest.mark.parametrize("dist", ["uniform", "equal", "fewdistinct", "sorted", "reverse"])
def test_sampled_splitters_cut_runs_right(layouts, monkeypatch, dist):
    """Few samples (stride > 1): cuts fall between samples and are found in the run's keys."""
    monkeypatch.setattr(ooc_layout, "SAMPLE_TARGET", 500)
    x = local_data(dist, "int64", 20000 * (1 - COMM.Get_rank() % 2), seed=15)  # odd ranks empty
    positions = np.arange(len(x)) + (COMM.exscan(len(x)) or 0)
    budget = 112 * 2500  # 2500 rows of int64 keys and positions: 8 runs per rank
    keys, values = distsort.sort_pairs(x, positions, stable=True, device_memory=budget)
    np.testing.assert_array_equal(everything(values), np.argsort(everything(x), kind="stable"))
    assert_balanced(keys, len(everything(x)))
    assert all(layout.stride > 1 for layout in layouts)
    assert_many_runs(layouts)
    assert_many_runs(layouts)


def test_sampled_records_with_long_common_prefixes(layouts, monkeypatch):
    monkeypatch.setattr(ooc_layout, "SAMPLE_TARGET", 300)
    rng = np.random.default_rng([16, COMM.Get_rank()])
    records = rng.integers(0, 3, (8000, 12), dtype=np.uint8)
    records[:, :8] = 9  # the first key word is the same everywhere: the second decides
    out = distsort.sort_records(records, 11, device_memory=116 * 1000)  # 1000 rows a run
    everyone = everything(records)
    got = everything(out)
    assert [bytes(r[:11]) for r in got] == sorted(bytes(r[:11]) for r in everyone)
    assert sorted(map(bytes, got)) == sorted(map(bytes, everyone))
    assert all(layout.stride > 1 for layout in layouts)
    assert_many_runs(layouts)


def test_a_generous_budget_keeps_the_in_memory_sort(layouts):
    x = local_data("uniform", "uint32", 3000, seed=17)
    shard = distsort.sort(x, device_memory="1GiB")
    np.testing.assert_array_equal(everything(shard), np.sort(everything(x)))
    assert not layouts


def test_one_rank_over_budget_takes_every_rank_out_of_core(layouts):
    n = 6000 if COMM.Get_rank() == 0 else 10
    x = local_data("uniform", "uint32", n, seed=18)
    smallest = tight(x)
    budget = smallest if COMM.Get_rank() == 0 else "1GiB"  # ranks agree on the smallest
    shard = distsort.sort(x, device_memory=budget)
    np.testing.assert_array_equal(everything(shard), np.sort(everything(x)))
    assert len(layouts) == 1


def test_parse_size():
    assert parse_size("8GiB") == parse_size("8G") == 8 * 2**30
    assert parse_size("1MiB") == parse_size("1m") == 2**20
    assert parse_size("8GB") == 8 * 10**9
    assert parse_size("1e9") == parse_size(10**9) == 10**9
    for bad in ("", "lots", "-1", "0", "8QB"):
        with pytest.raises(ValueError):
            parse_size(bad)


def test_runs_formed_in_place_in_the_input(layouts):
    """The benchmark's way: the input buffer holds the runs, the output is streamed to write."""
    from distsort.report import SortReport
    from distsort.runtime import get_runtime

    x = local_data("uniform", "uint32", 5000, seed=19)
    keys = x.copy()
    got = {}
    source = ooc_layout.Source(len(keys), lambda lo, hi: [keys[lo:hi]], lambda c: c,
                             lambda c: [c[0]], lambda c: c)

    def write(row, columns):
        got[row] = columns[0].copy()

    rt = get_runtime(COMM, "cpu")
    ooc.external_sort(rt, source, tight(x), SortReport(), write=write, store=[keys])
    rows = sorted(got)
    shard = np.concatenate([got[r] for r in rows]) if rows else x[:0]
    first = COMM.exscan(len(shard)) or 0
    assert not rows or rows[0] == first  # rows are global output rows
    np.testing.assert_array_equal(everything(shard), np.sort(everything(x)))
    assert_many_runs(layouts)


def test_a_budget_far_too_small_is_a_clear_error(monkeypatch):
    from distsort.errors import DistsortError

    monkeypatch.setattr(ooc_layout, "SAMPLE_LIMIT", 1000)
    x = local_data("uniform", "uint32", 3000, seed=20)
    with pytest.raises(DistsortError) as failed:
        distsort.sort(x, device_memory=256)
    if COMM.Get_rank() == 0:  # the one message; the other ranks know that rank 0 failed
        assert "too small" in str(failed.value) and "at least" in str(failed.value)


def test_a_budget_that_would_cut_thousands_of_runs_and_rounds_is_refused():
    """Below the sample's limit too: 48 bytes a key leave 2 keys a run, and the sort would
    spend minutes slicing runs; the one that the message names sorts."""
    from distsort.errors import DistsortError

    x = local_data("uniform", "float64", 30000, seed=21)
    with pytest.raises(DistsortError) as failed:
        distsort.sort(x, device_memory=100)
    said = str(failed.value)
    if COMM.Get_rank() == 0:
        assert "too small" in said and "give at least" in said
        need = int(said.split("give at least ")[1].split()[0])
    shard = distsort.sort(x, device_memory=COMM.bcast(need if COMM.Get_rank() == 0 else None))
    np.testing.assert_array_equal(everything(shard), np.sort(everything(x)))


def test_host_memory_is_input_output_and_a_tenth(layouts, monkeypatch):
    """The benchmark's way (runs formed in place in the input, the output made by the sort):
    the path's host allocations (tracemalloc: NumPy reports its buffers to it) peak at the
    output plus at most 10% of the input for a round's buffers, plus what does not scale with
    the input: the sort work the budget allows (on the CPU backend the device is the host) and
    the splitter samples every rank gathers (about 56 bytes each). Here that allowance stays
    below half the input, so one more copy of the input (or of the output) would fail."""
    import tracemalloc

    from distsort.report import SortReport
    from distsort.runtime import get_runtime

    monkeypatch.setattr(ooc_layout, "SAMPLE_TARGET", 1 << 12)
    # every rank gathers ~P^2 samples whatever the input's size (the runs' count grows with P,
    # the stride shrinks with it): rows a rank grow with P^2 past 4 ranks, so that the allowance
    # stays below half the input at any rank count
    rows = (1 << 22) * max(16, COMM.Get_size() ** 2) // 16
    keys = np.random.default_rng([22, COMM.Get_rank()]).integers(0, 2**32, rows, np.uint32)
    lowest = COMM.allreduce(int(keys.min()), op=MPI.MIN)
    source = ooc_layout.Source(len(keys), lambda lo, hi: [keys[lo:hi]], lambda c: c,
                             lambda c: [c[0]], lambda c: c)
    budget = keys.nbytes // 4
    tracing = tracemalloc.is_tracing()
    tracemalloc.start()
    tracemalloc.reset_peak()
    before = tracemalloc.get_traced_memory()[0]
    out = ooc.external_sort(get_runtime(COMM, "cpu"), source, budget, SortReport(),
                                 store=[keys])[0]
    extra = tracemalloc.get_traced_memory()[1] - before - out.nbytes
    if not tracing:
        tracemalloc.stop()
    layout = layouts[-1]
    samples = sum(layout.counts) // layout.stride + sum(layout.runs_per_rank)
    allowed = 0.10 * keys.nbytes + budget / 2 + 56 * samples
    assert allowed < 0.6 * keys.nbytes and extra <= allowed
    assert np.all(out[1:] >= out[:-1]) and COMM.allreduce(len(out)) == COMM.allreduce(len(keys))
    assert COMM.allgather(int(out[0]) if len(out) else None)[0] == lowest
    assert_many_runs(layouts)


def capacity(x) -> int:
    return distsort.shard_capacity(COMM.allreduce(len(x)), COMM.Get_size())


@pytest.mark.parametrize("budget", ["tight", "1GiB"])  # out of core, and in memory
def test_out_holds_the_same_result(layouts, budget):
    x = local_data("fewdistinct", "float32", 3000 + 31 * COMM.Get_rank(), seed=23)
    records = np.random.default_rng([24, COMM.Get_rank()]).integers(0, 4, (1500, 12), np.uint8)
    positions = np.arange(len(x)) + (COMM.exscan(len(x)) or 0)
    memory = tight(x, positions) if budget == "tight" else budget
    calls = [
        (lambda **kw: [distsort.sort(x, stable=True, **kw)], [(x.dtype, ())]),
        (lambda **kw: list(distsort.sort_pairs(x, positions, stable=True, **kw)),
         [(x.dtype, ()), (positions.dtype, ())]),
        (lambda **kw: [distsort.argsort(x, descending=True, **kw)], [(np.int64, ())]),
        (lambda **kw: [distsort.sort_records(records, 5, **kw)], [(np.uint8, (12,))]),
    ]
    for call, kinds in calls:
        plain = call(device_memory=memory)
        outs = [np.full((capacity(records if len(k[1]) else x),) + k[1], 7, k[0]) for k in kinds]
        given = call(device_memory=memory, out=outs if len(outs) > 1 else outs[0])
        for got, want, out in zip(given, plain, outs):
            assert got.tobytes() == want.tobytes() and np.shares_memory(got, out)
    assert bool(layouts) == (budget == "tight")


@pytest.mark.parametrize("problem", ["dtype", "shape", "strided", "overlap", "arrays", "count"])
def test_a_wrong_out_is_one_clear_error_on_every_rank(problem):
    from distsort.errors import DistsortError

    x = local_data("uniform", "int32", 2000, seed=25)
    room = capacity(x)
    out = {"dtype": np.empty(room, np.int64), "shape": np.empty((room, 1), np.int32),
           "strided": np.empty(2 * room, np.int32)[::2], "overlap": x}.get(problem)
    bad = COMM.Get_rank() == COMM.Get_size() - 1  # one rank's out is wrong: all ranks fail
    if problem == "count":
        out = np.empty(10 if bad else room, np.int32)
    with pytest.raises(DistsortError) as failed:
        if problem == "arrays":
            distsort.sort_pairs(x, x.copy(), out=(np.empty(room, np.int32),),
                                device_memory=tight(x))
        else:
            distsort.sort(x, device_memory=tight(x), out=out if bad else np.empty(room, np.int32))
    words = {"dtype": "dtype int32", "shape": "shape", "strided": "C-contiguous",
             "overlap": "overlap", "arrays": "2 arrays", "count": "needs"}[problem]
    reporter = 0 if problem == "arrays" else COMM.Get_size() - 1  # its out is wrong on all
    if COMM.Get_rank() == reporter:
        assert words in str(failed.value)
