"""The CUDA driver started, and the rank's GPU's context made, on a thread of its own while the
command line's interpreter imports NumPy, MPI and CuPy.

A rank's launch is a line of waits: the interpreter, NumPy, MPI's start, CuPy, then the CUDA
driver's start and the GPU's context (0.1-0.2 s, bench/RESULTS.md run 347), all before the job
reads a byte. The driver's calls let go of the interpreter's lock, so they can run beside the
imports: the thread calls cuInit and, where the GPU the rank will bind is known before MPI
starts (binding.device_from_env, or the one GPU this process sees), retains that GPU's primary
context, the one CuPy's runtime then takes up as it is. Only the command line does this (a
library's import must not start CUDA: a program may fork after it), only for the commands
that work on a GPU, and not where the CPU backend is asked for. Any failure is left for the
job's own start to meet and report.
"""

from __future__ import annotations

import atexit
import ctypes
import importlib.util
import threading
from collections.abc import Mapping

from . import settings
from .binding import device_from_env
from .errors import DistsortError
from .workers import unbind

COMMANDS = ("sort", "check", "serve", "bench")  # the commands whose work starts CUDA


def start(env: Mapping[str, str], words: list[str]) -> threading.Thread | None:
    """Start the thread where the command line's words name a GPU command (see the module
    doc); the process joins it before it exits. None where nothing is started."""
    if not any(word in COMMANDS for word in words) or _cpu_asked(env, words):
        return None
    if importlib.util.find_spec("cupy") is None:  # the job will sort on CPUs
        return None
    thread = threading.Thread(target=_open, args=(dict(env),), daemon=True,
                              name="distsort-gpu-start")
    thread.start()
    atexit.register(thread.join)  # the driver is not left half started as the process ends
    return thread


def _cpu_asked(env: Mapping[str, str], words: list[str]) -> bool:
    after = dict(zip(words, words[1:]))
    asked = after.get("--backend") or next(
        (w.split("=", 1)[1] for w in words if w.startswith("--backend=")), None)
    try:
        return (asked or settings.value("DISTSORT_BACKEND", env)).strip() == "cpu"
    except DistsortError:  # the job's own start says what is wrong with it
        return False


def _open(env: dict) -> None:
    unbind()  # not on the core the launcher bound the rank to, where the imports run
    try:
        cuda = ctypes.CDLL("libcuda.so.1")
    except OSError:
        return
    count = ctypes.c_int(0)
    if cuda.cuInit(0) != 0 or cuda.cuDeviceGetCount(ctypes.byref(count)) != 0:
        return
    try:
        device = device_from_env(env, count.value)
    except ValueError:  # the job's own start says what is wrong with it
        return
    if device is None and count.value == 1:
        device = 0
    handle, context = ctypes.c_int(0), ctypes.c_void_p()
    if device is not None and cuda.cuDeviceGet(ctypes.byref(handle), device) == 0:
        cuda.cuDevicePrimaryCtxRetain(ctypes.byref(context), handle)
