"""The out-of-core file output, written behind the merge rounds.

A round's sorted rows are written to the output while the next round is exchanged and sorted:
the file takes longer than the device (8 GiB: ~0.8 s written, ~0.1 s sorted), so a device that
waits for each round's write waits for the file twice over (the rounds' downloads and sorts
besides). On GPUs the round comes down on a copy lane into one of two page-locked buffers, the
device's memory is free for the next round at once (the budget holds), and one thread writes
each round once its copy is done; on CPUs the thread writes the round's own arrays.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np

from ..memory import host_empty
from ..runtime import Runtime

if TYPE_CHECKING:
    from concurrent.futures import Future

SLOTS = 2  # rounds in flight: one written while the next comes down
SPARE = 1.25  # a buffer made for a round holds this many times its rows: rounds vary a little


class WritesBehind:
    """write(row, host columns) for each round put(), in order, by a thread of its own.
    finish() waits for them (raises the first error); stop() waits quietly, before the output
    files are aborted (a write still running would copy into a closed file)."""

    def __init__(self, rt: Runtime, write: Callable[[int, list], None]):
        from concurrent.futures import ThreadPoolExecutor  # here: in-memory jobs need none

        self.rt, self.write = rt, write
        gpu = rt.backend.name == "gpu"
        self.lane = rt.backend.copy_lane() if gpu else None
        self.device = rt.xp.cuda.Device().id if gpu else None  # the thread waits on its events
        self.thread = ThreadPoolExecutor(1, thread_name_prefix="distsort-write")
        self.buffers: list[list[np.ndarray]] = [[] for _ in range(SLOTS)]
        self.pending: list[Future | None] = [None] * SLOTS
        self.turn = 0

    def put(self, row: int, columns: list) -> None:
        """Queue the round's columns (backend arrays: rows [row, row + len) of the output)."""
        if len(columns[0]) == 0:
            return
        k, self.turn = self.turn, (self.turn + 1) % SLOTS
        self._settle(k)  # slot k's last round is written: its buffers are free
        done = None
        if self.lane is not None:
            columns = self._download(k, columns)
            done = self.lane.mark()
        self.pending[k] = self.thread.submit(self._write, done, row, columns)

    def _download(self, k: int, columns: list) -> list:
        self.lane.follow()  # after the round's sort
        hosts = []
        for i, column in enumerate(columns):
            column = self.rt.xp.ascontiguousarray(column)
            if i == len(self.buffers[k]):
                self.buffers[k].append(None)
            buffer = self.buffers[k][i]
            if (buffer is None or len(buffer) < len(column) or buffer.dtype != column.dtype
                    or buffer.shape[1:] != column.shape[1:]):
                rows = int(len(column) * SPARE) + 1
                buffer = self.buffers[k][i] = host_empty((rows,) + column.shape[1:],
                                                         column.dtype, pinned=True)
            hosts.append(buffer[: len(column)])
            self.lane.download(column, hosts[-1])
        self.lane.join()  # the columns' memory goes back to the pool after the copies
        return hosts

    def _write(self, done, row: int, columns: list) -> None:
        if self.device is not None:
            self.rt.xp.cuda.runtime.setDevice(self.device)
        if done is not None:
            done.synchronize()
        self.write(row, columns)

    def _settle(self, k: int) -> None:
        future, self.pending[k] = self.pending[k], None
        if future is not None:
            future.result()

    def finish(self) -> None:
        """Wait until every round put is written; raise the first write's error."""
        try:
            for i in range(SLOTS):  # oldest first
                self._settle((self.turn + i) % SLOTS)
        finally:
            self.stop()

    def stop(self) -> None:
        """Wait for the writes under way, whatever they raise (safe to call more than once)."""
        self.thread.shutdown(wait=True)
