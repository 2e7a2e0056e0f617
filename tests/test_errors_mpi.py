"""errors.agree under MPI: whatever one rank's step raises, every rank raises, none waits."""

from __future__ import annotations

import pytest
from mpi4py import MPI

from distsort.errors import RemoteError, agree

COMM = MPI.COMM_WORLD
RANK, SIZE = COMM.Get_rank(), COMM.Get_size()

pytestmark = pytest.mark.mpi


def test_a_plain_exception_on_one_rank_is_raised_on_every_rank():
    """A wrong argument's TypeError (or a bug) on the last rank: it keeps its own exception and
    traceback, the others get RemoteError naming it, and the next collective still works."""
    if SIZE == 1:
        pytest.skip("needs another rank to be left waiting")

    def step():
        if RANK == SIZE - 1:
            raise TypeError("'<' not supported")
        return RANK

    expected = TypeError if RANK == SIZE - 1 else RemoteError
    with pytest.raises(expected) as raised:
        agree(COMM, step)
    if RANK != SIZE - 1:
        assert str(raised.value) == f"rank {SIZE - 1} failed: TypeError: '<' not supported"
    assert COMM.allreduce(1) == SIZE
