"""Memory budgets: sizes like "8GiB", the default device budget, and pinned host buffers.

A rank's *budget* is how many bytes of device memory one step of the sort may use (on the CPU
backend the "device" is the host). When a rank's work does not fit it, the out-of-core sort
(external.py) runs instead of the in-memory one.
"""

from __future__ import annotations

import os
import re

import numpy as np

_UNITS = {"": 1, "k": 2**10, "m": 2**20, "g": 2**30, "t": 2**40, "p": 2**50}
_SIZE = re.compile(r"^\s*([0-9]*\.?[0-9]+(?:e[0-9]+)?)\s*([kmgtp]?)(i?)(b?)\s*$", re.IGNORECASE)
GPU_FRACTION = 0.7  # of the free device memory (CuPy's pool's cached blocks count as free)
HOST_FRACTION = 0.5  # of the available host memory, shared by the ranks of a node


def parse_size(text: int | str) -> int:
    """Bytes from an int or a string like 1000000, 1e9, 512K, 4M, 8GiB (powers of 1024) or
    8GB (powers of 1000). Raises ValueError if it is not a positive size."""
    if isinstance(text, (int, np.integer)):
        value = int(text)
    else:
        match = _SIZE.match(str(text))
        if not match:
            raise ValueError(f"not a size: {text!r} (try 512MiB, 8GiB or 1e9)")
        number, unit, binary, byte = match.groups()
        scale = _UNITS[unit.lower()]
        if unit and byte and not binary:  # "GB": decimal, as disks and vendors count
            scale = 1000 ** "kmgtp".index(unit.lower()) * 1000
        value = int(float(number) * scale)
    if value <= 0:
        raise ValueError(f"a memory size must be positive: {text!r}")
    return value


def default_budget(backend: str, ranks_on_node: int = 1) -> int:
    """A safe fraction of the free GPU memory, or of the host's available memory per rank."""
    if backend == "gpu":
        import cupy

        pool = cupy.get_default_memory_pool()
        free = cupy.cuda.runtime.memGetInfo()[0] + pool.free_bytes()
        if pool.get_limit():  # set_limit or CUPY_GPU_MEMORY_LIMIT: above it CuPy runs out
            free = min(free, pool.get_limit() - pool.used_bytes())
        return int(GPU_FRACTION * free)
    return int(HOST_FRACTION * available_host_memory() / max(ranks_on_node, 1))


def available_host_memory() -> int:
    """MemAvailable from /proc/meminfo, else the free physical pages."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")


def host_empty(shape: tuple, dtype, pinned: bool) -> np.ndarray:
    """An uninitialised host array; page-locked (fast, asynchronous copies) when pinned."""
    dtype = np.dtype(dtype)
    if not pinned:
        return np.empty(shape, dtype)
    import cupy

    count = int(np.prod(shape))
    memory = cupy.cuda.alloc_pinned_memory(max(count * dtype.itemsize, 1))
    return np.frombuffer(memory, dtype, count).reshape(shape)


def size_argument(text: str) -> int:
    """argparse type for sizes: parse_size with argparse's error."""
    import argparse

    try:
        return parse_size(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
