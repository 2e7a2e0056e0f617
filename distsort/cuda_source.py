"""Loading the project's CUDA sources (.cu files beside the Python) as compiled CuPy modules.

NVRTC takes seconds for the larger sources, and CuPy's own cache of what it compiled lives
under HOME (~/.cupy), which a fresh container starts without, so every cluster job would
compile again. Compiled kernels are kept in distsort's own kernel cache instead:
$DISTSORT_KERNEL_CACHE, else the `kernels` folder of the installed package, which `python -m
distsort compile` fills once per machine or image (launch/quickstart.sh and the Docker build run
it) and every later job finds, whatever its HOME. Where that folder cannot be written (a
read-only install), a kernel it lacks is compiled into CuPy's own cache.
"""

from __future__ import annotations

import contextlib
import functools
import os

CTYPES = {1: "unsigned char", 2: "unsigned short", 4: "unsigned int", 8: "unsigned long long"}
HERE = os.path.dirname(__file__)


def kernel_cache() -> str:
    """The folder of distsort's compiled kernels."""
    return os.environ.get("DISTSORT_KERNEL_CACHE") or os.path.join(HERE, "kernels")


@functools.cache
def load_module(filename: str, names: tuple[str, ...]):
    """The compiled module of distsort/<filename> with the given template instantiations,
    compiled once per process (and once per machine: see the module doc)."""
    with open(os.path.join(HERE, filename)) as f:
        return compiled(f.read(), ("-std=c++17",), names)


def compiled(source: str, options: tuple, names: tuple[str, ...]):
    """A CuPy RawModule of the source with these instantiations, compiled now, through the
    kernel cache. CuPy is imported only here."""
    import cupy

    def build():
        module = cupy.RawModule(code=source, options=options, name_expressions=list(names))
        module.get_function(names[0])  # compiles the module, every instantiation in it
        return module

    try:
        with _cupy_cache(kernel_cache()):
            return build()
    except OSError:  # the cache folder cannot be made or written: CuPy's own cache
        return build()


@contextlib.contextmanager
def _cupy_cache(folder: str):
    """CuPy's compiler reads its cache folder from CUPY_CACHE_DIR when it compiles: this one
    while the block runs, the caller's setting after."""
    before = os.environ.get("CUPY_CACHE_DIR")
    os.environ["CUPY_CACHE_DIR"] = folder
    try:
        yield
    finally:
        if before is None:
            del os.environ["CUPY_CACHE_DIR"]
        else:
            os.environ["CUPY_CACHE_DIR"] = before
