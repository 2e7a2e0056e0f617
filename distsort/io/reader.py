"""Positioned reads of one rank's range of a global input file (never the whole file)."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from ..errors import DistsortError
from .formats import FileFormat, check_size, npy_layout

_IO_CHUNK = 1 << 30  # bytes per read call: stays below the per-call limits of every OS


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
        n = stop - start
        buf = np.empty(n * self.fmt.itemsize, dtype=np.uint8)
        if n:
            self._read_into(buf, self.offset + start * self.fmt.itemsize)
        if self.fmt.kind == "records":
            return buf.reshape(n, self.fmt.record_size)
        data = buf.view(self.fmt.dtype)
        return data if data.dtype.isnative else data.astype(self.fmt.native_dtype)

    def read_shard(self, rank: int, size: int) -> np.ndarray:
        """This rank's balanced share of the file (see rank_range)."""
        return self.read(*rank_range(self.count, rank, size))

    def chunks(self, start: int, stop: int, chunk: int) -> Iterator[np.ndarray]:
        """Elements [start, stop) in pieces of at most `chunk` elements."""
        for lo in range(start, stop, max(int(chunk), 1)):
            yield self.read(lo, min(lo + chunk, stop))

    def _read_into(self, buf: np.ndarray, offset: int) -> None:
        view = memoryview(buf)
        done = 0
        try:
            with open(self.path, "rb", buffering=0) as f:
                while done < len(view):
                    f.seek(offset + done)
                    got = f.readinto(view[done : done + _IO_CHUNK])
                    if not got:
                        raise DistsortError(
                            f"{self.path} ended early (at byte {offset + done}): was it truncated "
                            "or changed while distsort was reading it?"
                        )
                    done += got
        except OSError as exc:
            raise DistsortError(f"cannot read input file {self.path}: {exc.strerror}") from None


def open_input(path, fmt: FileFormat) -> InputFile:
    """Open a global input file of a known format (see detect_format), checking its size."""
    if fmt.kind == "npy":
        layout = npy_layout(path, fmt.payload)
        if layout.dtype != fmt.dtype:
            raise DistsortError(f"{path} holds {layout.dtype}, not {fmt.dtype} as expected")
        return InputFile(path, fmt, layout.count, layout.offset)
    return InputFile(path, fmt, check_size(path, fmt))

