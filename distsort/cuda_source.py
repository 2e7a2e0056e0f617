"""Loading the project's CUDA sources (.cu files beside the Python) as compiled CuPy modules.

NVRTC takes seconds for the larger sources, and CuPy's own cache of what it compiled lives
under HOME (~/.cupy), which a fresh container starts without, so every cluster job would
compile again. Compiled kernels are kept in distsort's own kernel cache instead:
$DISTSORT_KERNEL_CACHE, else the `kernels` folder of the installed package, which `python -m
distsort compile` fills once per machine or image (launch/quickstart.sh runs it; it needs the
GPU, so an image gets it from a container on one, or a mounted folder) and every later job
finds, whatever its HOME (through CuPy 14's pluggable kernel cache: the folder first, then
CuPy's own). `compile` also runs a small sort of every kind, so that the folder holds CuPy's
own kernels that sorts use too. Jobs save what they still compile into CuPy's own cache, as
does `compile` where the folder cannot be written (a read-only install).
"""

from __future__ import annotations

import functools
import hashlib
import os
import re
from collections.abc import Callable

from . import settings

_INCLUDE = re.compile(r'^#include "([^"]+)"[ \t]*$', re.MULTILINE)
CTYPES = {1: "unsigned char", 2: "unsigned short", 4: "unsigned int", 8: "unsigned long long"}
HERE = os.path.dirname(__file__)


def kernel_cache() -> str:
    """The folder of distsort's compiled kernels."""
    return settings.value("DISTSORT_KERNEL_CACHE") or os.path.join(HERE, "kernels")


@functools.cache
def load_module(filename: str, names: tuple[str, ...], defines: tuple = ()):
    """The compiled module of distsort/<filename> with the given template instantiations and
    defines ((NAME, value) pairs), compiled once per process (and once per machine: see the
    module doc)."""
    options = ("-std=c++17",) + tuple(f"-D{name}={value}" for name, value in defines)
    return compiled(source(filename), options, names)


def source(filename: str, seen: set | None = None) -> str:
    """distsort/<filename> with each `#include "NAME"` line replaced by the text of NAME (beside
    the file), each header once (seen: those already in): the shared device code is in the
    source CuPy compiles and caches by, and no include path (an install's folder) enters the
    compiler's options."""
    seen = set() if seen is None else seen
    folder = os.path.dirname(os.path.join(HERE, filename))
    with open(os.path.join(HERE, filename)) as f:
        text = f.read()

    def include(match: re.Match) -> str:
        name = os.path.relpath(os.path.join(folder, match[1]), HERE)
        if name in seen:
            return ""
        seen.add(name)
        return source(name, seen)

    return _INCLUDE.sub(include, text)


def compile_apart(builds: list[Callable[[], object]]) -> None:
    """Run the builds (each compiles modules) in threads at once, each on the calling thread's
    GPU: NVRTC compiles without holding the GIL, so the modules compile side by side."""
    from concurrent.futures import ThreadPoolExecutor

    import cupy

    device = cupy.cuda.Device().id

    def build(run: Callable[[], object]) -> None:
        with cupy.cuda.Device(device):
            run()

    with ThreadPoolExecutor(len(builds)) as pool:
        list(pool.map(build, builds))


def compiled(source: str, options: tuple, names: tuple[str, ...]):
    """A CuPy RawModule of the source with these instantiations, compiled now, through the
    kernel cache. CuPy is imported only here."""
    import cupy

    use_kernel_cache()
    module = cupy.RawModule(code=source, options=options, name_expressions=list(names))
    module.get_function(names[0])  # compiles the module, every instantiation in it
    return module


def use_kernel_cache(fill: bool = False) -> None:
    """From now on CuPy's compiler looks every kernel up in distsort's folder first (ours and
    CuPy's own that a sort uses), then in CuPy's cache; it saves what it compiles into the
    folder when filling (`compile`), else into CuPy's cache. Needs CuPy 14's pluggable cache
    backend; with an older CuPy, CuPy's own cache alone."""
    from cupy.cuda import compiler

    current = getattr(compiler, "_kernel_cache_backend", None)
    if current is None:
        return
    if (isinstance(current, _FolderFirst) and current.folder == kernel_cache()
            and current.fill >= fill):
        return  # in place already (a process that fills keeps filling)
    fallback = current.fallback if isinstance(current, _FolderFirst) else current
    compiler._set_kernel_cache_backend(_FolderFirst(kernel_cache(), fallback, fill))


class _FolderFirst:
    """A CuPy kernel cache backend: distsort's folder, then CuPy's own. Files hold a SHA-256
    of the payload before it, and are written whole (a temporary file, then a rename), so that
    a torn or foreign file is compiled again, not loaded."""

    def __init__(self, folder: str, fallback, fill: bool):
        self.folder, self.fallback, self.fill = folder, fallback, fill

    def load(self, name: str) -> bytes | None:
        try:
            with open(os.path.join(self.folder, name), "rb") as f:
                data = f.read()
        except OSError:
            found = self.fallback.load(name)
            if found is not None and self.fill:  # compiled before `compile` ran: keep it too
                self._write(name, found)
            return found
        digest, payload = data[:32], data[32:]
        return payload if hashlib.sha256(payload).digest() == digest else None

    def save(self, name: str, cubin: bytes, source: str) -> None:
        if not (self.fill and self._write(name, cubin)):
            self.fallback.save(name, cubin, source)

    def _write(self, name: str, cubin: bytes) -> bool:
        """Put the file in the folder; False where the folder cannot be written."""
        import tempfile  # here: only `compile` writes (a job that imports it pays 7 ms)

        try:
            os.makedirs(self.folder, exist_ok=True)
            fd, temp = tempfile.mkstemp(dir=self.folder, prefix=".part-")
            with os.fdopen(fd, "wb") as f:
                f.write(hashlib.sha256(cubin).digest() + cubin)
            os.replace(temp, os.path.join(self.folder, name))
            return True
        except OSError:  # a folder it may not write (a read-only install)
            return False
