"""The CPU backend's LSD radix sort (lsd.c, in clib.py's library) for plain unsigned keys, and
for pairs of such keys with 4- or 8-byte values (argsort: int64 positions as the values),
where it beats NumPy's sort on this machine (wins).

Why measured: where NumPy has no SIMD sort for the CPU, the radix sort is several times faster
(bench/RESULTS.md, session 32); where it has AVX-512's (x86-simd-sort), NumPy's may be the
faster. Where no C compiler works, available() is False and callers use NumPy.

Measured once a process (each of a job's ranks pays it, for each kind of sort), unless `compile`
measured every kind on this machine and stored the answers beside the C library
(measure_all): then each process reads them, as long as the CPU and NumPy are the same.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import platform
import time

import numpy as np

from . import clib

CALIBRATION = 1 << 18  # keys sorted both ways, once a process (or machine) a kind (wins)
MARGIN = 1.5  # how much faster the radix sort of keys must be there: in cache, where its lead
# over NumPy's sort is the largest. Pairs need none: their lead grows beyond the caches, where
# NumPy's argsort and gathers miss them, and a margin once sent a Xeon's pairs to NumPy at
# twice the time (bench/RESULTS.md, session 43)
SMALL = 1 << 16  # fewer keys: NumPy's sort (its call costs less; the choice is not worth it)


def available(keys: np.ndarray, values: np.ndarray | None = None,
              positions: bool = False) -> bool:
    """Is the radix sort the faster for these keys (and values; positions: an argsort's int64
    positions), on this machine?"""
    width = 8 if positions else 0 if values is None else values.dtype.itemsize
    return (isinstance(keys, np.ndarray) and keys.ndim == 1 and len(keys) >= SMALL
            and keys.dtype in (np.uint32, np.uint64)
            and (values is None or (isinstance(values, np.ndarray) and values.ndim == 1
                                    and values.dtype.itemsize in (4, 8)))
            and clib.library() is not None and wins(keys.dtype.itemsize, width))


KINDS = ((4, 0), (8, 0), (4, 4), (4, 8), (8, 4), (8, 8))  # (key, value bytes) sorts ask about


@functools.cache
def wins(itemsize: int, value_bytes: int = 0) -> bool:
    """Does the radix sort beat NumPy by MARGIN on CALIBRATION random keys of this width?
    With values of value_bytes, does it beat what NumPy has for pairs at all: a stable argsort
    and the gathers (its SIMD sort, where it has one, sorts keys alone: an AVX-512 machine's keys go
    to NumPy, its pairs to the radix sort, bench/RESULTS.md, session 39). The answer stored for
    this machine (measure_all), where there is one."""
    stored = stored_answers().get(f"{itemsize},{value_bytes}")
    return stored if isinstance(stored, bool) else _timed(itemsize, value_bytes)


def measure_all() -> None:
    """Time every kind of sort in KINDS now and store the answers beside the C library, where
    every process on this machine reads them (`compile`); nothing where it cannot be written,
    or where this machine's answers are there already (delete the file to measure anew)."""
    import tempfile  # here: a job that reads the answers writes none

    path = _store_path()
    if path is None or set(stored_answers()) >= {f"{k},{v}" for k, v in KINDS}:
        return
    answers = {"machine": _machine(), "wins": {f"{k},{v}": _timed(k, v) for k, v in KINDS}}
    try:
        fd, temp = tempfile.mkstemp(dir=os.path.dirname(path), prefix=".wins-")
    except OSError:
        return
    try:
        with os.fdopen(fd, "w") as f:
            json.dump(answers, f)
        os.chmod(temp, 0o644)  # every user's jobs may read it (mkstemp's is the owner's alone)
        os.replace(temp, path)  # whole, or not at all: ranks of other nodes may race
    except OSError:
        return
    finally:
        if os.path.exists(temp):
            os.unlink(temp)
    stored_answers.cache_clear()
    wins.cache_clear()


@functools.cache
def stored_answers() -> dict:
    """The answers measure_all stored for this machine, or {}."""
    try:
        with open(_store_path() or "") as f:
            data = json.load(f)
    except (OSError, ValueError):
        return {}
    if not isinstance(data, dict) or data.get("machine") != _machine():
        return {}
    answers = data.get("wins")
    return answers if isinstance(answers, dict) else {}


def _store_path() -> str | None:
    """Beside the C library: its name holds the sources' hash, so new kernels measure anew,
    and this file's the machine's (nodes of several kinds may share one kernel cache)."""
    library = clib.library_path()
    if library is None:
        return None
    machine = hashlib.sha256(_machine().encode()).hexdigest()[:12]
    return f"{os.path.splitext(library)[0]}.{machine}.wins.json"


def _machine() -> str:
    """What the answers depend on: the CPU's model and cores, and NumPy's version."""
    model = platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            model = next((line.split(":", 1)[1].strip() for line in f
                          if line.startswith("model name")), model)
    except OSError:
        pass
    return f"{model}; {os.cpu_count()} cores; NumPy {np.__version__}"


def _timed(itemsize: int, value_bytes: int) -> bool:
    """wins(), measured now."""
    dtype = np.dtype(f"u{itemsize}")
    keys = np.random.default_rng(0).integers(0, np.iinfo(dtype).max, CALIBRATION, dtype=dtype,
                                             endpoint=True)
    if not value_bytes:
        return MARGIN * _best(lambda: sort(keys)) < _best(lambda: np.sort(keys))
    values = np.arange(CALIBRATION, dtype=f"u{value_bytes}")

    def numpy_pairs() -> tuple[np.ndarray, np.ndarray]:
        order = np.argsort(keys, kind="stable")
        return keys[order], values[order]

    return _best(lambda: sort_pairs(keys, values)) < _best(numpy_pairs)


def _best(call) -> float:
    times = []
    for _ in range(2):  # the first pays for first touches
        started = time.perf_counter()
        call()
        times.append(time.perf_counter() - started)
    return min(times)


def sort(keys: np.ndarray, overwrite: bool = False, scratch: np.ndarray | None = None
         ) -> np.ndarray:
    """keys sorted (in their own memory where overwrite allows and the passes end there, else
    in scratch's, where it fits (clib.fitting): no new pages for the passes' second buffer)."""
    a = keys if overwrite and keys.flags.c_contiguous and keys.flags.writeable else keys.copy()
    b = clib.second_buffer(scratch, a)
    in_b = getattr(clib.library(), f"lsd_u{8 * a.dtype.itemsize}")(
        clib.pointer(a), clib.pointer(b), len(a))
    return b if in_b else a


def sort_pairs(keys: np.ndarray, values: np.ndarray,
               overwrite: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """(keys sorted, values in their keys' order); equal keys keep their input order. With
    overwrite, in their own memory where the passes end there."""
    mine = (overwrite and all(x.flags.c_contiguous and x.flags.writeable for x in (keys, values))
            and not np.may_share_memory(keys, values))  # the passes read one, write the other
    a, va = (keys, values) if mine else (keys.copy(), values.copy())
    b, vb = np.empty_like(a), np.empty_like(va)
    moved = va.view(f"u{va.dtype.itemsize}")  # the values' bytes move as unsigned words
    in_b = getattr(clib.library(), f"lsd_pairs_u{8 * a.dtype.itemsize}_v{8 * va.itemsize}")(
        clib.pointer(a), clib.pointer(moved), clib.pointer(b), clib.pointer(vb), len(a))
    return (b, vb) if in_b else (a, va)


def argsort(keys: np.ndarray) -> np.ndarray:
    """The int64 positions that sort keys, equal keys in input order."""
    return sort_pairs(keys, np.arange(len(keys), dtype=np.int64))[1]
