"""Test set-up shared by all tests: GPU tests are skipped where no CUDA device is found."""

from __future__ import annotations

import functools

import pytest


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
