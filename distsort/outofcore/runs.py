"""Stage 1: each rank's input cut into runs that fit the budget, each sorted on the device and
kept in host memory with a regular sample of it.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ..backend import CopyLane
from ..progress import Bar
from ..runtime import Runtime
from ..steps.finish import local_sort
from ..steps.sample import device_rows
from .layout import Layout, Source


def form_runs(rt: Runtime, source: Source, layout: Layout, store: list,
              ready: Callable[[int], None]) -> np.ndarray:
    """Sort each budget-sized piece of this rank's input into a run kept in the host store
    (run i at its input rows, once ready(i) says they may take it); return the regular sample
    rows (key words..., run, index).

    On GPUs three things overlap: piece i+1 comes in (Loader), piece i is sorted, run i-1
    goes out to the store (a second lane: PCIe carries both directions at once).
    """
    samples = []
    runs = layout.runs()
    pieces, out = Loader(rt, source.read, runs), rt.backend.copy_lane()
    bar = Bar(rt.comm, "runs sorted", len(runs), unit="run")
    for i, (lo, hi) in enumerate(runs):
        columns = local_sort(rt, source.encode(pieces.take(i)), source.key_words)
        pieces.start(i + 1)  # read while the device sorts
        words = source.key_words(columns)
        samples.append(regular_sample(rt, words, layout.stride, layout.first_run + i))
        out.wait()  # run i-1 is in the store: at most one run in flight
        out.follow()
        ready(i)
        for column, host in zip(columns, store):
            out.download(column, host[lo:hi])
        bar.add(1)
    out.wait()
    bar.close()
    return rt.backend.to_host(rt.xp.concatenate(samples)) if samples else None


class Loader:
    """The device columns of pieces [lo, hi) of the input, in order. On GPUs piece i+1 is read
    and copied in (on a lane where read gives host arrays; pinned ones copy directly) while
    piece i is sorted: start(i + 1) once piece i's sort is queued."""

    def __init__(self, rt: Runtime, read, ranges: list):
        self.rt, self.read, self.ranges = rt, read, ranges
        self.lane = rt.backend.copy_lane()
        self.next = None
        self.start(0)

    def take(self, i: int) -> list:
        """Piece i (started before), for the device's next work, which waits for it."""
        columns, self.next = self.next, None
        self.lane.join()
        return columns

    def start(self, i: int) -> None:
        if i < len(self.ranges):
            lo, hi = self.ranges[i]
            self.lane.follow()  # its buffers may be memory that the queued work frees
            self.next = [to_device(self.rt, a, self.lane) for a in self.read(lo, hi)]


def to_device(rt: Runtime, host, lane: CopyLane):
    """A host array on the backend's device; on GPUs one direct copy on the lane, not CuPy's
    staging through its own pinned buffer (an extra host copy). The caller joins the lane."""
    if rt.backend.name != "gpu" or not isinstance(host, np.ndarray) or not host.dtype.isnative:
        return rt.backend.from_host(host)
    return lane.upload(host)


def regular_sample(rt: Runtime, words: list, stride: int, run: int):
    """Rows (key words..., run, index) of every stride-th element of a sorted run, left on the
    backend's device: form_runs reads them back once, after the last run. A small read from
    the device mid-loop waits for the run copies in flight (it held each run back by a whole
    download)."""
    index = rt.xp.arange(0, len(words[0]), stride, dtype=np.int64)
    rows = device_rows(words, index, rt.xp, extra=2)
    rows[:, -2], rows[:, -1] = run, index
    return rows
