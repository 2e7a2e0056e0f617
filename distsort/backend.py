"""The array backend seam: NumPy arrays on the CPU or CuPy arrays on one GPU.

The pipeline is written once against `Backend.xp` (the array module) plus the few operations that
differ between host and device: moving small arrays to and from the host, waiting for queued
device work, a clock for the phases, and copy lanes (CopyLane) that move data between host and
device beside the work on the device.
"""

from __future__ import annotations

import functools

import numpy as np

from .local import LocalSortEngine, get_engine
from .report import HostClock


class Backend:
    """CPU backend: NumPy arrays, the NumPy local sort engine."""

    name = "cpu"

    def __init__(self, engine: str | None = None):
        self.xp = np
        self.engine: LocalSortEngine = get_engine(self.name, engine)

    def to_host(self, a) -> np.ndarray:
        return np.asarray(a)

    def from_host(self, a: np.ndarray):
        return a

    def synchronize(self) -> None:
        """Wait until queued work is done (nothing is queued on the CPU)."""

    def clock(self) -> HostClock:
        """The clock of the pipeline's phases."""
        return HostClock()

    def copy_lane(self) -> CopyLane:
        """A lane for host<->device copies that overlap the device's work (CPU: copies at once)."""
        return CopyLane()

    def transfer_lane(self) -> CopyLane:
        """A lane for the transports' calls beside the device's work (CPU: calls at once)."""
        return CopyLane()


class GpuBackend(Backend):
    """GPU backend: CuPy arrays on the current device, the GPU local sort engine."""

    name = "gpu"

    def __init__(self, engine: str | None = None):
        import cupy

        self.xp = cupy
        self.engine = get_engine(self.name, engine)

    def to_host(self, a) -> np.ndarray:
        return self.xp.asnumpy(a)

    def from_host(self, a: np.ndarray):
        return self.xp.asarray(a)

    def synchronize(self) -> None:
        self.xp.cuda.get_current_stream().synchronize()

    def clock(self) -> StreamClock:
        return StreamClock(self.xp)

    def copy_lane(self) -> GpuCopyLane:
        return GpuCopyLane(self.xp)

    def transfer_lane(self) -> GpuCopyLane:
        """A lane on the exchange's stream (exchange_stream: of the greatest priority)."""
        return GpuCopyLane(self.xp, exchange_stream(self.xp.cuda.Device().id))


class StreamClock:
    """Phase marks as CUDA events on the current stream: a phase boundary waits for nothing, so
    the host queues the next phase's work while the device still runs the last one's, and a
    phase's time is the device's, from reaching one mark to reaching the next (the host's time
    in between shows where the device waited for it)."""

    def __init__(self, cp):
        self.cp = cp

    def mark(self):
        return self.cp.cuda.get_current_stream().record()

    def seconds(self, start, end) -> float:
        end.synchronize()  # a one-rank sort returns once queued: its report is read after it
        return self.cp.cuda.get_elapsed_time(start, end) / 1e3


class CopyLane:
    """Copies between host arrays and the backend's arrays, in order, beside the device's work.

    follow(): the next copies start after the work queued so far; join(): work queued next
    waits for the copies issued so far; wait(): the host waits for them. After join() or wait()
    the arrays the copies used may be reused (the lane's next copies follow() first). Inside
    `with lane:` other work is queued on the lane too (a transport's calls), and mark() notes
    where the lane is (a CUDA event; None on the CPU). On the CPU every copy is done when it
    returns.
    """

    def __enter__(self) -> CopyLane:
        return self

    def __exit__(self, *exc) -> None:
        pass

    def mark(self):
        return None

    def follow(self) -> None:
        pass

    def join(self) -> None:
        pass

    def wait(self) -> None:
        pass

    def upload(self, host: np.ndarray, out=None):
        """host's rows on the device (into `out` if given)."""
        if out is None:
            return host
        out[...] = host
        return out

    def download(self, column, host: np.ndarray) -> None:
        """Copy a backend array into a host array of its shape."""
        host[...] = column


class GpuCopyLane(CopyLane):
    """A non-blocking CUDA stream; from and to pinned host memory the copies are asynchronous
    (PCIe carries both directions at once: one lane each way). The lane keeps the device arrays
    it copies alive until join() or wait(): after join() every later use of their memory by the
    current stream (or by this lane, after follow()) is ordered after the copies, so the pool may
    hand it out again; a lane that is only joined (Loader, merge rounds) holds no more than the
    copies since its last join."""

    def __init__(self, cp, stream=None):
        self.cp, self.stream = cp, stream or cp.cuda.Stream(non_blocking=True)
        self.busy: list = []

    def __enter__(self) -> GpuCopyLane:
        self.stream.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        self.stream.__exit__(*exc)

    def mark(self):
        return self.stream.record()

    def follow(self) -> None:
        self.stream.wait_event(self.cp.cuda.get_current_stream().record())

    def join(self) -> None:
        self.cp.cuda.get_current_stream().wait_event(self.stream.record())
        self.busy.clear()

    def wait(self) -> None:
        self.stream.synchronize()
        self.busy.clear()

    def upload(self, host: np.ndarray, out=None):
        out = self.cp.empty(host.shape, host.dtype) if out is None else out
        out.set(host, stream=self.stream)
        self.busy.append(out)
        return out

    def download(self, column, host: np.ndarray) -> None:
        column.get(stream=self.stream, out=host, blocking=False)
        self.busy.append(column)


def gpu_count() -> int:
    """Number of CUDA devices CuPy can see (0 without CuPy or a driver)."""
    try:
        import cupy

        return cupy.cuda.runtime.getDeviceCount()
    except Exception:  # ImportError, no driver, no device: all mean no usable GPU
        return 0


@functools.cache
def exchange_stream(device: int):
    """The transfers' stream on `device` (the current one), of the greatest priority (CUDA
    clamps -1000 to it): NCCL's blocks get SMs before the pending blocks of a scatter queued
    ahead of them on the compute stream."""
    import cupy

    return cupy.cuda.Stream(non_blocking=True, priority=-1000)
