"""The transport factory: builds what choice.py names for a communicator's ranks."""

from __future__ import annotations

from .. import settings
from ..errors import DistsortError, agree
from . import Transport, choice
from .mpi import MpiTransport


def host_transport(comm, where: choice.Placement) -> Transport:
    """The CPU backend's transport: the ranks read each other's memory where they all run on
    one node and the kernel lets them (cma.py), else MPI. Collective."""
    from .cma import connect

    if len(where.node) > 1 and where.one_node:
        cma = connect(comm)
        if cma is not None:
            return cma
    return MpiTransport(comm)


def gpu_transport(comm, where: choice.Placement) -> Transport:
    """What choice.py picks for these ranks and $DISTSORT_TRANSPORT, built. Collective;
    DistsortError on every rank where the setting cannot work or NCCL fails to start."""
    from . import ipc
    from .staged import StagedTransport

    setting = settings.value("DISTSORT_TRANSPORT")
    name = agree(comm, lambda: choice.choose(setting, where))
    if name in (choice.HOST, choice.ALONE):
        return StagedTransport(comm, name)
    if name == choice.IPC_HOST:
        return ipc.connect(comm, StagedTransport(comm))
    if name in (choice.IPC, choice.IPC_THEN_NCCL):  # NCCL not started up front: it takes
        # seconds (ipc.py says when)
        return ipc.connect(comm, StagedTransport(comm), nccl=lambda: nccl_transport(comm),
                           every_call=name == choice.IPC_THEN_NCCL)
    return nccl_transport(comm)


def nccl_transport(comm) -> Transport:
    """NCCL's communicator for comm; its failure to start is one DistsortError on every rank."""
    from .nccl import NcclTransport

    def start():
        try:
            return NcclTransport(comm)
        except Exception as exc:  # cupy.cuda.nccl.NcclError and the CUDA errors under it
            raise DistsortError(f"NCCL could not connect the ranks' GPUs: {exc}") from None

    return agree(comm, start)
