"""The ranks of a communicator that share this rank's node (its shared-memory domain)."""

from __future__ import annotations

from mpi4py import MPI


def node_place(comm) -> tuple[int, int]:
    """(this rank's index among the ranks of comm on its node, how many they are). Collective."""
    node = comm.Split_type(MPI.COMM_TYPE_SHARED)
    try:
        return node.Get_rank(), node.Get_size()
    finally:
        node.Free()


def one_node(comm) -> bool:
    """Do all ranks of comm share one node? The same answer on every rank. Collective."""
    return node_place(comm)[1] == comm.Get_size()
