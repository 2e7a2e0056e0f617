"""Positioned reads of one rank's range of a global input file (never the whole file)."""

from __future__ import annotations

import mmap
import os

import numpy as np

from ..errors import DistsortError
from . import libc
from .formats import FileFormat, check_size, npy_layout
from .parallel import pread_into

MADV_POPULATE_READ = 22  # linux/mman.h


def rank_range(count: int, rank: int, size: int) -> tuple[int, int]:
    """Balanced contiguous split of range(count): the first count % size ranks get one more."""
    base, extra = divmod(int(count), int(size))
    start = rank * base + min(rank, extra)
    return start, start + base + (1 if rank < extra else 0)


class InputFile:
    """A global input file: `.count` elements of format `.fmt`, read by ranges."""

    def __init__(self, path, fmt: FileFormat, count: int, offset: int = 0):
        self.path = path
        self.fmt = fmt
        self.count = int(count)
        self.offset = int(offset)

    def read(self, start: int, stop: int) -> np.ndarray:
        """Elements [start, stop): 1-D in native byte order, or (n, record_size) uint8 records."""
        if not 0 <= start <= stop <= self.count:
            raise ValueError(f"range [{start}, {stop}) outside [0, {self.count}) of {self.path}")
        return self.read_into(start, np.empty((stop - start) * self.fmt.itemsize, np.uint8))

    def read_into(self, start: int, buf: np.ndarray):
        """Elements from `start` into the uint8 array `buf` (as many as it holds bytes for),
        brought to native byte order there; returns them viewed as read() gives them."""
        n = len(buf) // self.fmt.itemsize
        if not 0 <= start <= start + n <= self.count:
            raise ValueError(f"range [{start}, {start + n}) outside [0, {self.count}) of "
                             f"{self.path}")
        if n:
            self._read_into(buf, self.offset + start * self.fmt.itemsize)
        if self.fmt.kind == "records":
            return buf.reshape(n, self.fmt.record_size)
        data = buf.view(self.fmt.dtype)
        if not data.dtype.isnative:
            data = data.view(self.fmt.native_dtype)
            data[...] = buf.view(self.fmt.dtype)  # NumPy copies first: they overlap
        return data

    def mapped(self, start: int, stop: int) -> np.ndarray | None:
        """The bytes of elements [start, stop), read-only, in the file's own pages (a shared
        mapping): no copy and no new memory, for a reader that only reads them. None where
        they need a swap to native order, where some are not in memory (the reads' threads
        bring them faster than a mapping's faults, page by page), or the file is shorter than
        its format says (a read says so). Cutting the file short while they are used ends the
        process (SIGBUS), where a read would have raised."""
        fmt, n = self.fmt, stop - start
        swapped = fmt.kind != "records" and not fmt.dtype.isnative
        if swapped or not 0 <= start < stop <= self.count:
            return None
        first = self.offset + start * fmt.itemsize
        lo = first - first % mmap.PAGESIZE
        try:
            fd = os.open(self.path, os.O_RDONLY)
            try:
                pages = libc.resident_mapping(fd, self.path, lo, first + n * fmt.itemsize)
            finally:
                os.close(fd)
        except (OSError, ValueError):
            return None
        if pages is None:
            return None
        whole = np.frombuffer(pages, np.uint8)  # holds the mapping while any view of it lives
        _populate(whole)
        return whole[first - lo :]

    def _read_into(self, buf: np.ndarray, offset: int) -> None:
        try:
            fd = os.open(self.path, os.O_RDONLY)
            try:
                got = pread_into(fd, memoryview(buf), offset)
            finally:
                os.close(fd)
        except OSError as exc:
            raise DistsortError(f"cannot read input file {self.path}: {exc.strerror}") from None
        if got < len(buf):
            raise DistsortError(
                f"{self.path} ended early (at byte {offset + got}): was it truncated or changed "
                "while distsort was reading it?")


def open_input(path, fmt: FileFormat) -> InputFile:
    """Open a global input file of a known format (see detect_format), checking its size."""
    if fmt.kind == "npy":
        layout = npy_layout(path, fmt.payload)
        if layout.dtype != fmt.dtype:
            raise DistsortError(f"{path} holds {layout.dtype}, not {fmt.dtype} as expected")
        return InputFile(path, fmt, layout.count, layout.offset)
    return InputFile(path, fmt, check_size(path, fmt))


def _populate(pages: np.ndarray) -> None:
    """Map a mapping's pages, all in memory, in one call rather than a fault each (madvise
    MADV_POPULATE_READ, Linux 5.14 on; a hint: where refused, the reads fault them in)."""
    madvise = libc.madvise()
    if madvise is not None:
        madvise(pages.ctypes.data, len(pages), MADV_POPULATE_READ)
