"""Tile descriptors of a onesweep pass over pieces that lie apart, built on the device (tiles.cu).

A piece is a run of keys (start, rows) in the pass's input; the pass reads the pieces in order,
as if they were one array, cut into tiles of at most `tile` keys, a piece's tiles never holding
another piece's keys (radix.cu: tile_start, tile_rows, tile_seg).
"""

from __future__ import annotations

import numpy as np

from ..cuda_source import load_module
from .radix import NULL

SEG_HEAD = 1 << 31  # tile_seg: the first tile of its segment (radix.cu)


def piece_tiles(rows, starts, tile: int, bound: int, segs=None) -> tuple:
    """Device uint32 (tile_start, tile_rows[, tile_seg]) of `bound` tiles (an upper bound; those
    past the last piece's have 0 rows) for pieces of rows (int64) from starts, on the device.
    segs (or None): each piece's segment, with SEG_HEAD on the first non-empty piece of one."""
    import cupy

    rows = cupy.asarray(rows, dtype=np.int64)
    per = -(-rows // tile)
    first_tile = cupy.cumsum(per) - per
    tile_start = cupy.empty(bound, dtype=np.uint32)
    tile_rows = cupy.zeros(bound, dtype=np.uint32)
    out = (tile_start, tile_rows)
    seg = NULL
    if segs is not None:
        seg = cupy.asarray(segs, dtype=np.uint32)
        out += (cupy.zeros(bound, dtype=np.uint32),)  # past the last piece: segment 0
    if len(rows):
        kernel = _module().get_function("piece_tiles")
        kernel((len(rows),), (128,), (rows, cupy.asarray(starts, dtype=np.int64), first_tile,
                                      seg, np.int32(tile), tile_start, tile_rows,
                                      out[2] if len(out) > 2 else NULL))
    return out


def segment_heads(rows: np.ndarray, segs: np.ndarray) -> np.ndarray:
    """Pieces' segment words (host): the segment, with SEG_HEAD on each segment's first
    non-empty piece (pieces in segment order)."""
    rows, segs = np.asarray(rows, np.int64), np.asarray(segs, np.int64)
    nonempty = np.flatnonzero(rows > 0)
    head = np.zeros(len(rows), dtype=bool)
    if len(nonempty):
        first = np.ones(len(nonempty), dtype=bool)
        first[1:] = segs[nonempty[1:]] != segs[nonempty[:-1]]
        head[nonempty[first]] = True
    return (segs | np.where(head, SEG_HEAD, 0)).astype(np.uint32)


def compile_all() -> None:
    """Compile every instance a sort may use (python -m distsort compile)."""
    _module()


def _module():
    return load_module("local/tiles.cu", ("piece_tiles",))
