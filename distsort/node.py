"""The ranks of a communicator that share this rank's node (its shared-memory domain), and
where every rank runs (node and device: placement)."""

from __future__ import annotations

from mpi4py import MPI

from .transport.choice import Placement


def node_place(comm) -> tuple[int, int]:
    """(this rank's index among the ranks of comm on its node, how many they are). Collective."""
    node = comm.Split_type(MPI.COMM_TYPE_SHARED)
    try:
        return node.Get_rank(), node.Get_size()
    finally:
        node.Free()


def placement(comm, device: str | None = None) -> Placement:
    """Every rank's node, as (the lowest rank of comm on it, its host name), and device (e.g.
    its GPU's PCI bus id; None on CPUs, where a node's ranks share its memory). Collective."""
    node = comm.Split_type(MPI.COMM_TYPE_SHARED)
    try:
        first = node.bcast((comm.Get_rank(), MPI.Get_processor_name()), root=0)
    finally:
        node.Free()
    rows = comm.allgather((first, device))
    return Placement(tuple(r[0] for r in rows), tuple(r[1] for r in rows))
