"""An output mapping's pages faulted in ahead of the writes into it, and let go behind them.

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
Unmapping the written pages costs too: 0.34 s for 8 GiB at the mapping's close, after the last
write (bench/RESULTS.md, run 341). So each write's whole pages are let go of by a thread of its
own (PagesBehind) while the next ones are written, and the close finds few left.
"""

from __future__ import annotations

import collections
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
        madvise = libc.madvise()
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


class PagesBehind:
    """Let go of the whole pages of written views of a shared mapping (madvise MADV_DONTNEED:
    of a shared file mapping it only unmaps them; the bytes stay in the page cache, dirty ones
    until written back, and a later touch maps them again) on a thread that runs while there
    are views to let go of. A view is held until its pages are let go of: the mapping cannot
    be unmapped under a queued call (a call on a range the process had mapped anew since would
    zero that memory). stop() before the mapping is closed; where the kernel refuses, the
    close unmaps them."""

    def __init__(self):
        self._views: collections.deque = collections.deque()
        self._changed = threading.Condition()
        self._running = self._stopped = False

    def written(self, view: np.ndarray) -> None:
        """Let go of view's whole pages soon (view: bytes of the mapping, written)."""
        with self._changed:
            if self._stopped or libc.madvise() is None:
                return
            self._views.append(view)
            if self._running:
                return
            try:
                threading.Thread(target=self._run, daemon=True, name="distsort-behind").start()
            except RuntimeError:  # no more threads: the close unmaps them all
                self._views.clear()
                return
            self._running = True

    def _run(self) -> None:
        unbind()  # the kernel's work, as the faults ahead
        while True:
            with self._changed:
                if not self._views:
                    self._running = False
                    self._changed.notify_all()
                    return
                view = self._views.popleft()
            libc.let_go(view.ctypes.data, view.ctypes.data + len(view))
            del view  # the mapping may go now

    def stop(self) -> None:
        """Return once the views given so far are let go of; take no more."""
        with self._changed:
            self._stopped = True
            self._changed.wait_for(lambda: not self._running)


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
