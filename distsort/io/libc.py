"""The C library's calls that Python's os module lacks (fallocate, madvise, renameat2)."""

from __future__ import annotations

import ctypes
import functools


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
