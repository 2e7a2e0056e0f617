"""Small host arrays (kernel arguments: splitters, tables) uploaded to the device together."""

from __future__ import annotations

import numpy as np


def on_device(*arrays: np.ndarray) -> list:
    """Small host arrays on the device in one copy, as views (each from an 8-byte boundary):
    the first chunk's count waits for its arguments, and each copy has a fixed cost on the
    host."""
    import cupy

    starts = np.cumsum([0] + [-(-a.nbytes // 8) * 8 for a in arrays])
    packed = np.zeros(int(starts[-1]), np.uint8)
    for a, at in zip(arrays, starts):
        packed[at : at + a.nbytes] = np.ascontiguousarray(a).view(np.uint8).reshape(-1)
    dev = cupy.asarray(packed)
    return [dev[at : at + a.nbytes].view(a.dtype) for a, at in zip(arrays, starts)]
