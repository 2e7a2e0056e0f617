"""Where the radix engine runs its own kernels and where it hands a sort to CUB (radix.MIN_N):
decided from the keys' dtype and size alone, so checked here without a GPU."""

from __future__ import annotations

import numpy as np
import pytest

from distsort.local.radix import MIN_N, RadixEngine


def keys(dtype, n: int) -> np.ndarray:
    return np.broadcast_to(np.zeros(1, dtype), (n,))  # n keys' shape, no memory


def test_coded_64_bit_sorts_are_ours_sooner_than_plain_ones():
    """Signed and float 64-bit keys that CUB would have to encode and decode around its sort
    are ours from a smaller size than unsigned keys, which CUB sorts as they are (32-bit ones
    from the same size: graphs replay the sorts below it)."""
    engine, n = RadixEngine(), MIN_N["coded64"]
    assert MIN_N["coded64"] < MIN_N["sort64"] and MIN_N["coded"] <= MIN_N["sort"]
    assert engine._ours(keys(np.uint64, n), "coded")
    assert not engine._ours(keys(np.uint64, n // 2), "coded")
    assert not engine._ours(keys(np.uint64, n), "sort")


def test_a_small_sort_is_replayed_from_its_kinds_second_sighting():
    """From GRAPH_MIN to GRAPH_MAX keys a kind of sort (its size, dtype, bits, low and code)
    seen before is replayed as a graph of our kernels; the first time CUB sorts it below MIN_N
    and our kernels one by one from there (a rank's finish sorts a size seen once). From
    GRAPH_MAX our kernels run one by one every time: they skip the digits that never vary,
    which a graph cannot."""
    from distsort.local.radix import GRAPH_MAX, GRAPH_MIN

    assert GRAPH_MIN < MIN_N["sort64"] < min(MIN_N["sort"], MIN_N["argsort"]) < GRAPH_MAX
    engine = RadixEngine()
    for n, op in ((GRAPH_MIN, "argsort"), (MIN_N["argsort"] - 1, "argsort"),
                  (MIN_N["sort"] - 1, "sort")):
        assert [engine._route(keys(np.uint32, n), op) for _ in range(3)] == \
            ["cub", "graph", "graph"]
    for n, op in ((MIN_N["sort"], "sort"), (GRAPH_MAX - 1, "argsort")):
        assert [engine._route(keys(np.uint32, n), op) for _ in range(3)] == \
            ["ours", "graph", "graph"]
    assert [engine._route(keys(np.uint64, MIN_N["sort64"]), "sort") for _ in range(3)] == \
        ["ours", "graph", "graph"]
    for n in (GRAPH_MIN - 1, GRAPH_MAX):  # outside: the same route at every sighting
        assert [engine._route(keys(np.uint64, n), "argsort") for _ in range(2)] == \
            ["cub" if n < MIN_N["argsort"] else "ours"] * 2


def test_a_new_low_or_code_is_a_kind_not_seen():
    """The finish's low changes from sort to sort, and a graph holds it: a sort with another
    low (or code) is not taken for one seen before."""
    engine, n = RadixEngine(), 1 << 20
    assert engine._route(keys(np.uint32, n), "sort", 0, 20, low=5) == "cub"
    assert engine._route(keys(np.uint32, n), "sort", 0, 20, low=6) == "cub"
    assert engine._route(keys(np.uint32, n), "argsort", code=1) == "cub"
    assert engine._route(keys(np.uint32, n), "argsort", code=2) == "cub"
    assert engine._route(keys(np.uint32, n), "sort", 0, 20, low=6) == "graph"


def test_pairs_are_replayed_like_sorts():
    engine = RadixEngine()
    for n in (MIN_N["pairs"] // 2, MIN_N["pairs"]):
        assert [engine._route(keys(np.uint32, n), "pairs") for _ in range(3)] == \
            ["cub" if n < MIN_N["pairs"] else "ours", "graph", "graph"]


@pytest.mark.parametrize("dtype", [np.uint32, np.uint64])
def test_coded_sorts_are_replayed_like_plain_ones(dtype):
    """Float keys and descending orders: CUB's route adds an encode and a decode pass."""
    engine = RadixEngine()
    assert [engine._route(keys(dtype, 1 << 20), "coded", code=2) for _ in range(3)] == \
        ["cub", "graph", "graph"]


def test_forced_kernels_are_never_replayed():
    engine = RadixEngine(min_n=0)
    assert {engine._route(keys(np.uint32, 1 << 20), "sort") for _ in range(3)} == {"ours"}


def test_common_codes_run_builds_of_their_own(monkeypatch):
    """Ascending signed and float keys (codes 1 and 2) run builds of radix.cu that know their
    code at compile time, whichever ends of the sort meet raw keys; other codes the coded build
    that reads it from the kernels' argument; keys that are codes already the plain build.
    `python -m distsort compile` compiles every build a code can run."""
    from distsort.local import radix
    from distsort.local.radix import CODE_LOAD, CODE_STORE, _build

    assert [_build(c) for c in (0, 1, 2, 1 | CODE_LOAD, 2 | CODE_LOAD | CODE_STORE)] == \
        [0, 1, 2, 1, 2]
    assert {_build(c) for c in (4, 5, 6, 10, 14, 6 | CODE_LOAD, 9 | CODE_STORE)} == {-1}
    compiled: list[int] = []
    monkeypatch.setattr(radix, "compile_apart", lambda builds: [b() for b in builds])
    monkeypatch.setattr(radix, "_module", compiled.append)
    radix.compile_all()
    assert sorted(compiled) == sorted({_build(c | ends) for c in range(16)
                                       for ends in (CODE_LOAD, CODE_STORE)})
