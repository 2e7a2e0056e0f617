"""node.py: where this rank sits among the ranks of its node, and where every rank runs."""

from __future__ import annotations

import socket

import pytest

from distsort.node import node_place, placement

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
    assert placement(COMM).one_node == (len({h for h, _, _ in rows}) == 1)
    assert node_place(MPI.COMM_SELF) == (0, 1) and placement(MPI.COMM_SELF).one_node


def test_placement_names_every_ranks_node_and_device_alike_on_every_rank():
    where = placement(COMM, device=f"gpu{COMM.Get_rank() % 2}")
    assert COMM.allgather(where) == [where] * COMM.Get_size()
    assert len(set(where.node)) == len(set(COMM.allgather(socket.gethostname())))
    assert where.device == tuple(f"gpu{r % 2}" for r in range(COMM.Get_size()))
    rank, node = COMM.Get_rank(), where.node
    assert where.sharing(rank) == [q for q in range(COMM.Get_size())
                                   if q % 2 == rank % 2 and node[q] == node[rank]]
