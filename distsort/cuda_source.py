"""Loading the project's CUDA sources (.cu files beside the Python) as CuPy modules."""

from __future__ import annotations

import functools
import os

CTYPES = {1: "unsigned char", 2: "unsigned short", 4: "unsigned int", 8: "unsigned long long"}


@functools.cache
def load_module(filename: str, names: tuple[str, ...]):
    """The compiled module of distsort/<filename> with the given template instantiations.

    Compiled once per process (and cached on disk by CuPy); CuPy is imported only here.
    """
    import cupy

    with open(os.path.join(os.path.dirname(__file__), filename)) as f:
        source = f.read()
    return cupy.RawModule(code=source, options=("-std=c++17",), name_expressions=list(names))
