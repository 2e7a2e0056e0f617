"""Our radix sort engine (distsort/local/radix.py) against NumPy's stable sorts, on the GPU."""

from __future__ import annotations

import numpy as np
import pytest

from distsort.local.engine import get_engine
from distsort.local.radix import BLOCK, ITEMS, SYNC_MIN, RadixEngine

pytestmark = pytest.mark.gpu

DTYPES = [np.uint8, np.uint16, np.uint32, np.uint64]
PATTERNS = ["all-equal", "sorted", "reverse", "few-distinct"]


@pytest.fixture(scope="module")
def cp():
    return pytest.importorskip("cupy")


@pytest.fixture(scope="module")
def engine():
    return RadixEngine(min_n=0)  # our kernels at every size


def tile_of(dtype) -> int:
    return BLOCK * ITEMS[8 if np.dtype(dtype).itemsize == 8 else 4]


def size_of(name: str, dtype) -> int:
    tile = tile_of(dtype)
    return {"0": 0, "1": 1, "tile-1": tile - 1, "tile+1": tile + 1, "2^20+3": (1 << 20) + 3}[name]


def random_keys(rng, dtype, n: int) -> np.ndarray:
    return rng.integers(0, np.iinfo(dtype).max, n, dtype=dtype, endpoint=True)


def pattern_keys(rng, dtype, n: int, pattern: str) -> np.ndarray:
    if pattern == "all-equal":
        return np.full(n, np.iinfo(dtype).max // 3, dtype=dtype)
    if pattern == "few-distinct":
        return rng.choice(random_keys(rng, dtype, 5), n)
    x = np.sort(random_keys(rng, dtype, n))
    return x if pattern == "sorted" else x[::-1].copy()


@pytest.mark.parametrize("size", ["0", "1", "tile-1", "tile+1", "2^20+3"])
@pytest.mark.parametrize("dtype", DTYPES)
def test_sort_and_argsort_sizes(cp, engine, dtype, size):
    rng = np.random.default_rng(1)
    x = random_keys(rng, dtype, size_of(size, dtype))
    got = engine.sort(cp.asarray(x))
    assert got.dtype == x.dtype
    np.testing.assert_array_equal(got.get(), np.sort(x))
    order = engine.argsort(cp.asarray(x))
    assert order.dtype == np.int64
    np.testing.assert_array_equal(order.get(), np.argsort(x, kind="stable"))


@pytest.mark.parametrize("n", [70001, SYNC_MIN + 5])  # below / above the constant-digit skip
@pytest.mark.parametrize("pattern", PATTERNS)
@pytest.mark.parametrize("dtype", DTYPES)
def test_patterns(cp, engine, dtype, pattern, n):
    x = pattern_keys(np.random.default_rng(2), dtype, n, pattern)
    np.testing.assert_array_equal(engine.sort(cp.asarray(x)).get(), np.sort(x))
    order = engine.argsort(cp.asarray(x)).get()
    np.testing.assert_array_equal(order, np.argsort(x, kind="stable"))


@pytest.mark.parametrize(
    "vdtype", [np.uint32, np.float32, np.uint64, np.int64, np.float64, np.int16]
)
@pytest.mark.parametrize("kdtype", DTYPES)
def test_pairs(cp, engine, kdtype, vdtype):
    rng = np.random.default_rng(3)
    n = 3 * tile_of(kdtype) + 17
    x = rng.choice(random_keys(rng, kdtype, n // 4), n)  # duplicates: payload order matters
    v = rng.integers(-1000, 1000, n).astype(vdtype)
    got_k, got_v = engine.sort_pairs(cp.asarray(x), cp.asarray(v))
    order = np.argsort(x, kind="stable")
    np.testing.assert_array_equal(got_k.get(), x[order])
    assert got_v.dtype == v.dtype
    np.testing.assert_array_equal(got_v.get(), v[order])


@pytest.mark.parametrize("kdtype", [np.uint32, np.uint64])
def test_stability_large(cp, engine, kdtype):
    rng = np.random.default_rng(4)
    n = SYNC_MIN + 12345
    x = rng.integers(0, 1000, n).astype(kdtype) << np.array(20, kdtype)  # 10 varying bits
    k, idx = engine.sort_pairs(cp.asarray(x), cp.arange(n, dtype=cp.uint32))
    np.testing.assert_array_equal(idx.get(), np.argsort(x, kind="stable"))
    np.testing.assert_array_equal(k.get(), np.sort(x))


@pytest.mark.parametrize(
    "dtype,begin_bit,end_bit",
    [
        (np.uint32, 8, 24),
        (np.uint32, 0, 16),
        (np.uint32, 4, 13),
        (np.uint64, 20, 61),
        (np.uint16, 3, 11),
    ],
)
def test_bit_range_sorts_those_bits_stably(cp, engine, dtype, begin_bit, end_bit):
    rng = np.random.default_rng(5)
    x = random_keys(rng, dtype, 50001)
    width = end_bit - begin_bit
    digit = (x >> np.array(begin_bit, dtype)) & np.array((1 << width) - 1, dtype)
    order = np.argsort(digit, kind="stable")
    np.testing.assert_array_equal(engine.sort(cp.asarray(x), begin_bit, end_bit).get(), x[order])
    np.testing.assert_array_equal(engine.argsort(cp.asarray(x), begin_bit, end_bit).get(), order)


def test_24_varying_bits(cp, engine):
    rng = np.random.default_rng(6)
    x = (rng.integers(0, 1 << 24, SYNC_MIN + 3) + 0x5A000000).astype(np.uint32)
    np.testing.assert_array_equal(engine.sort(cp.asarray(x), 0, 24).get(), np.sort(x))
    np.testing.assert_array_equal(engine.sort(cp.asarray(x)).get(), np.sort(x))  # skips a pass


def test_unaligned_view_and_fallback(cp):
    x = np.random.default_rng(7).integers(0, 2**32, 100003, dtype=np.uint32)
    d = cp.asarray(x)[1:]
    np.testing.assert_array_equal(RadixEngine(min_n=0).sort(d).get(), np.sort(x[1:]))
    small = RadixEngine(min_n=1 << 20)  # CUB below min_n
    np.testing.assert_array_equal(small.sort(d).get(), np.sort(x[1:]))
    np.testing.assert_array_equal(small.argsort(d).get(), np.argsort(x[1:], kind="stable"))
    default = RadixEngine()  # CUB at this size, and for 16-bit keys
    np.testing.assert_array_equal(default.sort(d).get(), np.sort(x[1:]))
    h = x.astype(np.uint16)
    np.testing.assert_array_equal(default.sort(cp.asarray(h)).get(), np.sort(h))
    k, v = default.sort_pairs(d, d + 1)
    np.testing.assert_array_equal(k.get(), np.sort(x[1:]))
    np.testing.assert_array_equal(v.get(), np.sort(x[1:]) + 1)


def test_get_engine_names(cp):
    assert get_engine("gpu").name == "radix"
    assert get_engine("gpu", "radix").name == "radix"
    assert get_engine("gpu", "cub").name == "cub"


@pytest.mark.slow
@pytest.mark.parametrize("dtype", [np.uint32, np.uint64])
def test_2_pow_28(cp, engine, dtype):
    """2^28 keys against CUB (cupy.sort / cupy.argsort, both stable), NumPy being too slow here."""
    x = cp.random.randint(0, np.iinfo(dtype).max, 1 << 28, dtype=dtype)
    assert bool((engine.sort(x) == cp.sort(x)).all())
    if dtype == np.uint32:
        assert bool((engine.argsort(x) == cp.argsort(x)).all())
