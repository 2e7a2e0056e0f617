"""Values (the payload sorted along with the keys) of any fixed-size dtype, on every backend.

The sort moves values without looking at them, but CuPy holds booleans and numbers only. So
values of other dtypes -- datetime64, timedelta64, byte and unicode strings, structured records
-- travel as their bytes: as one unsigned word where an element is 1, 2, 4 or 8 bytes (so that a
datetime64 rides on the radix passes with its key, as an int64 would), else as a row of bytes;
and they are viewed back as their dtype when they return. Object arrays hold references, which
mean nothing in another process: they are refused.
"""

from __future__ import annotations

import functools

import numpy as np

from .errors import DistsortError
from .keys import UNSIGNED

HELD = "biufc"  # dtype kinds that CuPy holds, and that every path moves as they are


def check_payload(dtype, what: str = "values") -> np.dtype:
    """Return dtype if the sort can carry it (any fixed size but objects), else raise."""
    dtype = np.dtype(dtype)
    if dtype.hasobject:
        raise DistsortError(
            f"cannot carry {what} of dtype {dtype}: they hold Python objects, whose references "
            "mean nothing in another process; convert them to a fixed-size dtype first "
            "(e.g. numbers, datetime64, or strings with numpy.asarray(values, dtype='U16'))")
    if dtype.itemsize == 0:
        raise DistsortError(f"cannot carry {what} of dtype {dtype}: its elements have no bytes")
    return dtype


def stored(values, into: bool = False):
    """values as an array that every backend moves: itself where CuPy holds its kind, else its
    bytes in native byte order (a view of a C-contiguous native array) as one unsigned word a
    row, or as a row of bytes. Records with padding between or after their fields come with
    those bytes zeroed (a copy): NumPy leaves them unwritten in a copy of a strided or
    byte-swapped array, so the same records could otherwise hash differently (check.py).
    into: values is where a sort's results go (out=): always a view of it, its padding as it
    is (the sort writes the zeroed bytes there)."""
    if values is None or values.dtype.kind in HELD:
        return values
    values = np.ascontiguousarray(values, dtype=values.dtype.newbyteorder("="))
    width = values.dtype.itemsize * int(np.prod(values.shape[1:], dtype=np.int64))
    rows = values.view(np.uint8).reshape(len(values), width)
    fields = None if into else _field_bytes(values.dtype)
    if fields is not None:
        rows = rows & np.tile(fields, width // values.dtype.itemsize)
    return rows.view(UNSIGNED[width]).reshape(-1) if width in UNSIGNED else rows


@functools.lru_cache(maxsize=64)
def _field_bytes(dtype: np.dtype) -> np.ndarray | None:
    """0xFF at each byte of a dtype's element that some field holds, 0 at padding; None where
    there is no padding."""
    mask = np.zeros(dtype.itemsize, np.uint8)
    _mark_fields(dtype, 0, mask)
    return None if mask.all() else mask


def _mark_fields(dtype: np.dtype, at: int, mask: np.ndarray) -> None:
    if dtype.names is None and (dtype.subdtype is None or dtype.base.names is None):
        mask[at : at + dtype.itemsize] = 0xFF  # a scalar, or a sub-array of scalars
    elif dtype.names is None:  # a sub-array of records: each of them
        base, shape = dtype.subdtype
        for i in range(int(np.prod(shape, dtype=np.int64))):
            _mark_fields(base, at + i * base.itemsize, mask)
    else:
        for name in dtype.names:
            field, offset = dtype.fields[name][:2]
            _mark_fields(field, at + offset, mask)


def restored(array, like):
    """An array that stored(x) gave (or the sort returned for it), on the host, viewed as x's
    dtype (in native byte order, as stored made it) and row shape again; like: x (or any array
    of its dtype and row shape)."""
    if array is None or like.dtype.kind in HELD:
        return array
    if not isinstance(array, np.ndarray):
        array = array.get()  # a CuPy array of the values' bytes
    dtype = like.dtype.newbyteorder("=")
    return array.view(dtype).reshape((len(array),) + tuple(like.shape[1:]))
