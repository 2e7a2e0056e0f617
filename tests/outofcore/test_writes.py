"""The out-of-core output written behind the merge rounds (outofcore/writes.py), on CPUs; the
GPU path (rounds downloaded into page-locked buffers) runs in test_external_gpu.py's file jobs."""

from __future__ import annotations

import threading

import numpy as np
import pytest
from mpi4py import MPI

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

