"""Rows taken in an order, at the pace of their bytes on either backend."""

from __future__ import annotations

import numpy as np

WORDS = (8, 4, 2)  # widths a row of several bytes moves in (the widest that divides it)


def take(column, order):
    """column[order] (rows). CuPy indexes element by element, so on the GPU rows of several
    narrow elements move as the widest words that divide them: 2^25 records of 100 bytes take
    26.2 ms as bytes and 5.4 ms as 4-byte words on an H200 (bench/RESULTS.md, run 154)."""
    if isinstance(column, np.ndarray) or column.ndim == 1 or not column.flags.c_contiguous:
        return column[order]
    row = column.itemsize * int(np.prod(column.shape[1:]))
    word = next((w for w in WORDS if row % w == 0), 1)
    if word <= column.itemsize:
        return column[order]
    words = column.reshape(len(column), -1).view(f"u{word}")
    return words[order].view(column.dtype).reshape((len(order),) + column.shape[1:])
