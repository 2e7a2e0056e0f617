"""The landing sort (distsort/local/landing.py) against NumPy, on the GPU: blocks laid out with
gaps as the exchange leaves them, landed in any order, first passes written anywhere."""

from __future__ import annotations

import numpy as np
import pytest

from distsort.local import landing
from distsort.local.landing import LandingSort
from distsort.local.radix import tile_keys
from distsort.transport import aligned_displacements

pytestmark = pytest.mark.gpu


@pytest.fixture(scope="module")
def cp():
    return pytest.importorskip("cupy")


def tile(dtype) -> int:
    return tile_keys(np.dtype(dtype).itemsize, "keys")


def land_all(cp, blocks: list, dtype, low: int, span: int, rng, presorted: int = 0,
             values=None) -> np.ndarray:
    """Receive buffer with garbage in the gaps, first passes packed in reverse block order,
    blocks landed in a random order; returns the finished keys. presorted > 0: each block
    arrives stably sorted by the low `presorted` bits of key - low, as the senders leave it.
    values (a dtype, presorted only): each row's index in block order rides with its key, and
    must come out in the keys' stable order."""
    ids = np.split(np.arange(sum(map(len, blocks))), np.cumsum([len(b) for b in blocks])[:-1])
    want_ids = np.argsort(np.concatenate(blocks), kind="stable")
    digits = None
    if presorted:
        mask = (1 << presorted) - 1
        firsts = [((b - dtype(low)) & dtype(mask)).astype(np.int64) for b in blocks]
        orders = [np.argsort(d, kind="stable") for d in firsts]
        blocks = [b[o] for b, o in zip(blocks, orders)]
        ids = [i[o] for i, o in zip(ids, orders)]
        digits = (presorted, np.stack([np.bincount(d, minlength=mask + 1) for d in firsts]))
    counts = np.array([len(b) for b in blocks], dtype=np.int64)
    starts = aligned_displacements(counts, 1024)
    size, n = int(starts[-1] + counts[-1]), int(counts.sum())
    columns = [(dtype, blocks)] + ([(values, ids)] if values else [])
    bufs, scratch = [], []
    for i, (kind, pieces) in enumerate(columns):  # garbage everywhere, then the blocks
        top = 2**31 if i else np.iinfo(dtype).max
        bufs.append(cp.asarray(rng.integers(0, top, size, dtype=np.uint64).astype(kind)))
        scratch.append(cp.asarray(rng.integers(0, top, n + 5, dtype=np.uint64).astype(kind)))
        for piece, at in zip(pieces, starts):
            bufs[-1][int(at) : int(at) + len(piece)] = cp.asarray(piece.astype(kind))
    reverse = np.cumsum(counts[::-1]) - counts[::-1]
    sorter = LandingSort(dtype, counts, starts, reverse[::-1], low, span, digits, values)
    for b in rng.permutation(len(blocks)):
        sorter.land(int(b), bufs[0], scratch[0])
    if rng.integers(2):  # queued ahead, as the chunked exchange does, or by finish itself
        sorter.prepare()
    out = sorter.finish(bufs, scratch)
    assert len(out) == len(bufs)
    if values:
        np.testing.assert_array_equal(cp.asnumpy(out[1]), want_ids.astype(values))
    return cp.asnumpy(out[0])


def block_sizes(dtype) -> list:
    t = tile(dtype)
    return [0, 1, t - 1, t + 1, 3 * t + 17, (1 << 16) + 3, 2, 0, 5000]


@pytest.mark.parametrize("dtype", [np.uint32, np.uint64])
@pytest.mark.parametrize("span_bits", [3, 9, 16, 20, 30, 32, 64])
@pytest.mark.parametrize("presorted", [0, 4, 6, 7])
@pytest.mark.parametrize("values", [None, np.uint32, np.float64])
def test_random_keys_in_a_range(cp, dtype, span_bits, presorted, values):
    bits = 8 * np.dtype(dtype).itemsize
    if span_bits > bits:
        pytest.skip("range wider than the key")
    if span_bits < 9 and not presorted:
        pytest.skip("one pass: a landing sort needs two")
    if values and not presorted:
        pytest.skip("values ride on presorted blocks only")
    rng = np.random.default_rng(span_bits)
    low = 0 if span_bits == bits else int(rng.integers(0, 2 ** (bits - span_bits)))
    hi = 2**span_bits - 1
    blocks = [(low + rng.integers(0, hi, k, dtype=np.uint64, endpoint=True)).astype(dtype)
              for k in block_sizes(dtype)]
    got = land_all(cp, blocks, dtype, low, hi, rng, presorted, values)
    np.testing.assert_array_equal(got, np.sort(np.concatenate(blocks)))


@pytest.mark.parametrize("dtype", [np.uint32, np.uint64])
@pytest.mark.parametrize("pattern", ["all-equal", "few-distinct", "sorted", "reverse",
                                     "one-value-per-block", "low-digit-constant"])
@pytest.mark.parametrize("presorted", [0, 6])
def test_patterns(cp, dtype, pattern, presorted):
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
    got = land_all(cp, blocks, dtype, 0, int(np.iinfo(dtype).max), rng, presorted)
    np.testing.assert_array_equal(got, np.sort(keys))


@pytest.mark.parametrize("dtype", [np.uint32, np.uint64])
@pytest.mark.parametrize("presorted,span", [(0, 2**24 + 2**20), (6, 2**30 + 2**26),
                                            (6, 2**30 + 2**27 - 1), (0, 2**56 + 5)])
@pytest.mark.parametrize("spread", ["even", "top"])
@pytest.mark.parametrize("values", [None, np.float64])
def test_clamped_last_pass(cp, dtype, presorted, span, spread, values):
    """A range a little wider than whole digits: the last pass clamped, the keys of its top
    digit sorted after it; keys spread evenly (a small suffix) or all near the top of the
    range (every key in the clamped digit)."""
    low = 12345
    if low + span > np.iinfo(dtype).max:
        pytest.skip("range wider than the key")
    if values and not presorted:
        pytest.skip("values ride on presorted blocks only")
    assert landing.plan_passes(presorted, span, not presorted)[1]
    rng = np.random.default_rng([presorted, len(spread)])
    n = sum(block_sizes(dtype))
    if spread == "even":
        offsets = rng.integers(0, span, n, dtype=np.uint64, endpoint=True)
    else:
        offsets = np.uint64(span) - rng.integers(0, 2**20, n, dtype=np.uint64)
    keys = (offsets + np.uint64(low)).astype(dtype)
    blocks = np.split(keys, np.cumsum(block_sizes(dtype))[:-1])
    got = land_all(cp, blocks, dtype, low, span, rng, presorted, values)
    np.testing.assert_array_equal(got, np.sort(keys))


def test_values_ride_on_presorted_blocks_only(cp):
    with pytest.raises(ValueError, match="presorted blocks only"):
        LandingSort(np.uint32, [5], [0], [0], 0, 2**32 - 1, None, np.uint32)


def test_finish_before_every_block_landed_is_refused(cp):
    sorter = LandingSort(np.uint32, [5, 5], [0, 1024], [0, 5], 0, 2**32 - 1)
    keys = cp.arange(2048, dtype=cp.uint32)
    sorter.land(0, keys, cp.empty(10, dtype=cp.uint32))
    with pytest.raises(RuntimeError, match="before every block landed"):
        sorter.prepare()
    with pytest.raises(RuntimeError, match="before every block landed"):
        sorter.finish([keys], [cp.empty(10, dtype=cp.uint32)])
