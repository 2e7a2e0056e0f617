"""The partition by (destination, first radix digit) (distsort/local/digit_partition.py) against
NumPy, on the GPU: the sender's bucket counts and scatter; and the tile descriptors of passes
over pieces (local/tiles.py)."""

from __future__ import annotations

import numpy as np
import pytest

from distsort.local import digit_partition, tiles
from distsort.steps import chunks
from distsort.steps.chunks import block_starts

pytestmark = pytest.mark.gpu


@pytest.fixture(scope="module")
def cp():
    return pytest.importorskip("cupy")


def draw(rng, dtype, n: int, spread: str) -> np.ndarray:
    """Keys over the whole type, a narrow range, or mostly one value."""
    info = np.iinfo(dtype)
    keys = rng.integers(0, info.max, n, dtype=dtype, endpoint=True)
    if spread == "narrow":
        keys = (keys % 5000 + 77).astype(dtype)
    elif spread == "skewed" and n:
        keys = np.where(rng.random(n) < 0.8, keys[0], keys).astype(dtype)
    return keys


def splitters_of(keys: np.ndarray, ranks: int, rng) -> np.ndarray:
    """(ranks - 1, 2) uint64 splitters (key, global position) drawn from the keys."""
    order = np.argsort(keys, kind="stable")
    picks = np.sort(rng.choice(len(keys), ranks - 1, replace=False))
    return np.stack([keys[order[picks]].astype(np.uint64), order[picks].astype(np.uint64)], 1)


def lows_of(splitters: np.ndarray) -> np.ndarray:
    """Every destination's lowest key: 0, then the splitters' keys."""
    return np.concatenate([np.zeros(1, np.uint64), splitters[:, 0]])


def buckets_of(keys: np.ndarray, offset: int, splitters: np.ndarray, bits: int) -> np.ndarray:
    """The bucket of every key, as digit_partition.cu's Buckets::of computes it."""
    k, pos = keys.astype(np.uint64), np.arange(len(keys), dtype=np.uint64) + np.uint64(offset)
    dest = np.zeros(len(keys), dtype=np.int64)
    for s_key, s_pos in splitters:
        dest += (k > s_key) | ((k == s_key) & (pos >= s_pos))
    digit = ((k - lows_of(splitters)[dest]) & np.uint64((1 << bits) - 1)).astype(np.int64)
    return dest << bits | digit


@pytest.mark.parametrize("dtype", [np.uint32, np.uint64])
@pytest.mark.parametrize("ranks", [2, 3, 4, 16])
@pytest.mark.parametrize("spread", ["uniform", "narrow", "skewed"])
@pytest.mark.parametrize("size, skip", [("tiles", 0), ("tiles", 3), ("tiny", 1)])
def test_bucket_partition_is_a_stable_grouping(cp, dtype, ranks, spread, size, skip):
    """skip: the keys start that many keys past a 16-byte boundary (the count kernel's head,
    counted one by one); n is no multiple of a 16-byte vector's keys (its tail, likewise)."""
    rng = np.random.default_rng([ranks, len(spread), skip])
    tile = digit_partition.tile_keys(np.dtype(dtype).itemsize, "keys")
    n, offset = 5 * tile + 77 if size == "tiles" else 21, 12345
    keys = draw(rng, dtype, n, spread)
    splitters = splitters_of(keys, ranks, rng)
    bits = digit_partition.bucket_bits(ranks)
    dev = cp.asarray(np.concatenate([keys[:skip], keys]))[skip:]
    assert dev.data.ptr % 16 == skip * np.dtype(dtype).itemsize % 16
    part = digit_partition.BucketPartition(dev, offset, splitters, lows_of(splitters), bits)
    want = buckets_of(keys, offset, splitters, bits)
    assert want.max() < digit_partition.BUCKETS
    counts = cp.asnumpy(part.counts()).astype(np.int64)
    np.testing.assert_array_equal(counts, np.bincount(want, minlength=digit_partition.BUCKETS))
    np.testing.assert_array_equal(cp.asnumpy(part.buckets), want)  # what the scatter reads
    bases = np.cumsum(counts + 3) - counts - 3  # gaps of 3 rows between buckets
    out = cp.full(int(bases[-1] + counts[-1]) + 3, 7, dtype=dtype)
    part.scatter(bases, out)
    got = cp.asnumpy(out)
    order = np.argsort(want, kind="stable")
    slots = bases[want[order]] + (np.arange(n) - (np.cumsum(counts) - counts)[want[order]])
    np.testing.assert_array_equal(got[slots], keys[order])


@pytest.mark.parametrize("dtype", [np.uint32, np.uint64])
@pytest.mark.parametrize("ranks", [2, 3, 4, 16])
@pytest.mark.parametrize("spread", ["uniform", "narrow", "skewed"])
@pytest.mark.parametrize("values", [None, np.uint32, np.float64])
def test_digit_partition_sorts_each_block_by_its_first_digit(cp, dtype, ranks, spread, values):
    """chunks.ByDigit: destination j's block holds its keys stably sorted by the low bits of
    key - lows[j] (the receiver's first radix digit), at the block starts given; values (where
    given) where their keys went."""
    rng = np.random.default_rng([ranks, len(spread), 3])
    kind = "keys" if values is None else "pairs"
    tile = digit_partition.tile_keys(np.dtype(dtype).itemsize, kind)
    n, offset = 4 * tile + 1001, 777
    keys = draw(rng, dtype, n, spread)
    splitters = splitters_of(keys, ranks, rng)
    bits = digit_partition.bucket_bits(ranks)
    part = chunks.ByDigit(cp.asarray(keys), offset, splitters, lows_of(splitters), bits)
    want = buckets_of(keys, offset, splitters, bits)
    table = cp.asnumpy(part.table()).astype(np.int64)
    np.testing.assert_array_equal(table.reshape(-1), np.bincount(want, minlength=table.size))
    rows = table.sum(axis=1)
    starts = block_starts(rows[None, :], 1024)[0]
    out = cp.full(int(starts[-1] + rows[-1]) + 5, 7, dtype=dtype)
    vals = None if values is None else (rng.permutation(n) * 3 + 1).astype(values)
    sent = [] if values is None else [(cp.asarray(vals), cp.zeros(out.size, dtype=values))]
    part.scatter(table, starts, out, sent)
    got = cp.asnumpy(out)
    for j in range(ranks):
        mine = want >> bits == j
        order = np.argsort(want[mine], kind="stable")
        block = slice(starts[j], starts[j] + rows[j])
        np.testing.assert_array_equal(got[block], keys[mine][order])
        if values is not None:
            np.testing.assert_array_equal(cp.asnumpy(sent[0][1])[block], vals[mine][order])


def test_bucket_scatter_needs_the_counts_first(cp):
    splitters = np.array([[5, 0]], dtype=np.uint64)
    part = digit_partition.BucketPartition(cp.arange(10, dtype=cp.uint32), 0, splitters,
                                           lows_of(splitters), digit_partition.bucket_bits(2))
    with pytest.raises(RuntimeError, match="before counts"):
        part.scatter(np.zeros(digit_partition.BUCKETS, np.int64), cp.empty(10, dtype=cp.uint32))


def test_piece_tiles_cut_pieces_in_order(cp):
    """Pieces (some empty, some longer than a tile) become tiles in piece order; tiles past
    the last piece's have 0 rows."""
    rows, starts = [5, 0, 13, 2, 9], [0, 100, 50, 7, 200]
    got = [cp.asnumpy(a) for a in tiles.piece_tiles(rows, starts, 4, 11)]
    np.testing.assert_array_equal(got[0][:10], [0, 4, 50, 54, 58, 62, 7, 200, 204, 208])
    np.testing.assert_array_equal(got[1], [4, 1, 4, 4, 4, 1, 2, 4, 4, 1, 0])
