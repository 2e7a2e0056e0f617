"""Rows taken in an order, at the pace of their bytes on either backend."""

from __future__ import annotations

import numpy as np

from ..cuda_source import CTYPES, load_module

WORDS = (8, 4, 2)  # widths a row of several bytes moves in (the widest that divides it)
KERNEL_ROW_BYTES = 32  # rows from this wide (of whole 4-byte words) go by rows.cu
MAX_BLOCKS = 2**20  # rows.cu's grid: blocks of 8 warps loop over the rows beyond
ROWS_PER_LANE = 8  # rows.cu's R (at most 8): loads in flight a lane (bench/history/take_rows.py)
ORDERS = {np.dtype(np.int64): "long long", np.dtype(np.int32): "int",
          np.dtype(np.uint32): "unsigned int"}


def take(column, order):
    """column[order] (rows). NumPy's take copies a row at once where indexing copies its
    elements one by one (2^21 rows of 100 bytes: 0.13 s against 0.32; bench/RESULTS.md,
    session 52). CuPy indexes element by element: records moved as bytes take several times
    longer than as 4-byte words, and even those stay slow, so on the GPU wide rows go by a
    kernel that copies several rows a warp at once (rows.cu) and narrower rows of several
    elements as the widest words that divide them."""
    if isinstance(column, np.ndarray):
        return np.take(column, order, axis=0)
    if column.ndim == 1 or not column.flags.c_contiguous:
        return column[order]
    row = column.itemsize * int(np.prod(column.shape[1:]))
    word = next((w for w in WORDS if row % w == 0), 1)
    if row >= KERNEL_ROW_BYTES and word >= 4:
        return _take_rows(column, order, word, row // word)
    if word <= column.itemsize:
        return column[order]
    words = column.reshape(len(column), row // column.itemsize).view(f"u{word}")
    return words[order].view(column.dtype).reshape((len(order),) + column.shape[1:])


def _take_rows(column, order, word: int, words: int):
    import cupy

    order = cupy.asarray(order)
    if order.dtype not in ORDERS:
        order = order.astype(np.int64)
    out = cupy.empty((len(order),) + column.shape[1:], dtype=column.dtype)
    n = len(order)
    if n:
        shift = max(3, (min(words, 32) - 1).bit_length())  # lanes a row: 2^shift
        kernel = _module().get_function(_name(ORDERS[order.dtype], CTYPES[word], shift))
        step = ROWS_PER_LANE << (5 - shift)  # rows a warp copies at once
        kernel((min(-(-n // (8 * step)), MAX_BLOCKS),), (256,),
               (column, out, cupy.ascontiguousarray(order), np.int64(n), np.int32(words)))
    return out


def _name(index: str, word: str, shift: int) -> str:
    return f"take_rows<{index}, {word}, {ROWS_PER_LANE}, {shift}>"


def compile_all() -> None:
    """Compile every instance a sort may use (python -m distsort compile)."""
    _module()


def _module():
    return load_module("local/rows.cu", tuple(_name(i, CTYPES[w], s) for i in ORDERS.values()
                                              for w in (4, 8) for s in (3, 4, 5)))
