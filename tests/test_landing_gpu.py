"""The landing sort (distsort/local/landing.py) against NumPy, on the GPU: blocks laid out with
gaps as the exchange leaves them, landed in any order, first passes written anywhere."""

from __future__ import annotations

import numpy as np
import pytest

from distsort.exchange import aligned_displacements
from distsort.local.landing import LandingSort
from distsort.local.radix import tile_keys

pytestmark = pytest.mark.gpu


@pytest.fixture(scope="module")
def cp():
    return pytest.importorskip("cupy")


def tile(dtype) -> int:
    return tile_keys(np.dtype(dtype).itemsize, "keys")


def land_all(cp, blocks: list, dtype, low: int, end_bit: int, rng) -> np.ndarray:
    """Receive buffer with garbage in the gaps, first passes packed in reverse block order,
    blocks landed in a random order; returns the finished keys."""
    counts = np.array([len(b) for b in blocks], dtype=np.int64)
    starts = aligned_displacements(counts, 1024)
    size = int(starts[-1] + counts[-1])
    buf = cp.asarray(rng.integers(0, np.iinfo(dtype).max, size, dtype=dtype))
    for b, s in zip(blocks, starts):
        buf[int(s) : int(s) + len(b)] = cp.asarray(b)
    reverse = np.cumsum(counts[::-1]) - counts[::-1]
    n = int(counts.sum())
    scratch = cp.asarray(rng.integers(0, np.iinfo(dtype).max, n + 5, dtype=dtype))
    sorter = LandingSort(dtype, counts, starts, reverse[::-1], low, end_bit)
    for b in rng.permutation(len(blocks)):
        sorter.land(int(b), buf, scratch)
    return cp.asnumpy(sorter.finish(buf, scratch))


def block_sizes(dtype) -> list:
    t = tile(dtype)
    return [0, 1, t - 1, t + 1, 3 * t + 17, (1 << 16) + 3, 2, 0, 5000]


@pytest.mark.parametrize("dtype", [np.uint32, np.uint64])
@pytest.mark.parametrize("span_bits", [9, 16, 20, 30, 32, 64])
def test_random_keys_in_a_range(cp, dtype, span_bits):
    bits = 8 * np.dtype(dtype).itemsize
    if span_bits > bits:
        pytest.skip("range wider than the key")
    rng = np.random.default_rng(span_bits)
    low = 0 if span_bits == bits else int(rng.integers(0, 2 ** (bits - span_bits)))
    hi = 2**span_bits - 1
    blocks = [(low + rng.integers(0, hi, k, dtype=np.uint64, endpoint=True)).astype(dtype)
              for k in block_sizes(dtype)]
    got = land_all(cp, blocks, dtype, low, span_bits, rng)
    np.testing.assert_array_equal(got, np.sort(np.concatenate(blocks)))


@pytest.mark.parametrize("dtype", [np.uint32, np.uint64])
@pytest.mark.parametrize("pattern", ["all-equal", "few-distinct", "sorted", "reverse",
                                     "one-value-per-block", "low-digit-constant"])
def test_patterns(cp, dtype, pattern):
    """Constant digits (passes skipped after the second), runs, and blocks that each hold one
    value (every first pass sees one digit)."""
    rng = np.random.default_rng(7)
    sizes, top = block_sizes(dtype), np.iinfo(dtype).max
    n = sum(sizes)
    if pattern == "all-equal":
        keys = np.full(n, top // 3, dtype=dtype)
    elif pattern == "few-distinct":
        keys = rng.choice(rng.integers(0, top, 5, dtype=dtype), n)
    elif pattern == "one-value-per-block":
        keys = np.repeat(rng.integers(0, top, len(sizes), dtype=dtype), sizes)
    elif pattern == "low-digit-constant":
        keys = (rng.integers(0, top >> 8, n, dtype=dtype) << 8) | dtype(0x5A)
    else:
        keys = np.sort(rng.integers(0, top, n, dtype=dtype))
        keys = keys if pattern == "sorted" else keys[::-1].copy()
    blocks = np.split(keys, np.cumsum(sizes)[:-1])
    got = land_all(cp, blocks, dtype, 0, 8 * np.dtype(dtype).itemsize, rng)
    np.testing.assert_array_equal(got, np.sort(keys))


def test_finish_before_every_block_landed_is_refused(cp):
    sorter = LandingSort(np.uint32, [5, 5], [0, 1024], [0, 5], 0, 32)
    keys = cp.arange(2048, dtype=cp.uint32)
    sorter.land(0, keys, cp.empty(10, dtype=cp.uint32))
    with pytest.raises(RuntimeError, match="before every block landed"):
        sorter.finish(keys, cp.empty(10, dtype=cp.uint32))
