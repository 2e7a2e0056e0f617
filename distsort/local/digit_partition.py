"""Driver of digit_partition.cu: the sender's partition of keys (or key-value pairs) by
(destination, the receiver's first radix digit). Why: digit_partition.cu.

Buckets: dest << bits | (key - lows[dest]) & (2^bits - 1), with dest the number of splitters
below (key, global position); bits = bucket_bits(ranks), so every bucket number is below 256.
"""

from __future__ import annotations

import functools

import numpy as np

from ..cuda_source import load_module
from .radix import (
    BLOCK,
    WIDE_ROWS,
    WORD_NAME,
    flag_words,
    onesweep_defines,
    placeholder,
    sm_count,
    tile_keys,
    value_words,
)
from .upload import on_device

BUCKETS = 256  # bucket numbers are 8-bit digits of the onesweep pass (digit_partition.cu)
MAX_RANKS = 16  # digit_partition.cu's MAX_SPLITTERS + 1
MAX_ROWS = 1 << 31  # rows a shard may hold: buffer rows (about a shard's) stay below 2^32
COUNT_BLOCK = 512  # bucket_counts' threads per block (digit_partition.cu)


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
    """digit_partition.cu's kernels for keys of one width, compiled when first used."""
    names = [f"bucket_counts<{word}>"] + [_scatter_name(word, v) for v in (None, "u32", "u64")]
    return load_module("local/digit_partition.cu", tuple(names), onesweep_defines())


def _scatter_name(word: str, value: str | None) -> str:
    """bucket_scatter's instance for keys of one width, alone (value None) or with values."""
    return f"bucket_scatter<{word},{value or 'u32'},{int(value is not None)}>"


@functools.cache
def _kernel(word: str, device: int, name: str):
    return _module(word).get_function(name)


class BucketPartition:
    """The sender's buckets over its keys (global positions offset + i, fewer than 2^32 keys):
    count (which also finds every key's bucket, one byte a key), then scatter."""

    def __init__(self, keys, offset: int, splitters: np.ndarray, lows: np.ndarray, bits: int):
        """lows: every destination's lowest key; a key's bucket within its destination is the
        low `bits` bits of key - lows[dest]."""
        import cupy

        self.cp, self.keys, self.word = cupy, keys, WORD_NAME[keys.dtype.itemsize]
        if len(splitters) >= MAX_RANKS:
            raise ValueError(f"digit partition: at most {MAX_RANKS} ranks")
        if keys.size >= 1 << 32:
            raise ValueError("digit partition: at most 2^32 - 1 keys a shard")
        dtype = keys.dtype
        split_keys, split_pos, lows = on_device(
            splitters[:, 0].astype(dtype), splitters[:, 1].astype(np.uint64),
            np.asarray(lows).astype(dtype))
        self.args = (split_keys, split_pos, np.int32(len(splitters)), lows, np.int32(bits),
                     np.uint64(offset))
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
            grid = min(4 * sm_count(self.keys.device.id), -(-n // COUNT_BLOCK))
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
        dummy = placeholder(self.keys.device.id)
        vals = tuple(value_words(v) for v in values) or (dummy, dummy)
        name = _scatter_name(self.word, WORD_NAME[vals[0].dtype.itemsize] if values else None)
        tiles = -(-n // tile_keys(self.keys.dtype.itemsize, "pairs" if values else "keys"))
        flags = self.cp.zeros(flag_words(tiles, n), dtype=np.uint32)
        counter = self.cp.zeros(1, dtype=np.uint32)
        kernel = _kernel(self.word, self.keys.device.id, name)
        first, count, own_keys, own_vals = own or (0, 0, dummy, None)
        own_vals = dummy if own_vals is None else value_words(own_vals)
        kernel((tiles,), (BLOCK,), (self.keys, out) + vals + (
            np.uint64(n), buckets, self.cp.asarray(bases.astype(np.uint32)), counter, flags,
            np.int32(n >= WIDE_ROWS), own_keys, own_vals, np.uint32(first), np.uint32(count)))
