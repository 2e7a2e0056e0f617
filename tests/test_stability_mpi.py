"""The ranks of rows among their key's rows (distsort/stability.py) across ranks, against NumPy:
in an input in any order and in a sorted output whose runs of equal keys cross ranks."""

from __future__ import annotations

import numpy as np
import pytest

from distsort import stability

MPI = pytest.importorskip("mpi4py.MPI")
COMM = MPI.COMM_WORLD
pytestmark = pytest.mark.mpi


def share(rows: np.ndarray) -> np.ndarray:
    """This rank's even share of rows that every rank holds."""
    n, r, p = len(rows), COMM.Get_rank(), COMM.Get_size()
    return rows[n * r // p : n * (r + 1) // p]


@pytest.mark.parametrize("distinct", [1, 7, 10**6])
def test_rows_ranks_among_their_keys_rows_match_numpy(distinct):
    rng = np.random.default_rng([COMM.Get_rank(), distinct])
    n = [1000, 0, 777, 5][COMM.Get_rank() % 4]  # unequal pieces, one empty
    keys = rng.integers(0, distinct, n).astype(np.uint64)
    everyone = np.concatenate(COMM.allgather(keys))
    want = np.zeros(len(everyone), np.int64)
    for key in np.unique(everyone):
        rows = np.flatnonzero(everyone == key)
        want[rows] = np.arange(len(rows))
    got = np.concatenate(COMM.allgather(stability.input_ranks(COMM, keys)))
    np.testing.assert_array_equal(got, want)
    order = np.argsort(everyone, kind="stable")
    got = np.concatenate(COMM.allgather(stability.output_ranks(COMM, share(everyone[order]))))
    np.testing.assert_array_equal(got, want[order])


def test_sums_agree_for_a_stable_output_and_differ_for_a_swap():
    rng = np.random.default_rng(COMM.Get_rank())
    keys = rng.integers(0, 3, 500).astype(np.uint64)
    values = rng.integers(0, 10**6, 500)
    all_keys = np.concatenate(COMM.allgather(keys))
    all_values = np.concatenate(COMM.allgather(values))
    order = np.argsort(all_keys, kind="stable")
    out_keys, out_values = all_keys[order], all_values[order]
    before, after = stability.stable_sums(COMM, keys, values, share(out_keys), share(out_values))
    assert before == after
    out_values[[0, 1]] = out_values[[1, 0]]  # two values of the smallest key
    before, after = stability.stable_sums(COMM, keys, values, share(out_keys), share(out_values))
    assert before != after
