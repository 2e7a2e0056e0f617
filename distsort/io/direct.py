"""A range of an input file copied to the device straight out of the page cache.

Where every page of the range is in memory already (a file just written or read: the warm
case), the device's copy engines can read the bytes where they lie: a read-only mapping of the
range is page-locked (cudaHostRegister, cudaHostRegisterReadOnly) piece by piece, each piece
copied up as soon as it is locked and unlocked once copied, and the CPU copies nothing.
staging.load's threads instead copy each byte from the page cache into a pinned buffer first,
which an out-of-core job's other work on the CPU (its runs' store and the output's pages
faulted in) slows threefold: 8 GiB of runs read in 0.93-1.05 s that way, 0.29-0.34 s this way
(bench/RESULTS.md, runs 336-338).
Left to the threads' reads: small ranges (MIN_BYTES), ranges with pages on disk (a lock would
read them page by page on one thread), byte orders to swap, files whose pages the system will
not lock, and the partial pages at a range's ends (the pages beside belong to another range,
maybe another rank's).
"""

from __future__ import annotations

import os

import numpy as np

from . import libc
from .reader import InputFile

READ_ONLY = 8  # cudaHostRegisterReadOnly: the device only reads the pages
PIECE = 256 << 20  # bytes a lock: the next piece is locked while this one copies
MIN_BYTES = 256 << 20  # smaller ranges go through the ring: a call's mapping, locks and
# waits cost more than the threads' copy (`check`'s 64 MiB pieces of 2 x 4 GiB: 2.48-2.64 s
# this way, 2.11-2.27 through the ring; bench/RESULTS.md, run 345)


def copy_cached(source: InputFile, start: int, stop: int, out, stream) -> list | None:
    """Copy the whole pages of elements [start, stop) of `source` into the CuPy uint8 array
    `out` (the range's bytes) on `stream`, once copied, where they are all in memory and may
    be locked, and return the element ranges left to read (those with bytes in the partial
    pages at the ends); else copy nothing and return None."""
    fmt = source.fmt
    if ((stop - start) * fmt.itemsize < MIN_BYTES
            or (fmt.kind != "records" and not fmt.dtype.isnative)
            or not 0 <= start <= stop <= source.count
            or out.size != (stop - start) * fmt.itemsize or not out.flags.c_contiguous):
        return None  # the reads swap the bytes, or say what is wrong
    first, last = source.offset + start * fmt.itemsize, source.offset + stop * fmt.itemsize
    lo, hi = libc.whole_pages(first, last)
    if hi <= lo or not _copy_pages(source.path, lo, hi, out.data.ptr + lo - first, stream):
        return None
    head = min(stop, start + -(-(lo - first) // fmt.itemsize))
    tail = max(head, stop - -(-(last - hi) // fmt.itemsize))
    return [(start, head), (tail, stop)]


def _copy_pages(path, lo: int, hi: int, target: int, stream) -> bool:
    """Bytes [lo, hi) (whole pages) of the file at path copied to device address target, where
    all are in memory and may be locked; False (nothing copied) where not, or where the file
    was cut short meanwhile (the reads then say so)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return False
    try:
        view = libc.resident_mapping(fd, path, lo, hi)
        if view is None:
            return False
        try:
            address = np.frombuffer(view, np.uint8).ctypes.data  # no export left behind
            copied = _copy_locked(address, hi - lo, target, stream)
        finally:
            view.close()
        return copied and os.fstat(fd).st_size >= hi
    except (OSError, ValueError):
        return False
    finally:
        os.close(fd)


def _copy_locked(address: int, nbytes: int, target: int, stream) -> bool:
    """Lock [address, address + nbytes) piece by piece, copy each to the device at `target` as
    soon as it is locked, and unlock each once its copy is done (two pieces locked at most).
    False where a lock is refused (the caller reads the range its own way: what was copied
    is copied again)."""
    import cupy

    runtime, locked = cupy.cuda.runtime, []  # [address, what to wait for before unlocking]
    try:
        for at in range(0, nbytes, PIECE):
            size = min(PIECE, nbytes - at)
            locked.append([address + at, stream])  # before the lock: an interrupt finds it
            try:
                runtime.hostRegister(address + at, size, READ_ONLY)
            except runtime.CUDARuntimeError:
                locked.pop()
                return False
            runtime.memcpyAsync(target + at, address + at, size, runtime.memcpyHostToDevice,
                                stream.ptr)
            locked[-1][1] = stream.record()
            if len(locked) > 1:  # the piece before: copied while this one was locked
                _unlock(runtime, *locked.pop(0))
        return True
    finally:
        while locked:
            _unlock(runtime, *locked.pop(0))


def _unlock(runtime, address: int, copied) -> None:
    """Unlock the piece at address once `copied` (its copy's event, or the stream) is done."""
    try:
        copied.synchronize()  # no copy may still read a page once it is unlocked
    finally:
        try:
            runtime.hostUnregister(address)
        except runtime.CUDARuntimeError:  # never locked (interrupted between the two)
            pass
