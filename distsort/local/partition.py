"""GPU partition by splitters: the driver for partition.cu (stable, ties by global position)."""

from __future__ import annotations

import numpy as np

from ..cuda_source import CTYPES, load_module
from ..exchange import aligned_displacements, displacements

TILE = 256 * 16  # keep in step with partition.cu: BLOCK threads x ITEMS keys per thread
MAX_BUCKETS = 256  # and its MAX_BUCKETS


def _module():
    names = tuple(f"partition_{kind}<{c}>" for kind in ("count", "scatter")
                  for c in CTYPES.values())
    return load_module("local/partition.cu", names)


def supports(keys, buckets: int) -> bool:
    """True if the kernel handles these keys (one unsigned word) and this many buckets."""
    return keys.dtype.kind == "u" and keys.dtype.itemsize in CTYPES and buckets <= MAX_BUCKETS


def partition_keys(keys, offset: int, splitters: np.ndarray, want_dest: bool, align: int = 1):
    """Group keys by bucket (stable). Returns (grouped keys, dest or None, counts per bucket,
    where each bucket starts).

    splitters: (p-1, 2) uint64 host array of (key, global position); key i sits at global
    position offset + i. dest[i] is where key i went, for moving other columns alike. Buckets
    start at multiples of align rows; the gaps between them hold no keys.
    """
    import cupy

    n, buckets = len(keys), len(splitters) + 1
    ctype = CTYPES[keys.dtype.itemsize]
    split_keys = cupy.asarray(splitters[:, 0].astype(keys.dtype))
    split_pos = cupy.asarray(np.ascontiguousarray(splitters[:, 1]))
    tiles = max((n + TILE - 1) // TILE, 1)
    counts = cupy.zeros(buckets * tiles, dtype=np.int64)
    args = (keys, np.int64(n), np.uint64(offset), split_keys, split_pos, np.int32(buckets - 1))
    grid, block = (tiles,), (TILE // 16,)
    count = _module().get_function(f"partition_count<{ctype}>")
    count(grid, block, args + (counts, np.int64(tiles)))
    per_bucket = cupy.asnumpy(counts.reshape(buckets, tiles).sum(axis=1)).astype(np.int64)
    bases = aligned_displacements(per_bucket, align)
    starts = cupy.cumsum(counts) - counts
    shift = bases - displacements(per_bucket)  # move every bucket to its aligned start
    starts.reshape(buckets, tiles)[...] += cupy.asarray(shift)[:, None]
    out = cupy.empty(int(bases[-1] + per_bucket[-1]), dtype=keys.dtype)
    dest = cupy.empty(n, dtype=np.int64) if want_dest else None
    scatter = _module().get_function(f"partition_scatter<{ctype}>")
    scatter(grid, block, args + (starts, np.int64(tiles), out, dest if want_dest else np.uintp(0)))
    return out, dest, per_bucket, bases
