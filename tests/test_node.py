"""node.py: where this rank sits among the ranks of its node."""

from __future__ import annotations

import socket

import pytest

from distsort.node import node_place, one_node

MPI = pytest.importorskip("mpi4py.MPI")
COMM = MPI.COMM_WORLD
pytestmark = pytest.mark.mpi


def test_node_place_numbers_the_ranks_of_each_host():
    rank, size = node_place(COMM)
    rows = COMM.allgather((socket.gethostname(), rank, size))
    for host in {h for h, _, _ in rows}:
        mine = [(r, s) for h, r, s in rows if h == host]
        assert sorted(r for r, _ in mine) == list(range(len(mine)))
        assert {s for _, s in mine} == {len(mine)}
    assert one_node(COMM) == (len({h for h, _, _ in rows}) == 1)
    assert node_place(MPI.COMM_SELF) == (0, 1) and one_node(MPI.COMM_SELF)
