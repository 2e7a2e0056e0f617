"""Small sorts replayed as CUDA graphs (distsort/local/graphs.py): the first sort of a size goes
to CUB, the second captures a graph of our kernels, later ones replay it; every result is
CuPy's, in arrays of the caller's own."""

from __future__ import annotations

import numpy as np
import pytest

from distsort.keys import NumericCodec
from distsort.local import graphs, radix
from distsort.local.radix import GRAPH_MAX, GRAPH_MIN, SYNC_MIN, RadixEngine

pytestmark = pytest.mark.gpu

SIZES = [GRAPH_MIN, 3 * GRAPH_MIN + 5, SYNC_MIN + 3]


@pytest.fixture(scope="module")
def cp():
    return pytest.importorskip("cupy")


def fresh(cp, dtype, n: int, seed: int, high: int = 2**31):
    keys = cp.random.RandomState(seed).randint(0, high, n, dtype=cp.int64)
    return (keys - high // 2 if np.dtype(dtype).kind in "if" else keys).astype(dtype)


@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("dtype", [np.uint32, np.uint64])
def test_sorts_of_a_size_seen_before_are_replayed_and_right(cp, dtype, n):
    engine = RadixEngine()
    results, inputs = [], [fresh(cp, dtype, n, seed) for seed in range(4)]
    given = [keys.copy() for keys in inputs]
    for keys in inputs:
        results.append(engine.sort(keys))
        assert len(engine.graphs.graphs) == (len(results) > 1)
    for keys, was, got in zip(inputs, given, results):  # each result its own array, still right
        assert cp.array_equal(got, cp.sort(keys))
        assert cp.array_equal(keys, was)  # a replay reads the keys where they lie, writes none
    assert "radix" in engine.used and "cub" in engine.used


@pytest.mark.parametrize("n", [GRAPH_MIN + 1, SYNC_MIN + 3])
def test_replayed_argsort_is_stable(cp, n):
    engine = RadixEngine()
    for seed in range(3):
        keys = fresh(cp, np.uint32, n, seed, high=50)  # many ties
        order = engine.argsort(keys)
        assert order.dtype == np.int64
        assert cp.array_equal(order, cp.argsort(keys))  # CuPy's is stable
    assert len(engine.graphs.graphs) == 1


@pytest.mark.parametrize("dtype", [np.int32, np.float32, np.int64, np.float64])
def test_replayed_orders_of_numbers_take_their_codes_in_the_passes(cp, dtype):
    engine, codec = RadixEngine(), NumericCodec(np.dtype(dtype), False, canonical=True)
    for seed in range(3):
        keys = fresh(cp, dtype, 3 * GRAPH_MIN, seed, high=1000)  # ties, and -0.0 beside 0.0
        order = engine.argsort(keys, codec=codec)
        assert cp.array_equal(order, cp.argsort(keys))
    assert len(engine.graphs.graphs) == 1


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32])
@pytest.mark.parametrize("descending", [False, True])
def test_float_and_descending_sorts_are_replayed_through_their_codes(cp, dtype, descending):
    engine, codec = RadixEngine(), NumericCodec(np.dtype(dtype), descending)
    for seed in range(3):
        keys = fresh(cp, dtype, 3 * GRAPH_MIN, seed)
        want = cp.sort(keys)[::-1] if descending else cp.sort(keys)
        assert cp.array_equal(engine.sort(keys, codec=codec), want)
    assert len(engine.graphs.graphs) == 1


def test_a_narrow_bit_range_and_low_are_part_of_the_graph(cp):
    engine, n = RadixEngine(), 2 * GRAPH_MIN
    for seed in range(3):
        for low, end_bit in ((0, 20), (1000, 12)):
            keys = (fresh(cp, np.uint32, n, seed, high=1 << end_bit) + low).astype(np.uint32)
            got = engine.sort(keys, 0, end_bit, low=low)
            assert cp.array_equal(got, cp.sort(keys))
    assert len(engine.graphs.graphs) == 2


def test_graphs_are_kept_within_their_room_and_released(cp, monkeypatch):
    engine = RadixEngine()
    for n in (GRAPH_MIN, GRAPH_MIN + 8):
        for seed in range(2):
            keys = fresh(cp, np.uint32, n, seed)
            assert cp.array_equal(engine.sort(keys), cp.sort(keys))
        if n == GRAPH_MIN:  # room for one graph of this size, not two
            (first,) = engine.graphs.graphs.values()
            monkeypatch.setattr(graphs, "room", lambda nbytes=first.nbytes: nbytes * 3 // 2)
    assert [key[0] for key in engine.graphs.graphs] == [GRAPH_MIN + 8]
    engine.release()
    assert not engine.graphs.graphs


def test_a_size_our_kernels_sort_one_by_one_is_replayed_when_seen_again(cp):
    """From MIN_N a kind's first sort runs our kernels one by one, later ones its graph."""
    engine, n = RadixEngine(), radix.MIN_N["sort"] + 11
    for seed in range(3):
        keys = fresh(cp, np.uint32, n, seed)
        assert cp.array_equal(engine.sort(keys), cp.sort(keys))
        assert len(engine.graphs.graphs) == min(seed, 1)
    assert "cub" not in engine.used


def test_a_sort_too_large_for_a_graph_is_sorted_without_one(cp, monkeypatch):
    engine, n = RadixEngine(), GRAPH_MIN
    monkeypatch.setattr(graphs, "room", lambda: 1)
    for seed in range(3):
        keys = fresh(cp, np.uint32, n, seed)
        assert cp.array_equal(engine.sort(keys), cp.sort(keys))
    assert not engine.graphs.graphs and "radix" in engine.used


def test_each_stream_has_graphs_of_its_own(cp):
    engine, n = RadixEngine(), GRAPH_MIN
    stream = cp.cuda.Stream(non_blocking=True)
    for seed in range(2):
        for where in (cp.cuda.Stream.null, stream):
            with where:
                keys = fresh(cp, np.uint32, n, seed)
                got = engine.sort(keys)
                assert cp.array_equal(got, cp.sort(keys))
    assert len(engine.graphs.graphs) == 2


def test_sizes_never_seen_twice_capture_nothing(cp):
    engine = RadixEngine()
    for n in range(GRAPH_MIN, GRAPH_MIN + 4):
        keys = fresh(cp, np.uint32, n, n)
        assert cp.array_equal(engine.sort(keys), cp.sort(keys))
    assert not engine.graphs.graphs and engine.used == {"cub"}


def test_the_api_captures_nothing_for_a_size_sorted_once(cp):
    """One call asks the engine once whether it has seen a size: a size sorted once (through
    the codec's route, then CUB) is not taken for one seen twice."""
    import distsort
    from distsort.runtime import get_runtime

    engine, n = get_runtime(None, "gpu").backend.engine, GRAPH_MIN + 12345
    keys = fresh(cp, np.uint32, n, 1)
    assert cp.array_equal(distsort.sort(keys), cp.sort(keys))
    assert cp.array_equal(distsort.argsort(keys.view(np.int32)), cp.argsort(keys.view(np.int32)))
    assert not [key for key in engine.graphs.graphs if key[0] == n]


def test_the_api_replays_repeated_small_sorts(cp):
    import distsort

    for seed in range(3):
        keys = fresh(cp, np.uint32, GRAPH_MAX // 2 + 7, seed)
        assert cp.array_equal(distsort.sort(keys), cp.sort(keys))
        signed = keys.view(np.int32)
        assert cp.array_equal(distsort.argsort(signed), cp.argsort(signed))


def test_no_memory_for_a_graph_sorts_without_one(cp, monkeypatch):
    engine, n = RadixEngine(), GRAPH_MIN

    def no_memory(*args):
        raise cp.cuda.memory.OutOfMemoryError(n, n, n)

    monkeypatch.setattr(graphs, "_Graph", no_memory)
    for seed in range(3):
        keys = fresh(cp, np.uint32, n, seed)
        assert cp.array_equal(engine.sort(keys), cp.sort(keys))
    assert not engine.graphs.graphs and "radix" in engine.used


def test_a_low_never_seen_twice_captures_nothing(cp):
    """The finish's low is its rank's lowest splitter: it changes from sort to sort, and a
    graph holds it, so a size seen again with another low is a kind not seen before."""
    engine, n = RadixEngine(), 2 * GRAPH_MIN
    for seed in range(3):
        low = 1000 * seed
        keys = (fresh(cp, np.uint32, n, seed, high=1 << 20) + low).astype(np.uint32)
        assert cp.array_equal(engine.sort(keys, 0, 21, low=low), cp.sort(keys))
    assert not engine.graphs.graphs


@pytest.mark.parametrize("n", [GRAPH_MIN, radix.MIN_N["pairs"] + 3])
@pytest.mark.parametrize("key_dtype,value_dtype", [
    (np.uint32, np.uint32), (np.uint64, np.float64), (np.float32, np.int64),
    (np.int64, np.uint32), (np.uint32, np.uint16)])
def test_pairs_are_replayed_and_right(cp, n, key_dtype, value_dtype):
    """Values of 4 or 8 bytes ride through the graph's passes; others follow an argsort's
    graph by a gather. Stable, and the caller's keys and values left as given."""
    engine = RadixEngine()
    codec = NumericCodec(np.dtype(key_dtype), False) if np.dtype(key_dtype).kind != "u" else None
    for seed in range(3):
        keys = fresh(cp, key_dtype, n, seed, high=n // 4)  # ties: stability shows
        values = cp.arange(n).astype(value_dtype)
        before = keys.copy(), values.copy()
        got_keys, got_values = engine.sort_pairs(keys, values, codec=codec)
        order = cp.argsort(keys)  # stable (CUB)
        assert cp.array_equal(got_keys, keys[order]) and cp.array_equal(got_values, values[order])
        assert cp.array_equal(keys, before[0]) and cp.array_equal(values, before[1])
    assert len(engine.graphs.graphs) == 1


@pytest.mark.parametrize("key_dtype", [np.uint32, np.int64])
def test_descending_pairs_are_replayed_and_stable(cp, key_dtype):
    engine, n = RadixEngine(), GRAPH_MIN + 3
    codec = NumericCodec(np.dtype(key_dtype), True)
    for seed in range(3):
        keys = fresh(cp, key_dtype, n, seed, high=n // 4)
        values = cp.arange(n, dtype=cp.uint32)
        got_keys, got_values = engine.sort_pairs(keys, values, codec=codec)
        order = cp.asarray(np.argsort(-keys.get().astype(np.int64), kind="stable"))  # ties kept
        assert cp.array_equal(got_keys, keys[order]) and cp.array_equal(got_values, values[order])
    assert len(engine.graphs.graphs) == 1


def test_the_api_replays_repeated_pairs(cp):
    import distsort

    for seed in range(3):
        keys = fresh(cp, np.uint32, GRAPH_MIN + 5, seed, high=1000)
        values = cp.arange(keys.size, dtype=cp.uint32)
        got_keys, got_values = distsort.sort_pairs(keys, values, stable=True)
        order = cp.argsort(keys)  # stable (CUB)
        assert cp.array_equal(got_keys, keys[order]) and cp.array_equal(got_values, values[order])


@pytest.mark.parametrize("graphless", [False, True])
def test_unaligned_and_strided_views_are_replayed_and_right(cp, monkeypatch, graphless):
    """A view that starts off a 16-byte boundary, or strides: the graph copies it in as it is;
    where no graph can be made, the sort takes an aligned copy (the histogram reads vectors)."""
    engine, n = RadixEngine(), 2 * GRAPH_MIN

    def no_memory(*args):
        raise cp.cuda.memory.OutOfMemoryError(n, n, n)

    if graphless:
        monkeypatch.setattr(graphs, "_Graph", no_memory)
    for seed in range(3):
        base = fresh(cp, np.uint32, 2 * n + 1, seed)
        for view in (base[1:n + 1], base[: 2 * n : 2]):
            before = view.copy()
            assert cp.array_equal(engine.sort(view), cp.sort(before))
            assert cp.array_equal(engine.argsort(view), cp.argsort(before))
            assert cp.array_equal(view, before)  # the caller's keys are left as they were
    assert "radix" in engine.used and bool(engine.graphs.graphs) != graphless


@pytest.mark.parametrize("dtype,op,descending", [
    (np.uint32, "sort", False), (np.int32, "sort", False), (np.float32, "sort", True),
    (np.uint64, "argsort", False), (np.float64, "argsort", True)])
def test_the_api_replays_a_kept_graph_past_the_pipeline(cp, monkeypatch, dtype, op, descending):
    """One rank's small sorts through the API: the first goes to CUB and the second captures,
    through the pipeline (its plan); later ones go to the kept graph straight from the API,
    unless the caller asks for a report. Every result as CuPy's."""
    from mpi4py import MPI

    import distsort
    from distsort import api
    from distsort.report import SortReport

    planned, plan = [], api.outofcore.plan
    monkeypatch.setattr(api.outofcore, "plan", lambda *a, **k: planned.append(1) or plan(*a, **k))
    call = getattr(distsort, op)
    n = 3 * GRAPH_MIN + 1
    for seed in range(4):
        keys = fresh(cp, dtype, n, 100 + seed, high=5000)  # ties
        got = call(keys, MPI.COMM_SELF, descending=descending)
        if op == "argsort":
            want = cp.argsort(-keys if descending else keys)  # stable, as ours
        else:
            want = cp.sort(keys)[::-1] if descending else cp.sort(keys)
        assert got.dtype == want.dtype and cp.array_equal(got, want)
    assert len(planned) == 2
    report = SortReport()
    call(keys, MPI.COMM_SELF, descending=descending, report=report)
    assert len(planned) == 3 and "finish" in report.phases


def test_the_out_of_core_sort_keeps_no_graphs(cp):
    """Its runs' sorts repeat one size, within a device-memory budget that has no room for a
    graph's buffers: no kind is noted, so none is captured."""
    from mpi4py import MPI

    import distsort
    from distsort.report import SortReport
    from distsort.runtime import get_runtime

    engine = get_runtime(MPI.COMM_SELF, "gpu").backend.engine
    distsort.release(MPI.COMM_SELF)
    for seed in range(3):
        keys = fresh(cp, np.uint32, 1 << 22, seed)
        report = SortReport()
        got = distsort.sort(keys, MPI.COMM_SELF, device_memory="8MiB", report=report)
        assert report.path == "out of core" and cp.array_equal(got, cp.sort(keys))
    assert not engine.graphs.seen and not engine.graphs.graphs
