"""Memory budgets: sizes like "8GiB", the default device budget, and pinned host buffers.

A rank's *budget* is how many bytes of device memory one step of the sort may use (on the CPU
backend the "device" is the host). When a rank's work does not fit it, the out-of-core sort
(outofcore/) runs instead of the in-memory one.
"""

from __future__ import annotations

import contextlib
import mmap
import os
import re
import sys
import threading

import numpy as np

from . import settings
from .arrays import pooled_pinned
from .errors import DistsortError
from .workers import spread

_UNITS = {"": 1, "k": 2**10, "m": 2**20, "g": 2**30, "t": 2**40, "p": 2**50}
_SIZE = re.compile(r"^\s*([0-9]*\.?[0-9]+(?:e[0-9]+)?)\s*([kmgtp]?)(i?)(b?)\s*$", re.IGNORECASE)
GPU_FRACTION = 0.7  # of the free device memory (CuPy's pool's cached blocks count as free)
HOST_FRACTION = 0.5  # of the available host memory, shared by the ranks of a node
PINNED_RESERVE = 1 << 30  # host memory never page-locked: the system needs some to go on
PAGE = 4096  # bytes: first_touch writes one byte in each page
TOUCH_PIECE = 64 << 20  # bytes one thread faults in at a time
SMAPS = "/proc/self/smaps_rollup"  # this process's memory totals (huge_page_bytes)


def parse_size(text: int | str) -> int:
    """Bytes from an int or a string like 1000000, 1e9, 512K, 4M, 8GiB (powers of 1024) or
    8GB (powers of 1000). Raises ValueError if it is not a positive size."""
    if isinstance(text, (int, np.integer)) and not isinstance(text, bool):  # True: no size
        value = int(text)
    else:
        match = _SIZE.match(str(text))
        if not match:
            raise ValueError(f"not a size: {text!r} (try 512MiB, 8GiB or 1e9)")
        number, unit, binary, byte = match.groups()
        scale = _UNITS[unit.lower()]
        if unit and byte and not binary:  # "GB": decimal, as disks and vendors count
            scale = 1000 ** "kmgtp".index(unit.lower()) * 1000
        value = int(float(number) * scale)
    if value <= 0:
        raise ValueError(f"a memory size must be positive: {text!r}")
    return value


def default_budget(backend: str, sharers: int = 1) -> int:
    """A safe fraction of the memory this rank may take: on GPUs the free memory (its own
    pool's free blocks included), and no more than its share of the device where `sharers`
    ranks share it (each measures at its own moment, while the others allocate); on CPUs the
    host's available memory, split between the node's `sharers` ranks."""
    if backend == "gpu":
        import cupy

        pool = cupy.get_default_memory_pool()
        free, total = cupy.cuda.runtime.memGetInfo()
        free = min(free + pool.free_bytes(), total // max(sharers, 1))
        if pool.get_limit():  # set_limit or CUPY_GPU_MEMORY_LIMIT: above it CuPy runs out
            free = min(free, pool.get_limit() - pool.used_bytes())
        return int(GPU_FRACTION * free)
    return int(HOST_FRACTION * available_host_memory() / max(sharers, 1))


def available_host_memory() -> int:
    """What this process may still allocate: MemAvailable from /proc/meminfo (else the free
    physical pages), and no more than the room under its cgroup's memory limit (in a container
    /proc/meminfo shows the whole host's memory, and the kernel kills a process that goes over
    the cgroup's limit)."""
    return min(_meminfo("MemAvailable"), cgroup_room())


def _meminfo(field: str) -> int:
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")


def cgroup_room() -> int:
    """Bytes left under this process's cgroup memory limit (v2, else v1), its reclaimable file
    cache counted as room; sys.maxsize where there is no limit."""
    for folder, limit, usage in (("/sys/fs/cgroup", "memory.max", "memory.current"),
                                 ("/sys/fs/cgroup/memory", "memory.limit_in_bytes",
                                  "memory.usage_in_bytes")):
        try:
            with open(os.path.join(folder, limit)) as f:
                cap = f.read().strip()
            with open(os.path.join(folder, usage)) as f:
                used = int(f.read())
        except (OSError, ValueError):
            continue
        if cap.isdigit() and int(cap) < 2**60:
            return int(cap) - used + _cgroup_stat(folder, ("inactive_file", "total_inactive_file"))
    return sys.maxsize


def _cgroup_stat(folder: str, names: tuple) -> int:
    try:
        with open(os.path.join(folder, "memory.stat")) as f:
            fields = dict(line.split() for line in f if line.count(" ") == 1)
    except OSError:
        return 0
    return next((int(fields[n]) for n in names if n in fields), 0)


def host_empty(shape: tuple, dtype, pinned: bool) -> np.ndarray:
    """An uninitialised host array; page-locked (fast, asynchronous copies) when pinned.

    Page-locked memory can be neither swapped nor reclaimed: a request larger than what the
    host (and the cgroup) has left is refused with a DistsortError before anything is locked,
    and a failed CUDA allocation is one too, rather than the kernel killing a process. How it is
    made (DISTSORT_PINNED, timed by bench/history/pinned.py): "register" (default) an anonymous
    mapping (huge pages asked for), first touched by threads, then cudaHostRegister: exactly
    the bytes asked for, and faster; "alloc" cudaHostAlloc through CuPy's pinned pool, which is
    slower and rounds a request up (a 5 GB one to 8 GiB), so several ranks pinning large data
    sets can outgrow the host's memory.
    """
    dtype = np.dtype(dtype)
    if not pinned:
        return np.empty(shape, dtype)
    count = int(np.prod(shape))
    nbytes = max(count * dtype.itemsize, 1)
    _check_room(nbytes)
    with _pinning(nbytes):
        if not _registering():
            return pooled_pinned(shape, dtype)
        raw = np.asarray(Registered(nbytes).pin_all())
    return raw[: count * dtype.itemsize].view(dtype).reshape(shape)  # no rows: 1 byte made


def _registering() -> bool:
    return settings.value("DISTSORT_PINNED") == "register"


def _check_room(nbytes: int) -> None:
    room = available_host_memory() - PINNED_RESERVE
    if nbytes > room:
        raise DistsortError(f"cannot page-lock {nbytes / 1e9:.2f} GB of host memory: "
                            f"{max(room, 0) / 1e9:.2f} GB are left (MemAvailable and the cgroup "
                            "limit, less 1 GiB for the system)")


@contextlib.contextmanager
def _pinning(nbytes: int):
    """A failed page-locking as one DistsortError."""
    import cupy

    try:
        yield
    except (cupy.cuda.runtime.CUDARuntimeError, MemoryError, OSError) as exc:
        raise DistsortError(f"page-locking {nbytes / 1e9:.2f} GB of host memory failed "
                            f"({exc}); see ulimit -l and the container's memory limit") from None


class HostColumns:
    """Host columns of `rows` rows shaped like the templates', page-locked on GPUs part by part
    (parts: [lo, hi) row ranges, in order) by a background thread: part i may take copies
    once ready(i) returns, while later parts are still being made. Faulting in and locking
    a data set's worth of memory costs more than reading it from the page cache: made part by
    part, it hides behind the work on the first
    parts. A part's bytes must start on a page (no two registrations share one); where they
    would not, the columns are locked whole at once."""

    def __init__(self, templates: list, rows: int, parts: list[tuple[int, int]], pinned: bool,
                 given: list | None = None):
        """given: columns to use as they are (nothing is made; every part is ready)."""
        shapes = [((rows,) + t.shape[1:], t.dtype) for t in templates]
        widths = [t.dtype.itemsize * int(np.prod(t.shape[1:])) for t in templates]
        aligned = all(lo * w % PAGE == 0 for lo, _ in parts for w in widths)
        self._thread = None
        if given is not None:
            self.columns = given
            return
        if not (pinned and aligned and _registering() and len(parts) > 1):
            self.columns = [host_empty(shape, dtype, pinned) for shape, dtype in shapes]
            return
        sizes = [max(rows * w, 1) for w in widths]
        _check_room(sum(sizes))
        with _pinning(sum(sizes)):
            self._memory = [Registered(n) for n in sizes]
        self.columns = [np.asarray(m)[: rows * w].view(dtype).reshape(shape)
                        for m, w, (shape, dtype) in zip(self._memory, widths, shapes)]
        self._bytes = [[(lo * w, hi * w) for lo, hi in parts] for w in widths]
        self._device = self._memory[0].runtime.getDevice()  # the thread's registrations are
        self._done, self._error, self._stop = 0, None, False  # for this device's context
        self._changed = threading.Condition()
        self._thread = threading.Thread(target=self._pin, name="distsort-pin", daemon=True)
        self._thread.start()

    def _pin(self) -> None:
        try:
            self._memory[0].runtime.setDevice(self._device)
            for i in range(len(self._bytes[0])):
                for memory, ranges in zip(self._memory, self._bytes):
                    if self._stop:
                        return
                    memory.pin(*ranges[i])
                with self._changed:
                    self._done = i + 1
                    self._changed.notify_all()
        except BaseException as exc:  # raised again by ready()
            with self._changed:
                self._error = exc
                self._changed.notify_all()

    def ready(self, i: int) -> None:
        """Wait until part i is page-locked; raise a DistsortError if locking failed."""
        if self._thread is None:
            return
        with self._changed:
            self._changed.wait_for(lambda: self._done > i or self._error is not None)
        if self._done <= i:
            with _pinning(sum(len(c) * c.itemsize for c in self.columns)):
                raise self._error

    def close(self) -> None:
        """Stop locking more parts (the work on them was given up)."""
        if self._thread is not None:
            self._stop = True
            self._thread.join()


class Registered:
    """Page-locked host memory made by cudaHostRegister of an anonymous mapping (huge pages
    asked for, first touched by threads), in one piece or part by part; unregistered when the
    last array on it goes. np.asarray(this) is the bytes.

    The mapping is private: a shared anonymous one lives in shmem, which gets no transparent
    huge pages by default (shmem_enabled=never), so 4 KiB pages only: half a million faults a
    GB. Children get no copy of it (MADV_DONTFORK): a fork would otherwise have to copy every
    page-locked page of a private mapping for the child."""

    def __init__(self, nbytes: int):
        import cupy

        self.runtime = cupy.cuda.runtime
        self.registered: list[int] = []  # what __del__ undoes
        self.map = mmap.mmap(-1, nbytes, flags=mmap.MAP_PRIVATE)
        for advice in ("MADV_HUGEPAGE", "MADV_DONTFORK"):
            if hasattr(mmap, advice):
                self.map.madvise(getattr(mmap, advice))
        raw = np.frombuffer(self.map, np.uint8)
        self.ptr, self.nbytes = raw.ctypes.data, nbytes
        del raw  # no buffer export left: the mapping goes with this object
        self.__array_interface__ = {"data": (self.ptr, False), "shape": (nbytes,),
                                    "typestr": "|u1", "version": 3}

    def pin(self, lo: int, hi: int) -> None:
        """Fault in and page-lock bytes [lo, hi) (lo on a page)."""
        if hi > lo:
            first_touch(np.asarray(self)[lo:hi])
            self.runtime.hostRegister(self.ptr + lo, hi - lo, 0)
            self.registered.append(self.ptr + lo)

    def pin_all(self) -> Registered:
        self.pin(0, self.nbytes)
        return self

    def __del__(self):
        for ptr in getattr(self, "registered", ()):
            self.runtime.hostUnregister(ptr)


def huge_page_bytes() -> int:
    """Bytes of this process's anonymous memory in transparent huge pages (0 where unknown)."""
    try:
        with open(SMAPS) as f:
            return next((int(line.split()[1]) * 1024 for line in f
                         if line.startswith("AnonHugePages:")), 0)
    except OSError:
        return 0


def first_touch(raw: np.ndarray) -> None:
    """Fault in every page of a fresh uint8 array, by the worker pool's threads at once: the
    kernel's zeroing of new pages is most of the cost of a large allocation, and the pool's
    threads are not held to the one core a launcher may bind the rank to (several times faster
    with many cores)."""
    spread(lambda lo, hi: raw[lo:hi:PAGE].fill(0), len(raw), TOUCH_PIECE)


def size_argument(text: str) -> int:
    """argparse type for sizes: parse_size with argparse's error."""
    import argparse

    try:
        return parse_size(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
