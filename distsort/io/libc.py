"""The C library's calls that Python's os module lacks (fallocate, madvise, mincore, renameat2),
and the page arithmetic their ranges take."""

from __future__ import annotations

import ctypes
import functools
import mmap


@functools.cache
def function(name: str, argtypes: tuple, restype=ctypes.c_int):
    """The C library's `name` with these argument types (it sets errno for ctypes.get_errno,
    and lets go of the GIL while it runs), or None where this system's has none."""
    try:
        call = getattr(ctypes.CDLL(None, use_errno=True), name)
    except (AttributeError, OSError):
        return None
    call.argtypes, call.restype = list(argtypes), restype
    return call


def whole_pages(start: int, end: int) -> tuple[int, int]:
    """[lo, hi): the whole pages among bytes (or addresses) [start, end); hi <= lo where none."""
    page = mmap.PAGESIZE
    return -(-start // page) * page, end // page * page
