"""Running out of GPU memory never gives a wrong result: a CuPy pool limit sends the sort out of
core (same result), and an OOM the budget did not foresee ends the job with one message.

`pytest -m gpu tests/job/test_oom_gpu.py` on one GPU; under `mpirun -n 4 python -m pytest --with-mpi
-m gpu` the first test runs on four ranks and the single-process ones are skipped. Skipped where
no GPU is found. The same promises without a GPU: tests/test_gpu_safety.py.
"""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

import distsort
from distsort import gpu_safety
from distsort.outofcore import sort as ooc
from distsort.runtime import get_runtime

MPI = pytest.importorskip("mpi4py.MPI")
COMM = MPI.COMM_WORLD
MiB = 1 << 20

pytestmark = pytest.mark.gpu


@pytest.fixture
def pool():
    """CuPy's default pool, emptied; its limit is put back afterwards."""
    import cupy

    pool = cupy.get_default_memory_pool()
    limit = pool.get_limit()
    pool.free_all_blocks()
    yield pool
    pool.free_all_blocks()
    pool.set_limit(size=limit)


def single_process():
    if COMM.Get_size() > 1:
        pytest.skip("one process: an OOM on one rank of several ends the whole job")


def test_the_installed_cupy_is_not_one_that_sorts_wrongly_on_oom():
    import cupy

    assert not gpu_safety.unsafe_cupy(cupy.__version__), cupy.__version__


def test_a_pool_limit_sends_the_sort_out_of_core_with_the_same_result(pool):
    x = np.random.default_rng([COMM.Get_rank(), 5]).integers(0, 2**32, 4 * MiB, dtype=np.uint32)
    pool.set_limit(size=pool.used_bytes() + 64 * MiB)  # budget 70%: below the ~4x 16 MiB needed
    # every rank takes the out-of-core path
    assert ooc.plan(get_runtime(COMM, "gpu"), x, None) is not None
    shard = distsort.sort(x, backend="gpu")
    got = np.concatenate(COMM.allgather(np.asarray(shard)))
    np.testing.assert_array_equal(got, np.sort(np.concatenate(COMM.allgather(x))))


def test_an_unforeseen_oom_in_the_in_memory_sort_raises_and_returns_nothing(pool):
    single_process()
    import cupy

    x = cupy.arange(32 * MiB, dtype=cupy.uint32)[::-1]  # 128 MiB
    pool.set_limit(size=pool.used_bytes() + 16 * MiB)  # the budget given below is far above it
    with pytest.raises(Exception) as caught:
        distsort.sort(x, backend="gpu", device_memory="64GiB")
    assert gpu_safety.is_out_of_memory(caught.value), repr(caught.value)


def test_the_cli_turns_an_oom_into_one_message_and_leaves_no_output(tmp_path):
    single_process()
    np.save(tmp_path / "in.npy", np.random.default_rng(1).integers(0, 2**32, 32 * MiB,
                                                                    dtype=np.uint32))
    env = dict(os.environ, PYTHONPATH=os.getcwd(), CUPY_GPU_MEMORY_LIMIT=str(160 * MiB))
    env.pop("DISTSORT_BACKEND", None)
    cmd = [sys.executable, "-m", "distsort", "sort", "in.npy", "-o", "out.npy", "--backend",
           "gpu", "--device-memory", "64GiB", "--verify"]  # --verify: a wrong sort would say so
    run = subprocess.run(cmd, capture_output=True, text=True, timeout=120, env=env, cwd=tmp_path)
    assert run.returncode == 2, run.stderr
    assert run.stderr.count("distsort: error:") == 1, run.stderr
    assert "ran out of GPU memory" in run.stderr and "Traceback" not in run.stderr
    assert os.listdir(tmp_path) == ["in.npy"]
