"""The C library's calls that Python's os module lacks (fallocate, madvise, mincore, renameat2),
the page arithmetic their ranges take, what mincore says of a mapping, and pages given back."""

from __future__ import annotations

import ctypes
import functools
import mmap
import os

import numpy as np


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


def madvise():
    """The C library's madvise, or None where there is none."""
    return function("madvise", (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int))


def let_go(start: int, end: int) -> None:
    """Give the whole pages among addresses [start, end) back to the system (madvise
    MADV_DONTNEED): private memory no longer needed that a live allocation still holds (it
    reads as zeros after, and costs nothing until written), or written pages of a shared file
    mapping (only unmapped: the bytes stay in the page cache). Nothing where there is no
    madvise."""
    call, (lo, hi) = madvise(), whole_pages(start, end)
    if call is not None and hi > lo:
        call(lo, hi - lo, mmap.MADV_DONTNEED)


def whole_pages(start: int, end: int) -> tuple[int, int]:
    """[lo, hi): the whole pages among bytes (or addresses) [start, end); hi <= lo where none."""
    page = mmap.PAGESIZE
    return -(-start // page) * page, end // page * page


def resident_mapping(fd: int, path, lo: int, hi: int) -> mmap.mmap | None:
    """A read-only shared mapping of bytes [lo, hi) (lo on a page) of the open file fd (at
    path), where the file holds them all and every page of them is in memory, as far as this
    process may tell (sees_residency); else None. Raises OSError or ValueError where the
    mapping fails."""
    if not sees_residency(fd, path) or os.fstat(fd).st_size < hi:
        return None
    view = mmap.mmap(fd, hi - lo, offset=lo, prot=mmap.PROT_READ)
    if resident(np.frombuffer(view, np.uint8).ctypes.data, hi - lo):  # no export left behind
        return view
    view.close()
    return None


def sees_residency(fd: int, path) -> bool:
    """Whether mincore tells this process where the file's pages are: only for a file it owns
    or may write (Linux 5.2 on); for others it says every page is in memory, which would take
    a range on disk for one in memory (then read page by page where it is locked or mapped)."""
    euid = os.geteuid()
    return euid == 0 or os.fstat(fd).st_uid == euid or os.access(path, os.W_OK)


def resident(address: int, nbytes: int) -> bool:
    """Whether every page of the mapping [address, address + nbytes) is in memory (mincore)."""
    mincore = function("mincore", (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p))
    if mincore is None:
        return False
    pages = np.empty(-(-nbytes // mmap.PAGESIZE), np.uint8)
    if mincore(address, nbytes, pages.ctypes.data) != 0:
        return False
    return bool(np.all(pages & 1))
