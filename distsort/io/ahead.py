"""An output mapping's pages faulted in ahead of the writes into it.

The first write into each page of a new file's shared mapping faults: a page-cache page is
made, zeroed and handed to the file system. Those faults, not the copy, are most of a mapped
write (8 GiB copied at 10 GB/s into new pages, at 30 GB/s into pages faulted in before:
bench/RESULTS.md, run 308). So the rank's share of the mapping is faulted in by threads of
its own from the moment the file is made, while the job reads and sorts, front to back as
the writes will come (madvise MADV_POPULATE_WRITE, Linux 5.14 on, which leaves the bytes as
they are), until the first write: faults taken ahead beside the writes' own faults in one file
contend and make the writes slower (run 308). A hint only: where the kernel refuses, it stops.
The pages it faults in are dirty (of zeros, until the writes come): no more of them than the
kernel lets build up before it starts writing dirty pages back (room()), or it would write the
zeros to disk and then the data.
"""

from __future__ import annotations

import ctypes
import itertools
import mmap
import threading

import numpy as np

from ..memory import available_host_memory
from ..workers import unbind
from . import libc

MADV_POPULATE_WRITE = 23  # linux/mman.h
PIECE = 64 << 20  # bytes a call: stop() waits for at most one


class PagesAhead:
    """Fault in the pages of `view` (bytes of a shared mapping, from any byte of it) on
    `threads` threads, front to back; stop() before the mapping is closed."""

    def __init__(self, view: np.ndarray, threads: int):
        address = view.ctypes.data  # madvise takes whole pages: from the page it starts in
        self._view = view  # held while the threads run: the mapping cannot go before them
        self._base = address - address % mmap.PAGESIZE  # (the mapping starts on a page)
        self._size = len(view) + address - self._base
        self._pieces = itertools.count()  # next() is atomic under the GIL
        self._stopped = False
        madvise = _madvise()
        self._threads: list[threading.Thread] = []
        for _ in range(threads if madvise is not None and len(view) else 0):
            self._threads.append(threading.Thread(target=self._run, args=(madvise,),
                                                  daemon=True, name="distsort-pages"))
            try:
                self._threads[-1].start()
            except RuntimeError:  # no more threads: those started do the work
                self._threads.pop()
                break

    def _run(self, madvise) -> None:
        unbind()  # the faults are the kernel's work: on the rank's one core they held it up
        for k in self._pieces:
            lo = k * PIECE
            if self._stopped or lo >= self._size:
                return
            if madvise(self._base + lo, min(PIECE, self._size - lo), MADV_POPULATE_WRITE):
                self._stopped = True  # refused (a kernel before 5.14): the writes fault
                return

    def stop(self) -> None:
        """Stop, once the calls under way return (each faults in at most PIECE bytes)."""
        self._stopped = True
        for thread in self._threads:
            thread.join()


def room(sharers: int) -> int:
    """Bytes one of `sharers` ranks of a node may fault in ahead: its share of the dirty page
    cache the kernel lets build up before it writes back (vm.dirty_background_bytes, else
    dirty_background_ratio percent of the available memory); 0 where that is not known."""
    try:
        with open("/proc/sys/vm/dirty_background_bytes") as f:
            limit = int(f.read())
        if not limit:
            with open("/proc/sys/vm/dirty_background_ratio") as f:
                limit = available_host_memory() * int(f.read()) // 100
    except (OSError, ValueError):
        return 0
    return limit // max(sharers, 1)


def _madvise():
    """The C library's madvise, or None where there is none."""
    return libc.function("madvise", (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int))
