"""A rank's range of a file straight into device memory, and device arrays straight out to a
file, through a few pinned host buffers.

Pages in the page cache are copied up by the device straight from there (direct.py); others
are read by threads into one buffer (parallel.py) while the buffer before it is copied up to
the device. One buffer is copied down while the one before it is written out: the copies
(fast over PCIe from pinned memory) hide behind the file's reads and writes, and no pageable
copy or allocation of the whole range is made on the host. STAGES buffers of STAGE_BYTES are
made once a process (page-locking is costly).
"""

from __future__ import annotations

import atexit
from collections.abc import Callable

import numpy as np

from ..memory import host_empty
from .direct import copy_cached

STAGE_BYTES = 64 << 20
STAGES = 3
_ring: list = []
atexit.register(_ring.clear)  # unregistered while CUDA is still there


def load(source, start: int, stop: int, xp, progress: Callable[[int], None] = lambda n: None,
         into: np.ndarray | None = None, mapped: bool = False):
    """Elements [start, stop) of an InputFile as an array of xp (NumPy or CuPy), in native byte
    order and in the form every backend moves (payload.stored: values of dtypes CuPy lacks as
    their bytes; records as (n, record_size) uint8 rows). progress(bytes) after each piece.
    into: a uint8 array of xp's to hold them (its first bytes), e.g. one reused piece by piece.
    mapped (NumPy): a read-only array in the file's own pages where it can be
    (InputFile.mapped), for a caller that only reads it; else as without it."""
    itemsize, per = source.fmt.itemsize, STAGE_BYTES // source.fmt.itemsize
    nbytes = (stop - start) * itemsize
    shared = source.mapped(start, stop) if mapped and xp is np else None
    out = shared if shared is not None else (
        xp.empty(nbytes, np.uint8) if into is None else into[:nbytes])
    if shared is not None:
        progress(nbytes)
    elif xp is np:  # straight into the result
        for lo in range(start, stop, per):
            hi = min(lo + per, stop)
            source.read_into(lo, out[(lo - start) * itemsize : (hi - start) * itemsize])
            progress((hi - lo) * itemsize)
    else:
        ring = _buffers(xp)
        ring.lane.follow()  # out's memory may be the pool's, freed by work queued before
        left = copy_cached(source, start, stop, out, ring.lane.stream)
        if left is not None:
            progress(nbytes - sum(hi - lo for lo, hi in left) * itemsize)
        for a, b in left or [(start, stop)]:  # through the ring
            for i, lo in enumerate(range(a, b, per)):
                at, n = (lo - start) * itemsize, (min(lo + per, b) - lo) * itemsize
                buf = ring.take(i)[:n]
                source.read_into(lo, buf)
                ring.lane.upload(buf, out=out[at : at + n])
                ring.sent(i)
                progress(n)
        ring.lane.join()
    like = source.fmt.empty_rows()
    return out.view(like.dtype).reshape((stop - start,) + like.shape[1:])


def store(array, write: Callable[[np.ndarray, int], None]) -> None:
    """Pass a device array's bytes to write(host bytes, byte offset in the array) in order,
    piece by piece: piece i+1 comes down while piece i is written."""
    import cupy

    raw = cupy.ascontiguousarray(array).view(np.uint8).reshape(-1)
    ring = _buffers(cupy)
    cuts = range(0, len(raw), STAGE_BYTES)
    ring.lane.follow()  # the array's last writes are queued on the current stream

    def piece(i: int) -> slice:
        return slice(cuts[i], min(cuts[i] + STAGE_BYTES, len(raw)))

    def fetch(i: int) -> None:
        part = raw[piece(i)]
        ring.lane.download(part, ring.take(i)[: len(part)])
        ring.sent(i)

    if cuts:
        fetch(0)
    for i in range(len(cuts)):
        if i + 1 < len(cuts):
            fetch(i + 1)
        part = piece(i)
        write(ring.take(i)[: part.stop - part.start], part.start)  # take: its copy is done
    ring.lane.wait()


class _Ring:
    """The pinned buffers, one copy lane, and for each buffer the event after which it is free."""

    def __init__(self, cp):
        from ..backend import GpuCopyLane

        self.lane = GpuCopyLane(cp)
        self.buffers = [host_empty((STAGE_BYTES,), np.uint8, pinned=True) for _ in range(STAGES)]
        self.done: list = [None] * STAGES

    def take(self, i: int) -> np.ndarray:
        """Buffer i % STAGES, once the copy last made from or into it is done."""
        k = i % STAGES
        if self.done[k] is not None:
            self.done[k].synchronize()
            self.done[k] = None
        return self.buffers[k]

    def sent(self, i: int) -> None:
        self.done[i % STAGES] = self.lane.mark()


def _buffers(cp) -> _Ring:
    if not _ring or len(_ring[0].buffers[0]) != STAGE_BYTES:
        _ring[:] = [_Ring(cp)]
    return _ring[0]

