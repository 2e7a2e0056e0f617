"""Which transport moves the rows between a communicator's GPUs: the one home of that choice.

The runtime builds what it names and `info` prints what it says, so both always agree.

- NCCL needs a device of its own for every rank of a communicator (it refuses two ranks on one
  GPU), so where any ranks share a GPU it is never used.
- The copy engines through CUDA IPC (transport/ipc.py) need every rank to map every other's
  memory: one node, and peer access where ranks are on different GPUs (checked when built).
  Ranks that share a GPU map each other's memory on that GPU, so they exchange this way; their
  small exchanges (and everything, where IPC fails) go through host memory and MPI (staged.py).
- One rank alone exchanges nothing: nothing is built.
- CPU ranks (build.host_transport): on one node each reads its rows out of the others' memory
  (cma.py) where the kernel lets them, else MPI.
- With a GPU for every rank: the copy engines up to AUTO_IPC_RANKS ranks on one node (they beat
  NCCL on 2 GPUs and lost to it on 4: bench/RESULTS.md), their small exchanges through host
  memory and MPI until a process has made a few (NCCL takes seconds to start: ipc.py), NCCL
  where IPC fails and across nodes. Above AUTO_IPC_RANKS on one node the same until NCCL
  starts, and then NCCL for every exchange: its start (1.9 s of a 4-rank file job, run 305)
  costs a one-sort process far more than its faster exchanges save (~5 ms a 16 GiB sort).
$DISTSORT_TRANSPORT ('auto', 'ipc', 'nccl') asks for one; asking for NCCL where ranks share a
GPU is an error that names them.

Where every rank of a communicator shares one GPU, the in-memory sort folds (steps/fold.py): the
ranks' kernels would only take turns on that GPU, so rank 0 sorts every row as one rank would,
and the transport moves the rows to it and the shards back. $DISTSORT_SHARED_GPU=split sorts as
on a GPU for each rank instead: the multi-GPU code paths, tested on one GPU.
"""

from __future__ import annotations

from dataclasses import dataclass

from .. import settings
from ..errors import DistsortError

SETTINGS = settings.SETTINGS["DISTSORT_TRANSPORT"].choices  # auto, ipc, nccl
AUTO_IPC_RANKS = 2
FOLD, SPLIT = settings.SETTINGS["DISTSORT_SHARED_GPU"].choices  # $DISTSORT_SHARED_GPU

NCCL, IPC, IPC_HOST, HOST, ALONE = "nccl", "ipc", "ipc+host", "host", "alone"
CMA, MPI_HOST = "cma", "mpi"  # the CPU backend's (build.host_transport), and their names
IPC_THEN_NCCL = "ipc, then nccl"
DESCRIBED = {
    ALONE: "none (one rank: no rows move between ranks)",
    NCCL: "NCCL",
    IPC: "the GPUs' copy engines through CUDA IPC (small exchanges through host memory and "
         "MPI, then NCCL once a process has made a few; NCCL where IPC fails)",
    IPC_THEN_NCCL: "the GPUs' copy engines through CUDA IPC (small exchanges through host "
                   "memory and MPI), then NCCL for every exchange once a process has made a few "
                   "(NCCL where IPC fails)",
    IPC_HOST: "device copies through CUDA IPC between ranks that share GPUs (host memory and "
              "MPI where IPC fails and for small exchanges)",
    HOST: "host memory and MPI (device to host, MPI all-to-all, host to device)",
    CMA: "each rank reads its rows out of the other ranks' memory (cross-memory attach: the "
         "ranks of one node)",
    MPI_HOST: "MPI (host buffers)",
}


@dataclass(frozen=True)
class Placement:
    """Where a communicator's ranks run: rank r's node (node[r]: the lowest rank on it, and its
    host name) and device (device[r]: its GPU, None on CPUs); the same on every rank."""

    node: tuple
    device: tuple

    @property
    def one_node(self) -> bool:
        return len(set(self.node)) == 1

    @property
    def one_gpu(self) -> bool:
        """Do all the ranks (two or more) run on one GPU?"""
        return len(self.node) > 1 and self.device[0] is not None and \
            len(set(zip(self.node, self.device))) == 1

    def sharing(self, rank: int) -> list[int]:
        """The ranks (rank included) on rank's node and device: those that split its memory."""
        here = (self.node[rank], self.device[rank])
        return [q for q in range(len(self.node)) if (self.node[q], self.device[q]) == here]

    def shared_devices(self) -> list[list[int]]:
        """Groups of two or more ranks that share one device, lowest rank first."""
        groups: dict[tuple, list[int]] = {}
        for q, key in enumerate(zip(self.node, self.device)):
            groups.setdefault(key, []).append(q)
        return [g for g in groups.values() if len(g) > 1]


def choose(setting: str, placement: Placement) -> str:
    """NCCL, IPC, IPC_HOST or HOST for these ranks (see the module doc); DistsortError where
    the setting is unknown or asks for NCCL on ranks that share a GPU."""
    if setting not in SETTINGS:
        raise DistsortError(f"DISTSORT_TRANSPORT={setting!r}: choose one of {', '.join(SETTINGS)}")
    if setting == "auto" and len(placement.node) == 1:
        return ALONE  # NCCL's start-up alone would cost about a second
    shared = placement.shared_devices()
    if shared:
        if setting == NCCL:
            raise DistsortError(f"DISTSORT_TRANSPORT=nccl: {describe_sharing(placement, shared)}; "
                                "NCCL needs a GPU for every rank. Unset DISTSORT_TRANSPORT (ranks "
                                "that share a GPU exchange by device copies) or start one rank "
                                "per GPU")
        return IPC_HOST if placement.one_node else HOST
    if setting == "auto" and placement.one_node:
        return IPC if len(placement.node) <= AUTO_IPC_RANKS else IPC_THEN_NCCL
    return IPC if setting == IPC and placement.one_node else NCCL


def folds(setting: str, placement: Placement) -> bool:
    """Does the in-memory sort fold onto rank 0 (see the module doc)? DistsortError where the
    setting ($DISTSORT_SHARED_GPU) is neither FOLD nor SPLIT."""
    if setting not in (FOLD, SPLIT):
        raise DistsortError(f"DISTSORT_SHARED_GPU={setting!r}: choose {FOLD} or {SPLIT}")
    return setting == FOLD and placement.one_gpu


def describe_sharing(placement: Placement, shared: list[list[int]]) -> str:
    """'ranks 0, 1 share GPU 0000:1B:00.0 on host gpu7; ...'"""
    return "; ".join(f"ranks {', '.join(map(str, g))} share GPU {placement.device[g[0]]} on "
                     f"host {placement.node[g[0]][1]}" for g in shared)


def describe(name: str, setting: str, placement: Placement, shared_gpu: str = FOLD) -> str:
    """One line for `info`: what moves the rows, and why (shared_gpu: $DISTSORT_SHARED_GPU)."""
    shared = placement.shared_devices()
    why = [describe_sharing(placement, shared)] if shared else []
    if name == NCCL and setting == IPC and not placement.one_node:
        why.append("the ranks span nodes")
    line = f"{DESCRIBED[name]} ({'; '.join(why + [f'DISTSORT_TRANSPORT={setting}'])})"
    if folds(shared_gpu, placement):
        line += ("; in memory, rank 0 sorts every rank's rows, as the ranks' kernels would only "
                 f"take turns on the one GPU (DISTSORT_SHARED_GPU={shared_gpu})")
    return line
