"""The segmented exchange's kernels (distsort/local/segments.py) against NumPy, on the GPU: the
sender's bucket counts and scatter, and the receiver's sort of segments laid out as the
exchange leaves them (pieces of every source with gaps, several chunks)."""

from __future__ import annotations

import numpy as np
import pytest

from distsort import chunked, segmented
from distsort.chunked import block_starts
from distsort.local import segments, tiles

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


def buckets_of(keys: np.ndarray, offset: int, splitters: np.ndarray, dests: np.ndarray,
               sbits: int, mask: int = 2**64 - 1) -> np.ndarray:
    """The bucket of every key, as segments.cu's Buckets::of computes it."""
    k, pos = keys.astype(np.uint64), np.arange(len(keys), dtype=np.uint64) + np.uint64(offset)
    dest = np.zeros(len(keys), dtype=np.int64)
    for s_key, s_pos in splitters:
        dest += (k > s_key) | ((k == s_key) & (pos >= s_pos))
    base, shift, extra = (dests[dest, i] for i in range(3))
    a = (((k - base) >> shift) & np.uint64(mask)).astype(np.int64)
    return dest << sbits | np.maximum(a - extra.astype(np.int64), 0)


@pytest.mark.parametrize("dtype", [np.uint32, np.uint64])
@pytest.mark.parametrize("ranks", [2, 3, 4, 16])
@pytest.mark.parametrize("spread", ["uniform", "narrow", "skewed"])
@pytest.mark.parametrize("size, skip", [("tiles", 0), ("tiles", 3), ("tiny", 1)])
def test_bucket_partition_is_a_stable_grouping(cp, dtype, ranks, spread, size, skip):
    """skip: the keys start that many keys past a 16-byte boundary (the count kernel's head,
    counted one by one); n is no multiple of a 16-byte vector's keys (its tail, likewise)."""
    rng = np.random.default_rng([ranks, len(spread), skip])
    tile = segments.tile_keys(np.dtype(dtype).itemsize, "keys")
    n, offset = 5 * tile + 77 if size == "tiles" else 21, 12345
    keys = draw(rng, dtype, n, spread)
    splitters = splitters_of(keys, ranks, rng)
    sbits = segments.bucket_bits(ranks)
    dests = segmented.ranges(splitters, dtype, sbits)
    dev = cp.asarray(np.concatenate([keys[:skip], keys]))[skip:]
    assert dev.data.ptr % 16 == skip * np.dtype(dtype).itemsize % 16
    part = segments.BucketPartition(dev, offset, splitters, dests, sbits)
    want = buckets_of(keys, offset, splitters, dests, sbits)
    assert want.max() < segments.BUCKETS
    counts = cp.asnumpy(part.counts()).astype(np.int64)
    np.testing.assert_array_equal(counts, np.bincount(want, minlength=segments.BUCKETS))
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
    """chunked.ByDigit: destination j's block holds its keys stably sorted by the low bits of
    key - lows[j] (the receiver's first radix digit), at the block starts given; values (where
    given) where their keys went."""
    rng = np.random.default_rng([ranks, len(spread), 3])
    tile = segments.tile_keys(np.dtype(dtype).itemsize, "keys" if values is None else "pairs")
    n, offset = 4 * tile + 1001, 777
    keys = draw(rng, dtype, n, spread)
    splitters = splitters_of(keys, ranks, rng)
    lows = np.concatenate([np.zeros(1, np.uint64), splitters[:, 0]])
    bits = segments.bucket_bits(ranks)
    part = chunked.ByDigit(cp.asarray(keys), offset, splitters, lows, bits)
    dests = np.zeros((ranks, 3), dtype=np.uint64)
    dests[:, 0] = lows
    want = buckets_of(keys, offset, splitters, dests, bits, (1 << bits) - 1)
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


def chunk_layout(rng, dtype, sources: int, spread: str, chunks: int):
    """One rank's receive buffer as the exchange leaves it (chunk-major, then source, gaps
    between blocks; each source's block in segment order) and the sorts of its chunks."""
    tile = segments.tile_keys(np.dtype(dtype).itemsize, "keys")
    ranks, me = 4, 2
    sizes = [0, 1, tile - 1, 3 * tile + 5, 9000][:sources]
    blocks = [draw(rng, dtype, k, spread) for k in sizes]
    everything = np.concatenate(blocks)
    splitters = splitters_of(everything, ranks, rng) if len(everything) > 3 else None
    sbits = segments.bucket_bits(ranks)
    dests = segmented.ranges(splitters, dtype, sbits)
    buckets = [buckets_of(b, 0, splitters, dests, sbits) for b in blocks]
    mine = [b[k >> sbits == me] for b, k in zip(blocks, buckets)]
    segs = [k[k >> sbits == me] & ((1 << sbits) - 1) for k in buckets]
    table = np.stack([np.bincount(s, minlength=1 << sbits) for s in segs])  # (source, segment)
    cuts = segmented.chunk_cuts(table.sum(axis=0), chunks)
    received = segmented._per_chunk(table, cuts)
    recv_starts = block_starts(received.T.copy(), 1024)
    buf = rng.integers(0, np.iinfo(dtype).max, int(recv_starts[-1, -1] + received[-1, -1]) + 1,
                       dtype=dtype)
    for s, (b, g) in enumerate(zip(mine, segs)):
        order = np.argsort(g, kind="stable")  # the sender's stable grouping by segment
        chunk = np.searchsorted(cuts, g[order], "right") - 1
        for c in range(chunks):
            part = b[order][chunk == c]
            buf[recv_starts[c, s] : recv_starts[c, s] + len(part)] = part
    sorts = segmented._sorts(dtype, table, cuts, recv_starts, received, dests[me])
    return buf, sorts, np.concatenate(mine), received


@pytest.mark.parametrize("dtype", [np.uint32, np.uint64])
@pytest.mark.parametrize("spread", ["uniform", "narrow", "skewed"])
@pytest.mark.parametrize("chunks", [1, 3])
def test_segment_sorts_leave_the_rank_sorted(cp, dtype, spread, chunks):
    """Every chunk's sort, in order, leaves the rank's keys sorted and packed in one buffer."""
    rng = np.random.default_rng([chunks, len(spread), np.dtype(dtype).itemsize])
    buf, sorts, keys, received = chunk_layout(rng, dtype, 5, spread, chunks)
    incoming = cp.asarray(buf)
    outgoing = cp.asarray(rng.integers(0, 9, max(len(buf), 1), dtype=dtype))
    for sort in sorts:
        sort.run(incoming, outgoing)
    result = outgoing if sorts[-1].in_scratch else incoming
    np.testing.assert_array_equal(cp.asnumpy(result[: len(keys)]), np.sort(keys))
    assert int(received.sum()) == len(keys)



def test_bucket_scatter_needs_the_counts_first(cp):
    splitters = np.array([[5, 0]], dtype=np.uint64)
    dests = segmented.ranges(splitters, np.uint32, segments.bucket_bits(2))
    part = segments.BucketPartition(cp.arange(10, dtype=cp.uint32), 0, splitters, dests,
                                    segments.bucket_bits(2))
    with pytest.raises(RuntimeError, match="before counts"):
        part.scatter(np.zeros(segments.BUCKETS, np.int64), cp.empty(10, dtype=cp.uint32))


@pytest.mark.parametrize("with_segs", [False, True])
def test_piece_tiles_cut_pieces_in_order(cp, with_segs):
    """Pieces (some empty, some longer than a tile) become tiles in piece order; only a marked
    piece's first tile keeps SEG_HEAD; tiles past the last piece's have 0 rows."""
    rows, starts, segs = [5, 0, 13, 2, 9], [0, 100, 50, 7, 200], [0, 0, 1, 1, 2]
    words = tiles.segment_heads(rows, segs) if with_segs else None
    got = [cp.asnumpy(a) for a in tiles.piece_tiles(rows, starts, 4, 11, words)]
    np.testing.assert_array_equal(got[0][:10], [0, 4, 50, 54, 58, 62, 7, 200, 204, 208])
    np.testing.assert_array_equal(got[1], [4, 1, 4, 4, 4, 1, 2, 4, 4, 1, 0])
    if with_segs:
        head = tiles.SEG_HEAD
        np.testing.assert_array_equal(got[2][:10], [head, 0, 1 | head, 1, 1, 1, 1, 2 | head, 2, 2])
    else:
        assert len(got) == 2
