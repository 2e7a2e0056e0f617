"""Where an array lives, and the CuPy calls that keep a rank from importing what it never uses.

`import cupyx` imports cupyx's sparse matrices and, where SciPy is installed, SciPy's sparse
package: 0.2-0.6 s of a rank's time (bench/RESULTS.md, session 54). CuPy does it on the first
`cupy.get_array_module`, the first operator between an array and a number (`a + 1`, `a == 3`;
ufunc calls such as `cupy.add(a, 1)` do not) and any `cupyx` call. The pipeline's device code
calls the ufuncs and the helpers here instead; tests/job/test_cold_gpu.py holds it to that.
"""

from __future__ import annotations

import numpy as np


def module_of(a):
    """NumPy for a host array, else CuPy (cupy.get_array_module without its import of cupyx)."""
    if isinstance(a, (np.ndarray, np.generic)):
        return np
    import cupy

    return cupy


def pooled_pinned(shape: tuple, dtype) -> np.ndarray:
    """An uninitialised page-locked host array from CuPy's pinned memory pool, for small tables
    copied back while kernels run (cupyx.empty_pinned without importing cupyx)."""
    import cupy

    dtype = np.dtype(dtype)
    nbytes = int(np.prod(shape)) * dtype.itemsize
    raw = np.frombuffer(cupy.cuda.alloc_pinned_memory(max(nbytes, 1)), np.uint8, max(nbytes, 1))
    return raw[:nbytes].view(dtype).reshape(shape)  # no rows: 1 byte made


def ceil_div(a, d: int):
    """-(-a // d) of an integer array by ufuncs (host or device): blocks of d that hold a."""
    xp = module_of(a)
    return xp.floor_divide(xp.add(a, d - 1), d)
