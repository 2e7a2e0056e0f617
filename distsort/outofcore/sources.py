"""What the out-of-core sort reads (sources of numbers, positions and records) and where a
shard goes in host memory (ShardOutput).
"""

from __future__ import annotations

import numpy as np

from ..errors import DistsortError
from ..keys import NumericCodec, record_key_words
from ..memory import host_empty
from ..runtime import Runtime
from .layout import Source


def unchanged(x):
    return x


def numeric_source(rt: Runtime, count: int, read, dtype, descending: bool,
                   stable: bool) -> Source:
    """Numeric keys (and any payload columns after them) read by read(lo, hi)."""
    codec = NumericCodec(np.dtype(dtype), descending, canonical=stable)
    carried = 1 + int(codec.lossy)  # the codes, and the original keys where codes lose bits

    def encode(cols):
        return [codec.encode(cols[0], rt.xp)] + (cols if codec.lossy else cols[1:])

    def decode(cols):
        return [cols[1] if codec.lossy else codec.decode(cols[0], rt.xp)] + cols[carried:]

    return Source(count, read, encode, first_word, decode)


def positions_source(rt: Runtime, count: int, read, offset: int, dtype,
                     descending: bool) -> Source:
    """argsort: keys from read(lo, hi)[0]; the output is their global int64 positions."""
    codec = NumericCodec(np.dtype(dtype), descending, canonical=True)

    def with_positions(lo: int, hi: int) -> list:
        return [read(lo, hi)[0], rt.xp.arange(offset + lo, offset + hi, dtype=np.int64)]

    def encode(cols):
        return [codec.encode(cols[0], rt.xp), cols[1]]

    return Source(count, with_positions, encode, first_word, lambda cols: cols[1:])


def records_source(rt: Runtime, count: int, read, key_size: int, descending: bool) -> Source:
    """(n, record_size) uint8 records ordered by their first key_size bytes (memcmp)."""
    def words(cols):
        xp = np if isinstance(cols[0], np.ndarray) else rt.xp
        return record_key_words(cols[0], key_size, xp, descending)

    return Source(count, read, unchanged, words, unchanged)


def check_out_rows(out: list, rows: int) -> None:
    """Raise if the caller's out arrays are too short for a shard of `rows` rows."""
    if any(len(o) < rows for o in out):
        raise DistsortError(f"out has {min(len(o) for o in out)} rows; this rank's shard "
                            f"needs {rows} (shard_capacity gives a size that always fits)")


class ShardOutput:
    """write() for external_sort without one: the shard's output columns in host memory
    (the caller's `out`, else new arrays, pinned on GPUs), each piece copied straight to its
    rows; on GPUs on a lane, while the next round runs (one piece in flight)."""

    def __init__(self, rt: Runtime, template: list, rows: int, first: int,
                 out: list | None = None):
        if out is None:
            pinned = rt.backend.name == "gpu"
            out = [host_empty((rows,) + c.shape[1:], c.dtype, pinned) for c in template]
        else:
            check_out_rows(out, rows)
        self.columns = [o[:rows] for o in out]
        self.first, self.lane = first, rt.backend.copy_lane()

    def __call__(self, row: int, columns: list) -> None:
        self.lane.wait()  # the last piece is out: its device buffers may go
        self.lane.follow()
        at = row - self.first
        for column, out in zip(columns, self.columns):
            self.lane.download(column, out[at : at + len(column)])

    def close(self) -> list:
        """The output columns, once every piece is in them."""
        self.lane.wait()
        return self.columns


def row_slices(columns: list):
    return lambda lo, hi: [c[lo:hi] for c in columns]


def first_word(cols: list) -> list:
    return [cols[0]]
