"""Reads and writes of large byte ranges of one file, spread over a pool of threads.

Reads from the page cache scale with threads (many times faster with 16 threads than with one),
so a rank's range is cut into PIECE-byte requests that the pool's threads serve at once.
Positioned writes into one file do not scale: the file system takes the file's lock for each
(ext4: one file 3.2-4.0 GB/s at 1 to 16 threads, 16 files 31 GB/s). Threads copying into a
shared mapping of the file do scale, once the file's blocks are allocated ahead (fallocate: the
page faults of writes into holes queue on the block reservation instead): 9.6 GB/s with 16
threads (bench/RESULTS.md, run 218). So a file whose blocks could be reserved is written through a
mapping (FileRange), others by positioned writes. The ranks of a node share its cores: each
takes its share of them (workers.threads_for), whatever core the launcher bound it to.
"""

from __future__ import annotations

import ctypes
import errno
import mmap
import os

import numpy as np

from ..workers import spread
from . import libc
from .ahead import PagesAhead, PagesBehind, room

PIECE = 4 << 20  # bytes a request: large enough that a call's cost vanishes, small enough to
# spread one 64 MiB staging buffer over all of a rank's threads (workers.MAX_THREADS)
NODE_MAPPED_WRITERS = 16  # threads copying into one file's mapping, all the node's ranks
# together: more stall each other (4 ranks of 16 threads wrote 16 GiB at 2.9 GB/s, of 4 at 11.5;
# one rank of 16 or 64 at 10.7: bench/RESULTS.md, run 305)
AHEAD_SHARE = 2  # a rank's writers over the threads that fault its pages in ahead (ahead.py):
# with a quarter of them 8 GiB were not faulted in by the first write (2 ranks: 2.5-3.5 of 4 GiB
# each); with all of them the reads beside them slowed (bench/RESULTS.md, runs 329-330)


def pread_into(fd: int, view: memoryview, offset: int) -> int:
    """Read len(view) bytes of fd from offset into view; returns the bytes read (fewer only at
    the end of the file). Raises OSError as os.preadv does."""
    return sum(spread(lambda lo, hi: _read_piece(fd, view[lo:hi], offset + lo), len(view), PIECE))


def pwrite_from(fd: int, view: memoryview, offset: int) -> None:
    """Write view's bytes to fd at offset. Raises OSError as os.pwritev does."""
    spread(lambda lo, hi: _write_piece(fd, view[lo:hi], offset + lo), len(view), PIECE)


def reserve(fd: int, nbytes: int) -> bool:
    """Make fd's file nbytes long with its blocks allocated (fallocate): True. Where the file
    system allocates nothing ahead, only size it (sparse): False. Raises OSError otherwise (a
    full disk: ENOSPC, now rather than while writing)."""
    if nbytes:
        try:
            _fallocate(fd, nbytes)
            return True
        except OSError as exc:
            if exc.errno not in (errno.EOPNOTSUPP, errno.ENOSYS, errno.EINVAL):
                raise
    os.ftruncate(fd, nbytes)
    return False


def _fallocate(fd: int, nbytes: int) -> None:
    # fallocate(2), not os.posix_fallocate: where the file system cannot reserve blocks, glibc's
    # posix_fallocate writes zeros through the whole file instead, the very pass we avoid.
    call = libc.function("fallocate", (ctypes.c_int, ctypes.c_int, ctypes.c_int64, ctypes.c_int64))
    if call is None:
        raise OSError(errno.ENOSYS, "this C library has no fallocate")
    if call(fd, 0, 0, nbytes) != 0:
        code = ctypes.get_errno()
        raise OSError(code, os.strerror(code))


class FileRange:
    """Bytes [offset, offset + nbytes) of a file open for reading and writing, written piece by
    piece by the pool's threads: copied into a shared mapping of them when `mapped` (the file's
    blocks reserved: see the module doc), by at most NODE_MAPPED_WRITERS / `sharers` threads at
    once (sharers: the node's ranks that write the file), else by positioned writes; `ahead`
    (lo, hi): the bytes of the range that this rank will write, whose pages (the first
    ahead.room() bytes of them) are faulted in until the first write, and each write's pages
    are let go of behind it (ahead.py). Close it after use."""

    def __init__(self, fd: int, offset: int, nbytes: int, mapped: bool, sharers: int = 1,
                 ahead: tuple[int, int] | None = None):
        self.fd, self.offset = fd, offset
        self.writers = max(1, NODE_MAPPED_WRITERS // sharers)
        self._map: mmap.mmap | None = None
        self._bytes: np.ndarray | None = None
        self._ahead: PagesAhead | None = None
        self._behind = PagesBehind()
        if mapped and nbytes:
            skip = offset % mmap.ALLOCATIONGRANULARITY  # a mapping starts on a page
            self._map = mmap.mmap(fd, skip + nbytes, offset=offset - skip)
            self._bytes = np.frombuffer(self._map, np.uint8)[skip:]
            if ahead is not None:
                lo, hi = ahead
                hi = min(hi, lo + room(sharers))  # the first bytes: the writes come in order
                self._ahead = PagesAhead(self._bytes[lo:max(lo, hi)],
                                         max(1, self.writers // AHEAD_SHARE))

    def write(self, data: np.ndarray, at: int) -> None:
        """Write data's bytes at byte `at` of the range. Raises OSError as os.pwritev does."""
        data = data.reshape(-1).view(np.uint8)
        self._stop_ahead()  # faults taken ahead while writes fault too contend, slower than either
        if self._bytes is None:
            pwrite_from(self.fd, memoryview(data), self.offset + at)
            return
        target = self._bytes[at : at + len(data)]
        piece = max(PIECE, -(-len(data) // self.writers))  # writers pieces at the most
        spread(lambda lo, hi: np.copyto(target[lo:hi], data[lo:hi]), len(data), piece)
        self._behind.written(target)

    def close(self) -> None:
        """Unmap the range; where a view of it is still held (the frames of an interrupted
        write's traceback hold theirs), it is unmapped with its last view instead."""
        self._stop_ahead()  # its threads use the mapping
        self._behind.stop()
        self._bytes = None  # the mapping's one export, released before it closes
        if self._map is not None:
            try:
                self._map.close()
            except BufferError:
                pass
            self._map = None

    def _stop_ahead(self) -> None:
        if self._ahead is not None:
            self._ahead.stop()
            self._ahead = None


def _read_piece(fd: int, view: memoryview, offset: int) -> int:
    done = 0
    while done < len(view):
        got = os.preadv(fd, [view[done:]], offset + done)
        if not got:
            break
        done += got
    return done


def _write_piece(fd: int, view: memoryview, offset: int) -> None:
    done = 0
    while done < len(view):
        done += os.pwritev(fd, [view[done:]], offset + done)
