"""The CPU backend's C kernels (merge.c: merges of sorted runs; scatter.c: the partition of
keys and their values by destination; push.c: its second pass straight into the receivers'
memory; lsd.c: the radix sort; hash.c: the checksum's sum of
hashes; descent.c: the first descent of a column; codes.c: numbers to their order-preserving
codes and back), compiled into one library once per machine; and the output guard's watcher
program (io/watch.c), built the same way.

The C compiler Python was built with (sysconfig's CC, else `cc`) builds it into distsort's
kernel cache (cuda_source.kernel_cache), else the package's own kernel folder (where the Docker
image builds it: $DISTSORT_KERNEL_CACHE may name a mounted folder of CUDA kernels there), else
the user's cache folder, the first that can be written, under a name that holds a hash of the
sources; a compile takes a fraction of a second, and the library is looked for in the same
folders first. Where no compiler works, library() is None and callers use NumPy.
"""

from __future__ import annotations

import ctypes
import functools
import hashlib
import os

import numpy as np

from ..cuda_source import kernel_cache

HERE = os.path.dirname(__file__)
SOURCES = [os.path.join(HERE, name)
           for name in ("merge.c", "scatter.c", "push.c", "lsd.c", "hash.c", "descent.c",
                        "codes.c", "sorted.c")]
# the sources include them: part of the build's name
HEADERS = [os.path.join(HERE, name) for name in ("widest.h", "code.h", "classify.h", "mix.h")]
PACKAGE = os.path.dirname(HERE)
FLAGS = ["-O3", "-std=c99", "-shared", "-fPIC"]
WATCHER = os.path.join(PACKAGE, "io", "watch.c")
WATCHER_FLAGS = ["-O2", "-std=c99"]
_P, _N = ctypes.c_void_p, ctypes.c_int64


def library_path() -> str | None:
    """The compiled library a CPU rank uses (built now if it was not), or None."""
    lib = library()
    return None if lib is None else lib._name


SCRATCH_SLACK = 1.25  # a scratch at most this many times the keys serves as their second buffer


def fitting(scratch: np.ndarray | None, keys: np.ndarray) -> np.ndarray | None:
    """scratch's first len(keys) rows as the kernels' second buffer for keys, or None: it must
    be of keys' dtype, 1-D, contiguous, writable, apart from keys and at most SCRATCH_SLACK
    times as long (a result that ends in a far larger buffer would keep all of it alive)."""
    fits = (scratch is not None and scratch.dtype == keys.dtype and scratch.ndim == 1
            and len(keys) <= len(scratch) <= SCRATCH_SLACK * len(keys) + 1024
            and scratch.flags.c_contiguous and scratch.flags.writeable
            and not np.may_share_memory(scratch, keys))
    return scratch[: len(keys)] if fits else None


def second_buffer(scratch: np.ndarray | None, keys: np.ndarray) -> np.ndarray:
    """The kernels' second buffer for keys: the scratch where it fits (fitting), else new."""
    room = fitting(scratch, keys)
    return np.empty_like(keys) if room is None else room


def pointer(array: np.ndarray, index: int = 0) -> ctypes.c_void_p:
    """The address of array[index] (1-D, contiguous), for a kernel's argument."""
    return ctypes.c_void_p(array.ctypes.data + index * array.itemsize)


@functools.cache
def library() -> ctypes.CDLL | None:
    path = _built("cpu", SOURCES, HEADERS, FLAGS, ".so")
    return None if path is None else _load(path)


@functools.cache
def watcher() -> str | None:
    """The path of the guard's watcher program (io/watch.c), built now if it was not, or None
    (io/guard.py then runs its Python watcher)."""
    return _built("watch", [WATCHER], [], WATCHER_FLAGS, "")


def _built(kind: str, sources: list[str], headers: list[str], flags: list[str],
           suffix: str) -> str | None:
    """The path of the build of the C sources with flags (they and the headers they include
    are part of the build's name), found in or built into the first folder that takes it."""
    text = b"".join(_read(path) for path in sources + headers)
    digest = hashlib.sha256(text + " ".join(flags).encode()).hexdigest()[:16]
    name = f"{kind}-{digest}{suffix}"
    user = os.path.join(os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"),
                        "distsort")
    folders = list(dict.fromkeys([kernel_cache(), os.path.join(PACKAGE, "kernels"), user]))
    for folder in folders:
        if os.path.exists(os.path.join(folder, name)):
            return os.path.join(folder, name)
    for folder in folders:
        for compiler in filter(None, _compilers()):
            built = _build([*compiler, *flags, *sources], folder, name)
            if built:
                return built
    return None


def _read(path: str) -> bytes:
    with open(path, "rb") as f:
        return f.read()


def _compilers() -> list[list[str]]:
    """The C compilers to try: Python's own (sysconfig's CC), then cc. Their modules are
    imported here, where a process builds the library (a job that finds it built imports them
    not: 5 ms of every rank's start)."""
    import shlex
    import sysconfig

    return [shlex.split(sysconfig.get_config_var("CC") or ""), ["cc"]]


def _build(command: list[str], folder: str, name: str) -> str | None:
    """Run the compiler's command with `-o` folder/name (by a temporary name, renamed: ranks
    may race); its path, or None where the compiler or the folder fails. The build may be run
    and read by every user (a shared cache folder)."""
    import subprocess
    import tempfile

    try:
        os.makedirs(folder, exist_ok=True)
        fd, temp = tempfile.mkstemp(dir=folder, prefix=".build-")
        os.close(fd)
    except OSError:
        return None
    try:
        done = subprocess.run([*command, "-o", temp], capture_output=True, timeout=120)
        if done.returncode != 0:
            return None
        os.chmod(temp, 0o755)
        os.replace(temp, os.path.join(folder, name))
        return os.path.join(folder, name)
    except (OSError, subprocess.SubprocessError):
        return None
    finally:
        if os.path.exists(temp):
            os.unlink(temp)


def _load(path: str) -> ctypes.CDLL | None:
    try:
        lib = ctypes.CDLL(path)
    except OSError:
        return None
    for width in (8, 16, 32, 64):
        getattr(lib, f"merge_u{width}").argtypes = [_P, _N] * 2 + [_P]
        getattr(lib, f"merge_positions_u{width}").argtypes = [_P, _P, _N] * 2 + [_P] * 2
        getattr(lib, f"hash_sum_u{width}").argtypes = [_P, _N]
        getattr(lib, f"first_descent_u{width}").argtypes = [_P, _N]
        getattr(lib, f"first_descent_u{width}").restype = ctypes.c_int64
        getattr(lib, f"hash_sum_u{width}").restype = ctypes.c_uint64
        for kind in "uif"[: 3 if width > 16 else 2]:
            for way in ("", "_desc"):
                getattr(lib, f"sorted_sum_{kind}{width}{way}").argtypes = [_P, _N, _N,
                                                                            ctypes.c_int, _P]
                getattr(lib, f"sorted_sum_{kind}{width}{way}").restype = ctypes.c_uint64
        for values in (8, 16, 32, 64):
            getattr(lib, f"hash_pairs_u{width}_v{values}").argtypes = [_P, _P, _N]
            getattr(lib, f"hash_pairs_u{width}_v{values}").restype = ctypes.c_uint64
    for width, word in ((8, ctypes.c_uint8), (16, ctypes.c_uint16), (32, ctypes.c_uint32),
                        (64, ctypes.c_uint64)):
        for way in ("encode", "decode"):
            getattr(lib, f"{way}_u{width}").argtypes = [_P, _P, _N] + [word] * 5
    lib.hash_rows.argtypes = [_P, _N, _P, _N, _N]
    for limit in (lib.push_stage_bytes, lib.push_min_ranks, lib.push_max_ranks):
        limit.restype = ctypes.c_int64
    lib.hash_rows.restype = ctypes.c_uint64
    for width in (32, 64):
        getattr(lib, f"classify_u{width}").argtypes = [_P, _N, _N, _P, _P, _N, _N, _P, _P]
        for way in ("_compare", "_search", "_permute"):  # each way alone, for the tests
            if hasattr(lib, f"classify_u{width}{way}"):  # _permute: x86-64 builds only
                getattr(lib, f"classify_u{width}{way}").argtypes = [_P, _N, _N, _P, _P, _N,
                                                                    _N, _P, _P]
        getattr(lib, f"scatter_u{width}").argtypes = [_P, _N, _P, _P, _P]
        getattr(lib, f"push_u{width}").argtypes = [_P, _N, _N, _P, _P, _N, _N, _P, _P, _P]
        getattr(lib, f"count_u{width}_blocks").argtypes = [_P, _N, _N, _P, _P, _N, _N, _P]
        getattr(lib, f"classify_u{width}_coded").argtypes = [_P, _N, _N, _P, _P, _N, _N, _P,
                                                             _P, _P]
        getattr(lib, f"scatter_u{width}_coded").argtypes = [_P, _N, _P, _P, _P, _P]
        for coded in ("", "_coded"):
            getattr(lib, f"count_u{width}_few{coded}").argtypes = [_P, _N, _N, _P, _P, _N, _N,
                                                                   _P, _P]
            getattr(lib, f"scatter_u{width}_few{coded}").argtypes = [_P, _N, _N, _P, _P, _N,
                                                                     _N, _P, _P, _P]
        getattr(lib, f"lsd_u{width}").argtypes = [_P, _P, _N]
        for values in (32, 64):
            getattr(lib, f"lsd_pairs_u{width}_v{values}").argtypes = [_P] * 4 + [_N]
    return lib
