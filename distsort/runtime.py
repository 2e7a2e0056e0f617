"""The MPI world a sort runs in: backend choice, rank-to-GPU binding, and the transport.

A rank binds to its GPU (local rank modulo the devices it can see) before anything touches CUDA,
so the ranks of a node spread over its devices; where there are more ranks than GPUs, several
ranks share one (transport/choice.py picks a transport that works for them, and they split its
memory budget). The transport for an MPI communicator is built once and cached: building one
costs far more than an exchange.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from mpi4py import MPI

from . import settings
from .backend import Backend, GpuBackend, gpu_count
from .binding import bus_id, device_for_rank, device_from_env
from .cuda_source import use_kernel_cache
from .errors import DistsortError, agree
from .gpu_safety import require_safe_cupy
from .node import node_place, placement
from .transport import Transport, choice
from .transport.build import gpu_transport, host_transport
from .workers import threads_for, use_threads

BACKENDS = settings.SETTINGS["DISTSORT_BACKEND"].choices  # auto, cpu, gpu


@dataclass
class Runtime:
    comm: MPI.Comm
    backend: Backend
    transport: Transport
    placement: choice.Placement | None = None  # every rank's node and device

    @property
    def sharers(self) -> int:
        """Ranks on this rank's device (on CPUs, its node): they split its memory."""
        return len(self.placement.sharing(self.comm.Get_rank())) if self.placement else 1

    @property
    def node_ranks(self) -> int:
        """Ranks on this rank's node: they share its cores."""
        if not self.placement:
            return 1
        return self.placement.node.count(self.placement.node[self.comm.Get_rank()])

    @property
    def shared_devices(self) -> bool:
        """Do any ranks share a GPU? The same answer on every rank."""
        return bool(self.placement and self.placement.device[0] is not None
                    and self.placement.shared_devices())

    @property
    def xp(self):
        return self.backend.xp


_cache: dict[tuple, Runtime] = {}
# The backend each (communicator, request) resolved to: choosing takes two collectives, and
# what they find (every rank has a GPU, a safe CuPy) cannot change while the process runs.
_chosen: dict[tuple, tuple[MPI.Comm, str]] = {}


def get_runtime(comm=None, backend: str | None = None, engine: str | None = None) -> Runtime:
    """The runtime for comm (default COMM_WORLD) on the chosen backend ('auto', 'cpu', 'gpu').

    engine names the local sort engine (default: $DISTSORT_ENGINE, else the backend's best).
    """
    comm = comm if comm is not None else MPI.COMM_WORLD
    handle, name = MPI._handleof(comm), _choice(comm, requested_backend(backend))
    engine = engine or settings.value("DISTSORT_ENGINE") or None
    key = (handle, name, engine)
    if key not in _cache or _cache[key].comm == MPI.COMM_NULL:  # MPI hands a freed
        # communicator's handle to the next one made
        _cache[key] = _build(comm, name, engine)
        use_threads(threads_for(_cache[key].node_ranks))  # the rank's share of its node's cores
    return _cache[key]


def array_module(comm, backend: str | None):
    """NumPy, or CuPy with this rank's GPU bound: the backend chosen for comm as get_runtime
    would choose it, for work that moves no rows between ranks (`check`), without building
    a transport. Collective."""
    if _choice(comm, requested_backend(backend)) == "cpu":
        import numpy

        return numpy
    use_kernel_cache()
    bind_gpu(comm)
    import cupy

    return cupy


def _choice(comm, backend: str) -> str:
    """choose_backend's answer for (comm, backend), once per process (two collectives)."""
    handle = MPI._handleof(comm)
    known = _chosen.get((handle, backend))
    if known is None or known[0] == MPI.COMM_NULL:  # collective: every rank makes the same
        # calls; a freed communicator's handle may come back for another one
        _chosen[handle, backend] = (comm, choose_backend(comm, backend))
    return _chosen[handle, backend][1]


def release(comm=None) -> None:
    """Give back what distsort keeps between sorts on comm (default COMM_WORLD): on GPUs of one
    node, the mappings of other ranks' receive buffers, which keep about a shard's bytes
    allocated on every GPU even after CuPy's pool frees its blocks. Collective; the next sort
    maps them again (costly: tens of ms); and the GPU engine's kept graphs of small sorts
    (local/graphs.py). Call it before freeing CuPy's pool for other work."""
    handle = MPI._handleof(comm if comm is not None else MPI.COMM_WORLD)
    for (owner, *_), rt in _cache.items():  # built by collective calls: the same on every rank
        if owner == handle and rt.comm != MPI.COMM_NULL:  # not a freed one's, of that handle
            rt.transport.release()
            getattr(rt.backend.engine, "release", lambda: None)()


def requested_backend(requested: str | None) -> str:
    """The backend asked for: requested, or where that is None or 'auto', $DISTSORT_BACKEND,
    else 'auto'."""
    if requested in (None, "auto"):
        return settings.value("DISTSORT_BACKEND")
    return requested


def choose_backend(comm, requested: str | None) -> str:
    """Resolve 'auto' to 'gpu' when every rank sees a GPU, else 'cpu'; check 'gpu' is possible."""
    requested = requested_backend(requested)
    if requested not in BACKENDS:
        raise DistsortError(f"unknown backend {requested!r}: choose one of {', '.join(BACKENDS)}")
    if requested == "cpu":
        return "cpu"
    everyone_has_gpu = comm.allreduce(gpu_count() > 0, op=MPI.LAND)
    if requested == "gpu" and not everyone_has_gpu:
        raise DistsortError(
            "--backend gpu: some rank sees no CUDA GPU (is CuPy installed and a GPU visible?); "
            "use --backend cpu"
        )
    if not everyone_has_gpu:
        return "cpu"
    agree(comm, require_safe_cupy)  # a CuPy that can sort wrongly on OOM: one message, all stop
    return "gpu"


def _build(comm, name: str, engine: str | None) -> Runtime:
    if name == "cpu":
        where = placement(comm)
        return Runtime(comm, Backend(engine), host_transport(comm, where), where)
    use_kernel_cache()  # kernels that `compile` built, whatever this process's HOME
    where = placement(comm, device_id(bind_gpu(comm)))
    return Runtime(comm, GpuBackend(engine), gpu_transport(comm, where), where)


def device_id(device: int) -> str:
    """The GPU's PCI address: the same for ranks that see it under different indices."""
    import cupy

    return bus_id(cupy.cuda.runtime.getDeviceProperties(device))


def bind_gpu(comm=None) -> int:
    """Make this rank's GPU current before CUDA work starts; return its index. distsort's first
    GPU call does it; a program calls it first to make its CuPy arrays on that GPU (CuPy's
    default device is GPU 0 on every rank). Collective over comm (default COMM_WORLD): where a
    rank has no GPU to take, DistsortError on every rank.

    The launcher's variables decide (DISTSORT_DEVICE, else the local rank they name, modulo the
    visible devices: see binding.py); where none is set, the rank's index among the ranks of
    comm that share its node decides.
    """
    comm = comm if comm is not None else MPI.COMM_WORLD
    node_rank, _ = node_place(comm)
    device = agree(comm, lambda: _choose_gpu(node_rank))
    import cupy

    cupy.cuda.Device(device).use()
    return device


def _choose_gpu(node_rank: int) -> int:
    count = gpu_count()
    if count < 1:
        raise DistsortError("no CUDA GPU for this rank (is CuPy installed and a GPU visible?); "
                            "without GPUs distsort sorts on the CPUs")
    try:
        device = device_from_env(os.environ, count)
    except ValueError as exc:
        raise DistsortError(f"cannot choose this rank's GPU: {exc}") from None
    return device_for_rank(node_rank, count) if device is None else device
