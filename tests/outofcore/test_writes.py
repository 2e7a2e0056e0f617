"""The out-of-core output written behind the merge rounds (outofcore/writes.py), on CPUs; the
GPU path (rounds downloaded into page-locked buffers) runs in test_external_gpu.py's file jobs."""

from __future__ import annotations

import threading

import numpy as np
import pytest
from mpi4py import MPI

from distsort.backend import CopyLane
from distsort.outofcore import writes
from distsort.outofcore.writes import WritesBehind
from distsort.runtime import get_runtime


def test_rounds_are_written_in_order_with_their_rows():
    got = []
    behind = WritesBehind(get_runtime(MPI.COMM_SELF, "cpu"),
                          lambda row, columns: got.append((row, [c.copy() for c in columns])))
    rounds = [(row, [np.arange(row, row + 7), np.full(7, row)]) for row in range(0, 70, 7)]
    for row, columns in rounds:
        behind.put(row, columns)
    behind.finish()
    assert [row for row, _ in got] == [row for row, _ in rounds]
    for (_, wrote), (_, put) in zip(got, rounds):
        for a, b in zip(wrote, put):
            np.testing.assert_array_equal(a, b)


def test_a_failing_write_is_raised_to_the_caller():
    wrote = []

    def write(row, columns):
        if row == 1:
            raise RuntimeError("round 1 failed")
        wrote.append(row)

    behind = WritesBehind(get_runtime(MPI.COMM_SELF, "cpu"), write)
    with pytest.raises(RuntimeError, match="round 1 failed"):
        for row in range(4):
            behind.put(row, [np.zeros(3)])
        behind.finish()
    behind.stop()
    assert wrote[0] == 0 and 1 not in wrote


def test_stop_waits_for_the_write_under_way():
    """The files are aborted after stop(): no write may still be copying into them."""
    started, release, finished = threading.Event(), threading.Event(), []

    def write(row, columns):
        started.set()
        release.wait()
        finished.append(row)

    behind = WritesBehind(get_runtime(MPI.COMM_SELF, "cpu"), write)
    behind.put(5, [np.zeros(3)])
    started.wait()
    stopper = threading.Thread(target=behind.stop)
    stopper.start()
    stopper.join(0.05)
    assert stopper.is_alive() and finished == []  # still waiting for the write
    release.set()
    stopper.join()
    assert finished == [5]



def test_rounds_come_down_into_two_buffers_made_once_unless_a_round_outgrows_them(monkeypatch):
    """The GPU's way (a copy lane into page-locked buffers), with the CPU's lane and plain
    buffers: rounds alternate between two slots, a slot's buffers are reused while a round
    fits them, remade for one that does not, and what is written is each round's rows."""
    made, got = [], []

    def host_empty(shape, dtype, pinned):
        made.append(shape)
        return np.empty(shape, dtype)

    monkeypatch.setattr(writes, "host_empty", host_empty)
    behind = WritesBehind(get_runtime(MPI.COMM_SELF, "cpu"),
                          lambda row, columns: got.append((row, [c.copy() for c in columns])))
    behind.lane = CopyLane()
    sizes = [100, 100, 90, 100, 200, 10, 0, 5]
    rounds, row = [], 0
    for n in sizes:
        rounds.append((row, [np.arange(row, row + n, dtype=np.uint32),
                             np.full((n, 3), row % 256, np.uint8)]))
        behind.put(*rounds[-1])
        row += n
    behind.finish()
    assert len(made) == 2 * 3  # two slots' two columns, then one slot's again for 200 rows
    assert [r for r, _ in got] == [r for (r, c) in rounds if len(c[0])]
    for (_, wrote), (_, put) in zip(got, [r for r in rounds if len(r[1][0])]):
        for a, b in zip(wrote, put):
            np.testing.assert_array_equal(a, b)
