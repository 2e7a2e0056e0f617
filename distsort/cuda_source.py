"""Loading the project's CUDA sources (.cu files beside the Python) as compiled CuPy modules.

NVRTC takes seconds for the larger sources, and CuPy's own cache of what it compiled lives
under HOME (~/.cupy), which a fresh container starts without, so every cluster job would
compile again. Compiled kernels are kept in distsort's own kernel cache instead:
$DISTSORT_KERNEL_CACHE, else the `kernels` folder of the installed package, which `python -m
distsort compile` fills once per machine or image (launch/quickstart.sh runs it; it needs the
GPU, so an image gets it from a container on one, or a mounted folder) and every later job
finds, whatever its HOME (through CuPy 14's pluggable kernel cache: the folder first, then
CuPy's own). `compile` also runs a small sort of every kind, so that the folder holds CuPy's
own kernels that sorts use too, and keeps NVRTC's answers that CuPy puts in every kernel's
cache key (remember_fingerprints), so that a job runs NVRTC not at all. Jobs save what they
still compile into CuPy's own cache, as does `compile` where the folder cannot be written (a
read-only install).
"""

from __future__ import annotations

import ast
import functools
import hashlib
import os
import re
from collections.abc import Callable

from . import settings

_INCLUDE = re.compile(r'^#include "([^"]+)"[ \t]*$', re.MULTILINE)
CTYPES = {1: "unsigned char", 2: "unsigned short", 4: "unsigned int", 8: "unsigned long long"}
HERE = os.path.dirname(__file__)
FINGERPRINTS = "compiler-fingerprints"  # the file of them in the folder (seed_fingerprints)


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
    backend; with an older CuPy, CuPy's own cache alone. The compiler's fingerprints that
    `compile` kept (remember_fingerprints) are given to CuPy too."""
    from cupy.cuda import compiler

    current = getattr(compiler, "_kernel_cache_backend", None)
    if current is None:
        return
    if (isinstance(current, _FolderFirst) and current.folder == kernel_cache()
            and current.fill >= fill):
        return  # in place already (a process that fills keeps filling)
    fallback = current.fallback if isinstance(current, _FolderFirst) else current
    compiler._set_kernel_cache_backend(_FolderFirst(kernel_cache(), fallback, fill))
    seed_fingerprints(kernel_cache(), _fingerprint_table(compiler))


def remember_fingerprints() -> None:
    """Keep this process's compiler fingerprints in the folder (`compile`'s last step)."""
    from cupy.cuda import compiler

    save_fingerprints(kernel_cache(), _fingerprint_table(compiler))


def _fingerprint_table(compiler) -> dict:
    """CuPy's table of the compiler's fingerprints: for each set of options (with the GPU's
    architecture and NVRTC's version), what NVRTC makes of an empty source, which CuPy puts in
    every kernel's cache key. CuPy fills it by running NVRTC once for each set a process meets,
    even where every kernel is in the cache: ~25 ms each, three in a two-rank job's sample and
    partition (bench/RESULTS.md, session 56). A CuPy without it: an empty table, unused."""
    table = getattr(compiler, "_empty_file_preprocess_cache", None)
    return table if isinstance(table, dict) else {}


def save_fingerprints(folder: str, table: dict) -> None:
    """Merge the table's entries into the folder's file of them (written whole, checked as the
    kernels are); entries that would not read back as they are (not plain literals) are left
    out."""
    kept = dict(read_fingerprints(folder))
    for options, fingerprint in table.items():
        try:
            if ast.literal_eval(repr((options, fingerprint))) == (options, fingerprint):
                kept[options] = fingerprint
        except (ValueError, SyntaxError, MemoryError, RecursionError):
            continue
    if kept:
        _write_checked(folder, FINGERPRINTS, repr(sorted(kept.items(), key=repr)).encode())


def seed_fingerprints(folder: str, table: dict) -> None:
    """Put the folder's kept fingerprints in the table where it has none for their options: a
    fingerprint is NVRTC's own answer for those options, architecture and version (all in its
    key), so another GPU or NVRTC finds none of these and asks NVRTC as before."""
    for options, fingerprint in read_fingerprints(folder):
        table.setdefault(options, fingerprint)


def read_fingerprints(folder: str) -> list[tuple]:
    """The folder's kept (options, fingerprint) entries; none where the file is missing, torn
    or not what save_fingerprints writes."""
    data = _read_checked(os.path.join(folder, FINGERPRINTS))
    try:
        entries = ast.literal_eval(data.decode()) if data is not None else []
    except (ValueError, SyntaxError, MemoryError, RecursionError, UnicodeDecodeError):
        return []
    if not isinstance(entries, list):
        return []
    return [tuple(e) for e in entries if isinstance(e, tuple) and len(e) == 2
            and isinstance(e[0], tuple)]


class _FolderFirst:
    """A CuPy kernel cache backend: distsort's folder, then CuPy's own. Files hold a SHA-256
    of the payload before it, and are written whole (a temporary file, then a rename), so that
    a torn or foreign file is compiled again, not loaded."""

    def __init__(self, folder: str, fallback, fill: bool):
        self.folder, self.fallback, self.fill = folder, fallback, fill

    def load(self, name: str) -> bytes | None:
        if not os.path.exists(path := os.path.join(self.folder, name)):
            found = self.fallback.load(name)
            if found is not None and self.fill:  # compiled before `compile` ran: keep it too
                _write_checked(self.folder, name, found)
            return found
        return _read_checked(path)

    def save(self, name: str, cubin: bytes, source: str) -> None:
        if not (self.fill and _write_checked(self.folder, name, cubin)):
            self.fallback.save(name, cubin, source)


def _read_checked(path: str) -> bytes | None:
    """The payload of a file _write_checked wrote; None where it is missing or torn."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError:
        return None
    digest, payload = data[:32], data[32:]
    return payload if hashlib.sha256(payload).digest() == digest else None


def _write_checked(folder: str, name: str, payload: bytes) -> bool:
    """Put the payload, after its SHA-256, in the folder as one whole file; False where the
    folder cannot be written."""
    import tempfile  # here: only `compile` writes (a job that imports it pays 7 ms)

    try:
        os.makedirs(folder, exist_ok=True)
        fd, temp = tempfile.mkstemp(dir=folder, prefix=".part-")
        with os.fdopen(fd, "wb") as f:
            f.write(hashlib.sha256(payload).digest() + payload)
        os.replace(temp, os.path.join(folder, name))
        return True
    except OSError:  # a folder it may not write (a read-only install)
        return False
