"""Positioned reads and writes of large byte ranges, spread over a pool of threads.

Reads from the page cache scale with threads (many times faster with 16 threads than with one;
writes did not scale: bench/RESULTS.md), so
a rank's range is cut into PIECE-byte requests that the pool's threads serve at once. The ranks
of a node share its cores: each takes its share of them (workers.threads_for), whatever core
the launcher bound it to.
"""

from __future__ import annotations

import os

from ..workers import spread

PIECE = 4 << 20  # bytes a request: large enough that a call's cost vanishes, small enough to
# spread one 64 MiB staging buffer over all of a rank's threads (workers.MAX_THREADS)


def pread_into(fd: int, view: memoryview, offset: int) -> int:
    """Read len(view) bytes of fd from offset into view; returns the bytes read (fewer only at
    the end of the file). Raises OSError as os.preadv does."""
    return sum(spread(lambda lo, hi: _read_piece(fd, view[lo:hi], offset + lo), len(view), PIECE))


def pwrite_from(fd: int, view: memoryview, offset: int) -> None:
    """Write view's bytes to fd at offset. Raises OSError as os.pwritev does."""
    spread(lambda lo, hi: _write_piece(fd, view[lo:hi], offset + lo), len(view), PIECE)


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
