"""Plain keys (and their values) grouped by destination rank on CPUs (local/scatter.py,
scatter.c, push.c), against splitters.classify and a stable grouping by NumPy."""

from __future__ import annotations

import os

import numpy as np
import pytest

from distsort.keys import numeric_codec
from distsort.local import clib, scatter
from distsort.steps.splitters import classify

if not scatter.available(np.zeros(1, np.uint32), 2):
    pytest.skip("no C compiler here to build the C kernels", allow_module_level=True)


def splitters_of(keys: np.ndarray, offset: int, p: int, rng) -> np.ndarray:
    """p - 1 rows (key, global position) in that order, picked among the keys' own rows, so
    that equal keys are cut by position."""
    rows = np.stack([keys.astype(np.uint64), np.arange(len(keys), dtype=np.uint64) + offset], 1)
    picks = np.sort(rng.choice(len(keys), p - 1, replace=False))
    order = np.lexsort((rows[:, 1], rows[:, 0]))
    return rows[order[picks]]


def by_rank(keys, offset: int, splitters, values=None, few=None) -> tuple[list, np.ndarray]:
    """(the grouped columns, each destination's rows after the one before; the counts)."""
    grouping = scatter.Grouping(keys, offset, splitters, values, few)
    starts = np.cumsum(grouping.total) - grouping.total
    return grouping.place(starts, len(keys), len(keys)), grouping.total


def few_ways(p: int) -> list[bool]:
    """by_rank's ways for plain keys on p ranks on this machine: the two passes, and the passes
    for a few destinations where the CPU has them for p."""
    return [False] + ([True] if p <= clib.library().scatter_few_max() else [])


@pytest.mark.parametrize("dtype", [np.uint32, np.uint64])
@pytest.mark.parametrize("n,distinct", [(10, None), (200_001, None), (300_000, 3)])
@pytest.mark.parametrize("p", [2, 4, 5, 16])
def test_grouped_as_classify_puts_them(three_threads, dtype, n, distinct, p):
    rng = np.random.default_rng(n + p)
    top = distinct or np.iinfo(dtype).max
    keys = rng.integers(0, top, n, dtype=np.uint64, endpoint=distinct is None).astype(dtype)
    offset = 1000
    splitters = splitters_of(keys, offset, min(p, n), rng)
    dest = classify([keys], offset, splitters, np)
    for few in few_ways(len(splitters) + 1):
        (grouped,), counts = by_rank(keys, offset, splitters, few=few)
        np.testing.assert_array_equal(counts, np.bincount(dest, minlength=len(splitters) + 1))
        np.testing.assert_array_equal(grouped, keys[np.argsort(dest, kind="stable")])


@pytest.mark.parametrize("keys_dtype", [np.uint32, np.uint64])
@pytest.mark.parametrize("values_dtype", [np.float32, np.int64, "datetime64[ns]"])
def test_values_go_with_their_keys(three_threads, keys_dtype, values_dtype):
    """Keys of few values with values that tell each row apart: every group's rows in input
    order (ties stay in position order, which a stable sort of what a rank receives keeps)."""
    rng = np.random.default_rng(7)
    keys = rng.integers(0, 6, 150_001, dtype=np.uint64).astype(keys_dtype)
    values = np.arange(len(keys)).astype(np.int64).astype(values_dtype)
    offset = 77
    splitters = splitters_of(keys, offset, 9, rng)
    dest = classify([keys], offset, splitters, np)
    (grouped, moved), counts = by_rank(keys, offset, splitters, values)
    order = np.argsort(dest, kind="stable")
    np.testing.assert_array_equal(counts, np.bincount(dest, minlength=9))
    np.testing.assert_array_equal(grouped, keys[order])
    assert moved.dtype == values.dtype
    np.testing.assert_array_equal(moved, values[order])


def raw_numbers(dtype, n: int, rng) -> np.ndarray:
    """Numbers of every sign, with the floats' specials (both zeros, both infinities, NaNs of
    both signs), and runs of equal keys."""
    if np.dtype(dtype).kind == "f":
        keys = rng.standard_normal(n).astype(dtype)
        specials = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, -np.nan], dtype)
        keys[rng.choice(n, n // 10, replace=False)] = rng.choice(specials, n // 10)
    else:
        info = np.iinfo(dtype)
        keys = rng.integers(info.min, info.max, n, dtype=dtype, endpoint=True)
    keys[: n // 20] = keys[n // 2]  # ties, cut by position
    return keys


@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.int64, np.int32])
@pytest.mark.parametrize("descending", [False, True])
@pytest.mark.parametrize("p", [2, 3, 5, 17])
@pytest.mark.parametrize("n", [13, 100_003])
def test_raw_numbers_grouped_as_their_codes(three_threads, dtype, descending, p, n):
    """The coded passes group raw numbers as the plain ones group their codes, both ways, and
    write the codes: the keys need no encode pass before them."""
    codec = numeric_codec(dtype, descending)
    rng = np.random.default_rng(n + p)
    keys, offset = raw_numbers(dtype, n, rng), 5
    codes = codec.encode(keys, np)
    splitters = splitters_of(codes, offset, min(p, n), rng)
    for few in few_ways(len(splitters) + 1):
        (expected,), counts = by_rank(codes, offset, splitters, few=few)
        grouping = scatter.Grouping(keys, offset, splitters, few=few, codec=codec)
        (grouped,) = grouping.place(np.cumsum(counts) - counts, n, n)
        np.testing.assert_array_equal(grouping.total, counts)
        assert grouped.dtype == codes.dtype
        np.testing.assert_array_equal(grouped, expected)


@pytest.mark.parametrize("dtype", [np.float32, np.int64])
def test_values_go_with_their_raw_numbers_codes(three_threads, dtype):
    rng = np.random.default_rng(11)
    keys, codec = raw_numbers(dtype, 50_001, rng), numeric_codec(dtype)
    values, codes = rng.integers(0, 2**40, len(keys)), codec.encode(keys, np)
    splitters = splitters_of(codes, 0, 6, rng)
    (expected, moved), counts = by_rank(codes, 0, splitters, values)
    grouping = scatter.Grouping(keys, 0, splitters, values, codec=codec)
    grouped = grouping.place(np.cumsum(counts) - counts, len(keys), len(keys))
    np.testing.assert_array_equal(grouped[0], expected)
    np.testing.assert_array_equal(grouped[1], moved)


def test_only_lossless_codes_of_numbers_in_native_order_are_grouped_raw():
    keys, codec = np.zeros(4), numeric_codec(np.float64)
    assert scatter.codes_as_grouped([keys], 2, codec)
    assert scatter.codes_as_grouped([keys], 40, codec)
    assert scatter.codes_as_grouped([keys, np.zeros(4, np.int32)], 3, codec)
    assert not scatter.codes_as_grouped([keys, np.zeros(4, np.int16)], 3, codec)
    assert not scatter.codes_as_grouped([keys, keys, keys], 2, codec)
    assert not scatter.codes_as_grouped([keys], 2, None)
    assert not scatter.codes_as_grouped([keys], 2, numeric_codec(np.float64, canonical=True))
    assert not scatter.codes_as_grouped([keys.astype(">f8")], 2, numeric_codec(">f8"))
    assert not scatter.codes_as_grouped([keys.astype(np.int16)], 2, numeric_codec(np.int16))


def test_only_4_and_8_byte_keys_and_values():
    assert not scatter.available(np.zeros(4, np.uint16), 2)
    assert not scatter.available(np.zeros(4, np.int32), 2)
    assert not scatter.available(np.zeros(4, np.uint32), scatter.MAX_RANKS + 1)
    assert not scatter.available(np.zeros(4, np.uint32), 2, np.zeros(4, np.int16))
    assert not scatter.available(np.zeros(4, np.uint32), 2, np.zeros((4, 2), np.int32))
    assert scatter.available(np.zeros(4, np.uint64), 2, np.zeros(4, np.float32))


@pytest.mark.parametrize("dtype", [np.uint32, np.uint64])
@pytest.mark.parametrize("p", [2, 3, 4, 9, 17, 40])
def test_ties_cut_by_positions_on_other_ranks(three_threads, dtype, p):
    """Splitters picked among all ranks' rows of a few values: this rank's keys equal to a
    splitter go before or after it by global position, whether the splitter's row is before
    this rank's rows, among them (inside a block of the vector compare, or at its edges) or
    after them."""
    rng = np.random.default_rng(p)
    everything = rng.integers(0, 4, 50_000, dtype=np.uint64).astype(dtype)
    offset, n = 12_345, 20_000
    splitters = splitters_of(everything, 0, p, rng)
    splitters[:, 1][::2] = rng.integers(0, len(everything), len(splitters[::2]))
    splitters = splitters[np.lexsort((splitters[:, 1], splitters[:, 0]))]
    keys = everything[offset:offset + n]
    dest = classify([keys], offset, splitters, np)
    for few in few_ways(p):
        (grouped,), counts = by_rank(keys, offset, splitters, few=few)
        np.testing.assert_array_equal(counts, np.bincount(dest, minlength=p))
        np.testing.assert_array_equal(grouped, keys[np.argsort(dest, kind="stable")])


def ways(dtype, p: int) -> list[str]:
    """The ways scatter.c classifies keys that this machine runs for p ranks."""
    lib, width = clib.library(), np.dtype(dtype).itemsize
    found = ["_search"] + (["_compare"] if (p - 1) * width <= 64 else [])
    if lib.classify_avx512() and p <= 128 // width:  # the splitters in two registers
        found.append("_permute")
    return found


@pytest.mark.parametrize("dtype", [np.uint32, np.uint64])
@pytest.mark.parametrize("p", [2, 3, 9, 16, 17, 32])
@pytest.mark.parametrize("distinct", [None, 5])
def test_every_way_classifies_alike(dtype, p, distinct):
    """scatter.c's compare, binary search and (with AVX-512) permute search, each where it
    applies: every key's destination and count as splitters.classify's, ties cut by position,
    and keys past the last full vector."""
    rng = np.random.default_rng(p * 7 + (distinct or 0))
    top = distinct or np.iinfo(dtype).max
    keys = rng.integers(0, top, 10_007, dtype=np.uint64, endpoint=distinct is None)
    keys = keys.astype(dtype)
    keys[:3] = np.iinfo(dtype).max  # the largest key: above every splitter but its equal
    offset = 31
    splitters = splitters_of(keys, offset, p, rng)
    want = classify([keys], offset, splitters, np)
    for way in ways(dtype, p):
        dest, counts = np.empty(len(keys), np.uint16), np.zeros(p, np.int64)
        classify_some = scatter._classifier(clib.library(), keys, offset, splitters, way)
        classify_some(0, 5000, dest, counts)  # two calls: the second from an offset
        classify_some(5000, len(keys), dest, counts)
        np.testing.assert_array_equal(dest, want, err_msg=way)
        np.testing.assert_array_equal(counts, np.bincount(want, minlength=p), err_msg=way)


@pytest.mark.parametrize("values", [False, True])
def test_each_destination_placed_where_asked(values):
    """place(starts, rows, key_rows): destination j's rows from starts[j], wherever those are
    (here in reverse order, with gaps between); the keys' column has key_rows rows, the
    values' rows."""
    rng = np.random.default_rng(5)
    keys = rng.integers(0, 2**32, 5000, dtype=np.uint64).astype(np.uint32)
    moved_with = np.arange(5000, dtype=np.uint64) if values else None
    splitters = splitters_of(keys, 0, 4, rng)
    dest = classify([keys], 0, splitters, np)
    for few in few_ways(4) if not values else [False]:
        grouping = scatter.Grouping(keys, 0, splitters, moved_with, few)
        sizes = grouping.total[::-1] + 10  # destination 3 first, a gap of 10 rows after each
        starts = (np.cumsum(sizes) - sizes)[::-1]
        grouped = grouping.place(starts, 5040, 7000)
        assert len(grouped[0]) == 7000 and all(len(c) == 5040 for c in grouped[1:])
        for j, (start, count) in enumerate(zip(starts, grouping.total)):
            rows = np.flatnonzero(dest == j)
            np.testing.assert_array_equal(grouped[0][start:start + count], keys[rows])
            if values:
                np.testing.assert_array_equal(grouped[1][start:start + count], rows)


def pushed(keys, offset: int, splitters, pids_of) -> tuple[np.ndarray, np.ndarray]:
    """(the keys pushed into one array, each destination's after the one before; the counts),
    destination j's written by process pids_of(j) names (0: copied by this process)."""
    grouping = scatter.Grouping(keys, offset, splitters, pushed=True)
    out = np.zeros(len(keys), keys.dtype)
    starts = np.cumsum(grouping.total) - grouping.total
    grouping.push([pids_of(j) for j in range(len(starts))],
                  out.ctypes.data + starts.astype(np.uint64) * out.itemsize)
    return out, grouping.total


@pytest.mark.parametrize("dtype", [np.uint32, np.uint64])
@pytest.mark.parametrize("n,distinct", [(10, None), (200_001, None), (300_000, 3)])
@pytest.mark.parametrize("p", [5, 16, 64])
def test_pushed_where_classify_puts_them(three_threads, dtype, n, distinct, p):
    """The push's keys land as the two passes place them, whether this process copies them
    or the kernel writes them through its cross-memory call (here into this very process)."""
    rng = np.random.default_rng(n + p)
    top = distinct or np.iinfo(dtype).max
    keys = rng.integers(0, top, n, dtype=np.uint64, endpoint=distinct is None).astype(dtype)
    splitters = splitters_of(keys, 1000, min(p, n), rng)
    dest = classify([keys], 1000, splitters, np)
    grouped, counts = pushed(keys, 1000, splitters, lambda j: os.getpid() if j % 2 else 0)
    np.testing.assert_array_equal(counts, np.bincount(dest, minlength=len(splitters) + 1))
    np.testing.assert_array_equal(grouped, keys[np.argsort(dest, kind="stable")])


def test_a_push_that_cannot_write_says_so():
    keys = np.arange(100_000, dtype=np.uint32)
    splitters = splitters_of(keys, 0, 5, np.random.default_rng(0))
    with pytest.raises(OSError, match="writing a peer rank's memory"):
        pushed(keys, 0, splitters, lambda j: 2**22 + 12345)  # above Linux's largest PID


def test_pushes_plain_keys_from_5_to_64_ranks():
    keys = np.zeros(1, np.uint32)
    assert [scatter.pushes(keys, p) for p in (4, 5, 64, 65)] == [False, True, True, False]
    assert scatter.pushes(keys.astype(np.uint64), 5) and not scatter.pushes(keys.view(np.int32), 5)
