"""The order of rows received in blocks with gaps between them (steps/finish.received_order)."""

from __future__ import annotations

import numpy as np
import pytest
from mpi4py import MPI

from distsort.runtime import get_runtime
from distsort.steps.finish import received_order
from distsort.steps.splitters import outside_key


def _received(seed: int, low: int, top: int):
    """Two key words (uint64 in [low, top] with many ties, uint16) in three blocks with gaps
    of garbage between and after them, and the blocks (rows, start)."""
    rng = np.random.default_rng(seed)
    counts, starts = np.array([5, 0, 7]), np.array([0, 8, 8])
    size = 20  # rows 5-7 and 15-19 are gaps
    first = rng.integers(0, 2**64, size, dtype=np.uint64)  # garbage in the gaps
    second = rng.integers(0, 2**16, size, dtype=np.uint64).astype(np.uint16)
    for start, count in zip(starts, counts):
        keys = np.array([low, top, (low + top) // 2], dtype=np.uint64)  # not as float64
        first[start : start + count] = rng.choice(keys, count)
        second[start : start + count] = rng.integers(0, 3, count)
    return [first, second], (counts, starts)


@pytest.mark.parametrize("low,top", [(0, 2**40), (2**40, 2**64 - 1), (0, 2**64 - 1)])
def test_received_rows_are_ordered_stably_and_the_gaps_left_out(low, top):
    """Rows of the blocks only, by (first, second) word, ties in buffer order; whether the
    gaps take a key outside the range (sorting after it, or before it on the last rank) or,
    where the range has every key, are skipped by row numbers."""
    rt = get_runtime(MPI.COMM_SELF, "cpu")
    words, blocks = _received(low % 7 + top % 5, low, top)
    rows = np.concatenate([np.arange(a, a + k) for k, a in zip(*blocks)])
    want = rows[np.lexsort([words[1][rows], words[0][rows]])]
    outside = outside_key(np.dtype(np.uint64), low, top)
    assert (outside is None) == (low == 0 and top == 2**64 - 1)
    got = received_order(rt, [w.copy() for w in words], blocks, outside)
    np.testing.assert_array_equal(np.asarray(got), want)
