"""The array backend seam: NumPy arrays on the CPU or CuPy arrays on one GPU.

The pipeline is written once against `Backend.xp` (the array module) plus the few operations that
differ between host and device: moving small arrays to and from the host, and waiting for queued
device work before a phase is timed.
"""

from __future__ import annotations

import numpy as np

from .local import LocalSortEngine, get_engine


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

    def owns(self, a) -> bool:
        """True if `a` is an array of this backend."""
        return isinstance(a, np.ndarray)


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

    def owns(self, a) -> bool:
        return isinstance(a, self.xp.ndarray)


def gpu_count() -> int:
    """Number of CUDA devices CuPy can see (0 without CuPy or a driver)."""
    try:
        import cupy

        return cupy.cuda.runtime.getDeviceCount()
    except Exception:  # ImportError, no driver, no device: all mean no usable GPU
        return 0
