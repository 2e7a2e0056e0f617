"""Test set-up shared by all tests: GPU tests are skipped where no CUDA device is found."""

from __future__ import annotations

import functools
import os
import tempfile

import pytest

_RANK_VARS = ("PMI_RANK", "OMPI_COMM_WORLD_RANK")  # set by MPICH's and Open MPI's launchers


def pytest_configure(config):
    """Under mpiexec every rank is its own pytest session: give each its own temporary folder,
    so that no rank's clean-up of old folders races another's (tests that share a file
    broadcast rank 0's path)."""
    rank = next((os.environ[v] for v in _RANK_VARS if v in os.environ), None)
    if rank is not None and not config.option.basetemp:
        folder = f"distsort-pytest-{os.getuid()}-{os.getppid()}-rank{rank}"
        config.option.basetemp = os.path.join(tempfile.gettempdir(), folder)


@functools.cache
def gpu_available() -> bool:
    try:
        import cupy

        return cupy.cuda.runtime.getDeviceCount() > 0
    except Exception:  # no CuPy, no driver, or no device: all mean "no GPU here"
        return False


def pytest_collection_modifyitems(config, items):
    if gpu_available():
        return
    skip = pytest.mark.skip(reason="no CUDA GPU with CuPy found")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)
