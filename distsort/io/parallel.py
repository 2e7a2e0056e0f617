"""Positioned reads and writes of large byte ranges, spread over a pool of threads.

Reads from the page cache scale with threads (one H100 host: 3.7 GB/s with 1 thread, 23 with
8, 36 with 16; writes stayed near 3 GB/s from 1 to 16 threads: bench/RESULTS.md, run 192), so
a rank's range is cut into PIECE-byte requests that the pool's threads serve at once. The ranks
of a node share its cores: each takes its share of them (threads_for), whatever core the
launcher bound it to.
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor

PIECE = 8 << 20  # bytes a request: large enough that a call's cost vanishes, small enough to
# spread one 64 MiB staging buffer over 8 threads
MAX_THREADS = 16
_pool: dict[str, ThreadPoolExecutor | int] = {"threads": 8}


def threads_for(ranks_on_node: int) -> int:
    """Threads for one rank's I/O: its share of the node's cores, 1 to MAX_THREADS."""
    return max(1, min(MAX_THREADS, (os.cpu_count() or 1) // max(ranks_on_node, 1)))


def _unbound() -> None:
    """Let an I/O thread run on any of the node's cores: launchers bind a rank to one core
    (Open MPI does at 1 or 2 ranks), where its threads would take turns."""
    try:
        os.sched_setaffinity(0, range(os.cpu_count() or 1))  # this thread only; the cpuset
    except (AttributeError, OSError):  # still applies
        pass


def use_threads(threads: int) -> None:
    """Serve this process's reads and writes with `threads` threads from now on."""
    if threads != _pool["threads"]:
        old = _pool.pop("executor", None)
        if old is not None:
            old.shutdown()
        _pool["threads"] = threads


def _executor() -> ThreadPoolExecutor:
    if "executor" not in _pool:
        _pool["executor"] = ThreadPoolExecutor(_pool["threads"], thread_name_prefix="distsort-io",
                                               initializer=_unbound)
    return _pool["executor"]


def pread_into(fd: int, view: memoryview, offset: int) -> int:
    """Read len(view) bytes of fd from offset into view; returns the bytes read (fewer only at
    the end of the file). Raises OSError as os.preadv does."""
    return sum(_spread(lambda lo, hi: _read_piece(fd, view[lo:hi], offset + lo), len(view)))


def pwrite_from(fd: int, view: memoryview, offset: int) -> None:
    """Write view's bytes to fd at offset. Raises OSError as os.pwritev does."""
    _spread(lambda lo, hi: _write_piece(fd, view[lo:hi], offset + lo), len(view))


def _spread(work, nbytes: int) -> list:
    cuts = range(0, nbytes, PIECE)
    if len(cuts) <= 1 or _pool["threads"] == 1:
        return [work(lo, min(lo + PIECE, nbytes)) for lo in cuts]
    return list(_executor().map(lambda lo: work(lo, min(lo + PIECE, nbytes)), cuts))


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
