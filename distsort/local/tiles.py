"""Tile descriptors of a onesweep pass over pieces that lie apart, built on the device (tiles.cu).

A piece is a run of keys (start, rows) in the pass's input; the pass reads the pieces in order,
as if they were one array, cut into tiles of at most `tile` keys, a piece's tiles never holding
another piece's keys (radix.cu: tile_start, tile_rows, tile_seg).
"""

from __future__ import annotations

import numpy as np

from ..arrays import ceil_div
from ..cuda_source import load_module


def piece_tiles(rows, starts, tile: int, bound: int) -> tuple:
    """Device uint32 (tile_start, tile_rows) of `bound` tiles (an upper bound; those past the
    last piece's have 0 rows) for pieces of rows (int64) from starts, on the device."""
    import cupy

    rows = cupy.asarray(rows, dtype=np.int64)
    per = ceil_div(rows, tile)
    first_tile = cupy.cumsum(per) - per
    tile_start = cupy.empty(bound, dtype=np.uint32)
    tile_rows = cupy.zeros(bound, dtype=np.uint32)
    if len(rows):
        kernel = _module().get_function("piece_tiles")
        kernel((len(rows),), (128,), (rows, cupy.asarray(starts, dtype=np.int64), first_tile,
                                      np.int32(tile), tile_start, tile_rows))
    return tile_start, tile_rows


def compile_all() -> None:
    """Compile every instance a sort may use (python -m distsort compile)."""
    _module()


def _module():
    return load_module("local/tiles.cu", ("piece_tiles",))
