"""Drivers of segments.cu: the segmented exchange's partition by value sub-range (the sender's
side) and its sort of sub-ranges, each on its own (the receiver's). Why: segments.cu.

Buckets: dest << sbits | ((key - lows[dest]) >> shifts[dest]) & mask, with dest the number of
splitters below (key, global position); sbits = bucket_bits(ranks), so every bucket number is
below 256. Segments take every bit (mask ~0); chunked.ByDigit the low sbits bits (shift 0).
"""

from __future__ import annotations

import functools

import numpy as np

from .radix import (
    _WORD,
    BLOCK,
    KEYS_ONLY,
    WIDE_ROWS,
    _dummy,
    _sm_count,
    digit_passes,
    flag_words,
    module_with,
    onesweep,
    tile_keys,
    value_words,
)
from .tiles import piece_tiles, segment_heads
from .upload import on_device

BUCKETS = 256  # bucket numbers are 8-bit digits of the onesweep pass (segments.cu)
MAX_RANKS = 16  # segments.cu's MAX_SPLITTERS + 1
COUNT_BLOCK = 512  # bucket_counts' threads per block (segments.cu)


def bucket_bits(ranks: int) -> int:
    """Bits of the sub-range within a destination: 2^bits x ranks (rounded up to a power of
    two) buckets, 256 in all."""
    return 8 - (ranks - 1).bit_length()


def compile_all() -> None:
    """Compile every instance a sort may use (python -m distsort compile)."""
    for word in ("u32", "u64"):
        _module(word)


@functools.cache
def _module(word: str):
    """segments.cu's kernels for keys of one width, compiled after radix.cu when first used."""
    passes = 8 if word == "u64" else 4
    names = [f"bucket_counts<{word}>", "segment_scan"]
    names += [_scatter_name(word, value) for value in (None, "u32", "u64")]
    names += [f"segment_histogram<{word},{p}>" for p in range(1, passes + 1)]
    return module_with("segments.cu", tuple(names))


def _scatter_name(word: str, value: str | None) -> str:
    """bucket_scatter's instance for keys of one width, alone (value None) or with values."""
    return f"bucket_scatter<{word},{value or 'u32'},{int(value is not None)}>"


@functools.cache
def _kernel(word: str, device: int, name: str):
    return _module(word).get_function(name)


class BucketPartition:
    """The sender's buckets over its keys (global positions offset + i, fewer than 2^32 keys):
    count (which also finds every key's bucket, one byte a key), then scatter."""

    def __init__(self, keys, offset: int, splitters: np.ndarray, dests: np.ndarray, sbits: int,
                 mask: int = 0xFFFFFFFF):
        """dests: (base, shift, extra) of every destination (segmented.ranges); a key's bucket
        within its destination is ((key - base) >> shift) & mask, less extra (segments.cu)."""
        import cupy

        self.cp, self.keys, self.word = cupy, keys, _WORD[keys.dtype.itemsize]
        if len(splitters) >= MAX_RANKS:
            raise ValueError(f"segmented partition: at most {MAX_RANKS} ranks")
        if keys.size >= 1 << 32:
            raise ValueError("segmented partition: at most 2^32 - 1 keys a shard")
        dtype = keys.dtype
        split_keys, split_pos, lows, shifts = on_device(
            splitters[:, 0].astype(dtype), splitters[:, 1].astype(np.uint64),
            dests[:, 0].astype(dtype), (dests[:, 1] | dests[:, 2] << 8).astype(np.int32))
        self.args = (split_keys, split_pos, np.int32(len(splitters)), lows, shifts,
                     np.int32(sbits), np.uint32(mask), np.uint64(offset))
        self.buckets = None  # every key's bucket (device uint8), from counts() to scatter()

    def _fn(self, name: str):
        return _kernel(self.word, self.keys.device.id, f"{name}<{self.word}>")

    def counts(self):
        """Keys per bucket (device, 256 uint32); keeps every key's bucket for the scatter."""
        cp, n, width = self.cp, self.keys.size, self.keys.dtype.itemsize
        counts = cp.zeros(BUCKETS, dtype=np.uint32)
        # the kernel stores each 16-byte vector's buckets at once: keys before the first 16-byte
        # boundary (head) go one by one, and the buckets start so that buckets + head is aligned
        head = min(n, -self.keys.data.ptr % 16 // width)
        per = 16 // width
        shift = -head % per
        # and 16 bytes to spare on either side: the scatter reads them in aligned 16-byte vectors
        self.buckets = cp.empty(n + shift + 32, dtype=np.uint8)[16 + shift : 16 + shift + n]
        if n:
            grid = min(4 * _sm_count(self.keys.device.id), -(-n // COUNT_BLOCK))
            self._fn("bucket_counts")((grid,), (COUNT_BLOCK,), (self.keys, np.uint32(n),
                                                                 np.uint32(head)) + self.args
                                      + (counts, self.buckets))
        return counts

    def scatter(self, bases: np.ndarray, out, values: tuple = (), own: tuple | None = None
                ) -> None:
        """Every key into out, stably, bucket b's keys from out[bases[b]] on (after counts();
        frees the buckets); values: (values in, values out) of 4 or 8 bytes, which go where
        their keys go, or () for keys alone. own: (first bucket, buckets, keys out, values out
        or None): those buckets go there instead (their bases count from there)."""
        if self.buckets is None:
            raise RuntimeError("BucketPartition.scatter before counts")
        n, buckets, self.buckets = self.keys.size, self.buckets, None
        if n == 0:
            return
        dummy = _dummy(self.keys.device.id)
        vals = tuple(value_words(v) for v in values) or (dummy, dummy)
        name = _scatter_name(self.word, _WORD[vals[0].dtype.itemsize] if values else None)
        tiles = -(-n // tile_keys(self.keys.dtype.itemsize, "pairs" if values else "keys"))
        flags = self.cp.zeros(flag_words(tiles, n), dtype=np.uint32)
        counter = self.cp.zeros(1, dtype=np.uint32)
        kernel = _kernel(self.word, self.keys.device.id, name)
        first, count, own_keys, own_vals = own or (0, 0, dummy, None)
        own_vals = dummy if own_vals is None else value_words(own_vals)
        kernel((tiles,), (BLOCK,), (self.keys, out) + vals + (
            np.uint64(n), buckets, self.cp.asarray(bases.astype(np.uint32)), counter, flags,
            np.int32(n >= WIDE_ROWS), own_keys, own_vals, np.uint32(first), np.uint32(count)))


class SegmentSort:
    """One chunk's segments, each sorted on its own over bits [0, bits) of key - low (segment 0
    over [0, head_bits)): pieces (start, rows, segment) in segment order lie in the receive
    buffer; segment s's keys end packed from out_start + its rows before it, in the receive
    buffer after an even number of `common` passes, in the scratch after an odd one. All
    planned on the host before any key arrives."""

    def __init__(self, dtype, pieces: np.ndarray, seg_rows: np.ndarray, out_start: int,
                 low: int, bits: int, head_bits: int):
        import cupy

        self.cp, self.dtype = cupy, np.dtype(dtype)
        self.low, self.end_bit = self.dtype.type(low), max(head_bits, bits, 1)
        self.passes = digit_passes(0, self.end_bit)
        self.common = len(digit_passes(0, max(bits, 1)))  # the passes of every segment
        self.n, self.segs = int(seg_rows.sum()), len(seg_rows)
        tile = tile_keys(self.dtype.itemsize, "keys")
        seg_start = out_start + np.cumsum(seg_rows) - seg_rows
        self.head = (int(seg_start[0]), int(seg_rows[0])) if self.segs else (0, 0)
        self.tiles = (int((-(-pieces[1] // tile)).sum()), int((-(-seg_rows // tile)).sum()),
                      -(-self.head[1] // tile))
        self.first = piece_tiles(pieces[1], pieces[0], tile, self.tiles[0],
                                 segment_heads(pieces[1], pieces[2]))
        segs = np.arange(self.segs)
        self.later = piece_tiles(seg_rows, seg_start, tile, self.tiles[1],
                                 segment_heads(seg_rows, segs))
        self.seg_start = cupy.asarray(seg_start.astype(np.uint32))
        words = len(self.passes) * self.segs * 256
        self.counts = cupy.zeros(words, dtype=np.uint32)
        self.bases = cupy.empty(words, dtype=np.uint32)
        self.counters = cupy.zeros(len(self.passes), dtype=np.uint32)

    @property
    def in_scratch(self) -> bool:
        """Whether the sorted keys end in the scratch (else in the receive buffer)."""
        return self.common % 2 == 1

    def run(self, keys, scratch) -> None:
        """Queue the sort on the current stream, which must see every piece in keys."""
        if self.n == 0:
            return
        self._histogram(keys)
        pair, dummy = (keys, scratch), _dummy(keys.device.id)
        # allocated here, on the stream of the passes, so the chunks' sorts (queued one after
        # another) reuse one buffer rather than each holding its own from the plan on
        look_back = self.cp.empty(flag_words(max(self.tiles), self.n), dtype=np.uint32)
        for i, shift_bits in enumerate(self.passes):
            tiles = self.tiles[0 if i == 0 else 1 if i < self.common else 2]
            desc = self.first if i == 0 else self.later  # segment 0's tiles come first
            flags = look_back[: flag_words(tiles, self.n)]
            flags.fill(0)
            pass_args = (self.bases[i * self.segs * 256 :], self.counters[i : i + 1], flags)
            onesweep((pair[i % 2], dummy), (pair[(i + 1) % 2], dummy), KEYS_ONLY, shift_bits,
                     self.low, pass_args, self.n >= WIDE_ROWS, tiles, tuple(desc))
        if len(self.passes) > self.common:  # segment 0's last pass: back beside the others
            start, rows = self.head
            done = pair[self.common % 2]
            done[start : start + rows] = pair[1 - self.common % 2][start : start + rows]

    def _histogram(self, keys) -> None:
        word, dev = _WORD[self.dtype.itemsize], keys.device.id
        hist = _kernel(word, dev, f"segment_histogram<{word},{len(self.passes)}>")
        grid = max(1, min(self.tiles[0], 8 * _sm_count(dev)))
        hist((grid,), (BLOCK,), (keys, self.low, np.int32(self.end_bit),
                                 np.uint32(self.tiles[0]), np.int32(self.segs), *self.first,
                                 self.counts))
        scan = _kernel(word, dev, "segment_scan")
        scan((self.segs, len(self.passes)), (256,), (self.counts, self.seg_start, self.bases))
