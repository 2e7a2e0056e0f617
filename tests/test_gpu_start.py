"""The command line's GPU start beside its imports (gpu_start.py): started only for the GPU
commands, never where the CPU backend is asked for; on a GPU, the primary context of the GPU
the rank binds is made by the thread, and a job's CuPy then works in it."""

from __future__ import annotations

import subprocess
import sys
import threading

import pytest

from distsort import gpu_start


@pytest.mark.parametrize("words, env", [
    (["python", "-m", "distsort", "info"], {}),
    (["python", "-m", "distsort", "--version"], {}),
    (["python", "-m", "distsort", "gen", "uniform", "x.npy"], {}),
    (["python", "-m", "distsort", "sort", "in.npy", "-o", "o.npy", "--backend", "cpu"], {}),
    (["python", "-m", "distsort", "check", "in.npy", "o.npy", "--backend=cpu"], {}),
    (["python", "-m", "distsort", "sort", "in.npy", "-o", "o.npy"], {"DISTSORT_BACKEND": "cpu"}),
])
def test_nothing_starts_for_other_commands_or_the_cpu_backend(words, env, monkeypatch):
    monkeypatch.setattr(gpu_start.importlib.util, "find_spec", lambda name: object())  # CuPy
    assert gpu_start.start(env, words) is None


def test_a_gpu_command_starts_only_where_cupy_is(monkeypatch):
    started = []
    monkeypatch.setattr(gpu_start, "_open", lambda env: started.append(env))
    monkeypatch.setattr(gpu_start.importlib.util, "find_spec", lambda name: None)
    assert gpu_start.start({}, ["python", "-m", "distsort", "sort", "a", "-o", "b"]) is None
    monkeypatch.setattr(gpu_start.importlib.util, "find_spec", lambda name: object())
    monkeypatch.setattr(gpu_start.atexit, "register", lambda f: None)
    thread = gpu_start.start({"X": "1"}, ["python", "-m", "distsort", "sort", "a", "-o", "b"])
    assert isinstance(thread, threading.Thread)
    thread.join()
    assert started == [{"X": "1"}]


@pytest.mark.gpu
def test_the_thread_makes_the_bound_gpus_context_that_cupy_then_uses():
    """In a fresh process (no CUDA yet): the thread's work done, the primary context of the GPU
    DISTSORT_DEVICE names is active before CuPy is imported, and CuPy sorts in it."""
    probe = (
        "import ctypes, os\n"
        "from distsort import gpu_start\n"
        "os.environ['DISTSORT_DEVICE'] = '0'\n"
        "gpu_start.start(os.environ, ['sort']).join()\n"
        "cuda = ctypes.CDLL('libcuda.so.1')\n"
        "dev, flags, active = ctypes.c_int(), ctypes.c_uint(), ctypes.c_int()\n"
        "assert cuda.cuDeviceGet(ctypes.byref(dev), 0) == 0\n"
        "cuda.cuDevicePrimaryCtxGetState(dev, ctypes.byref(flags), ctypes.byref(active))\n"
        "print('active', active.value)\n"
        "import cupy\n"
        "x = cupy.sort(cupy.arange(1000, 0, -1))\n"
        "print('sorted', bool((x[1:] >= x[:-1]).all()))\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["active", "1", "sorted", "True"]
