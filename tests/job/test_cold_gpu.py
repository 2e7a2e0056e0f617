"""A fresh process finds every CUDA kernel it uses once `mpirun -n 2 python -m distsort
compile` has run (on one GPU): file jobs of every kind at 1 rank, and at 2 ranks sharing the GPU
(folded onto rank 0, and split: each rank sorts its share, as on two GPUs), each in a fresh HOME,
XDG_CACHE_HOME, CUPY_CACHE_DIR and CUDA_CACHE_PATH, leave no kernel compiled by NVRTC there:
each costs a cluster job (a fresh container) up to a second; nor does it run NVRTC at all
(CuPy's runs for its cache keys are answered from what `compile` kept). The driver's cache
(CUDA_CACHE_PATH) is not counted: every fresh process leaves one small module of PTX there
(named default_program, not one of the kernel cache's), at no measurable cost (bench/RESULTS.md,
run 324: 2 ranks, cold 2.71 s, warm 2.87 s). Skipped where no GPU is found.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys

import numpy as np
import pytest
from helpers import mpiexec

pytestmark = pytest.mark.gpu

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
NVRTC = ("HOME", "XDG_CACHE_HOME", "CUPY_CACHE_DIR")  # where CuPy may keep what NVRTC compiled
FRESH = NVRTC + ("CUDA_CACHE_PATH",)
WATCHED = os.path.join(os.path.dirname(os.path.abspath(__file__)), "watched", "distsort")


def _env(**more: str) -> dict:
    """On the first GPU alone: two ranks share it, folded or split, on a host of any GPUs."""
    env = dict(os.environ, DISTSORT_BACKEND="gpu", NCCL_NVLS_ENABLE="0", CUDA_VISIBLE_DEVICES="0",
               PYTHONFAULTHANDLER="1", **more)  # a crash shows its Python stack
    env["PYTHONPATH"] = os.pathsep.join([ROOT, env.get("PYTHONPATH", "")])
    return env


@pytest.fixture(scope="module")
def inputs(tmp_path_factory) -> dict:
    """The kernels compiled at two ranks as the README says (quick where they were), and the
    jobs' input files."""
    done = subprocess.run([mpiexec(), "-n", "2", sys.executable, "-m", "distsort", "compile"],
                          env=_env(), capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr
    folder = tmp_path_factory.mktemp("inputs")
    rng = np.random.default_rng(5)
    files = {"u32": rng.integers(0, 2**32, 1 << 26, dtype=np.uint32),
             "f64": rng.standard_normal(1 << 20),
             "i32": rng.integers(-1000, 1000, 1 << 20).astype(np.int32),
             "v": np.arange(1 << 20, dtype=np.int64)}
    for name, data in files.items():
        np.save(folder / f"{name}.npy", data)
    made = {name: str(folder / f"{name}.npy") for name in files}
    records = np.zeros((1 << 16, 100), np.uint8)  # 10-byte keys of 16 values: the ties' search
    records[:, 9] = rng.integers(0, 16, len(records))
    records[:, 10:] = rng.integers(0, 256, (len(records), 90))
    records.tofile(folder / "recs.dat")
    return dict(made, recs=str(folder / "recs.dat"))


def _jobs(inputs: dict, out: str) -> list[list[str]]:
    sorts = [[inputs["u32"], "-o", f"{out}/a.npy", "--verify"],
             [inputs["f64"], "-o", f"{out}/b.npy", "--values", inputs["v"], "--values-output",
              f"{out}/bv.npy", "--stable", "--verify"],
             [inputs["i32"], "-o", f"{out}/c.npy", "--argsort"],
             [inputs["f64"], "-o", f"{out}/d.npy", "--descending", "--device-memory", "4MiB"]]
    return [["sort", *args, "--quiet"] for args in sorts] + [["check", inputs["u32"],
                                                              f"{out}/a.npy"]]


def _compiled(fresh) -> list[str]:
    """The compiled kernels in the fresh folders NVRTC's output may go to, each with the names
    in it (CuPy keeps each one's source beside it: CUPY_CACHE_SAVE_CUDA_SOURCE)."""
    found = []
    for where, _, names in (step for folder in NVRTC for step in os.walk(fresh / folder)):
        for name in names:
            with open(os.path.join(where, name), "rb") as f:
                text = f.read()
            kernels = (re.findall(rb"__global__\s+void\s+(\w+)", text)
                       or re.findall(rb"(?:cupy_|_Z)\w*", text))
            if kernels:  # not a lock file
                found.append(f"{os.path.relpath(os.path.join(where, name), fresh)}: "
                             f"{sorted(set(k.decode() for k in kernels), key=len)[-6:]}")
    return found


@pytest.mark.parametrize("ranks, shared", [(1, "fold"), (2, "fold"), (2, "split")])
def test_a_fresh_job_compiles_no_kernel_after_compile(tmp_path, inputs, ranks, shared):
    fresh = {name: str(tmp_path / "fresh" / name) for name in FRESH}
    for path in fresh.values():
        os.makedirs(path)
    runs = tmp_path / "runs"
    env = _env(DISTSORT_SHARED_GPU=shared, CUPY_CACHE_SAVE_CUDA_SOURCE="1", NVRTC_RUNS=str(runs),
               **fresh)
    compiled: dict = {}
    for job in _jobs(inputs, str(tmp_path)):
        runs.mkdir()
        done = subprocess.run([mpiexec(), "-n", str(ranks), sys.executable, WATCHED, *job],
                              env=env, capture_output=True, text=True, timeout=300, cwd=tmp_path)
        assert done.returncode == 0, done.stderr
        for entry in _compiled(tmp_path / "fresh"):  # the driver's cache not: see the module doc
            compiled.setdefault(entry, " ".join(job[:2]))
        ranks_saw = [json.loads(f.read_text()) for f in sorted(runs.iterdir())]
        assert len(ranks_saw) == ranks and all(r["table"] > 0 for r in ranks_saw), ranks_saw
        for stack in (stack for r in ranks_saw for stack in r["runs"]):
            compiled.setdefault(f"NVRTC run for a cache key from\n{stack}", " ".join(job[:2]))
        shutil.rmtree(runs)
    assert not compiled, "compiled at run time:\n" + "\n".join(f"{job}: {entry}" for entry, job
                                                                 in compiled.items())
    np.testing.assert_array_equal(np.load(tmp_path / "c.npy"),
                                  np.argsort(np.load(inputs["i32"]), kind="stable"))


@pytest.mark.parametrize("ranks, shared", [(1, "fold"), (2, "split")])
def test_a_job_imports_no_sparse_matrices(tmp_path, inputs, ranks, shared):
    """A job loads what it uses: CuPy's sparse matrices, and SciPy's sparse package with them
    where SciPy is installed, cost a rank 0.2-0.6 s (bench/RESULTS.md, runs 438 and 443-449;
    distsort/arrays.py says which CuPy calls import them). Every kind of job here, and records
    whose keys tie (their sample and splitters' search on the device). Split: the path of
    ranks that each have a GPU (partition, exchange, landing)."""
    records = ["sort", inputs["recs"], "-o", f"{tmp_path}/r.dat", "--record-size", "100",
               "--key-size", "10", "--verify", "--quiet"]
    for job in _jobs(inputs, str(tmp_path)) + [records]:
        done = subprocess.run([mpiexec(), "-n", str(ranks), sys.executable, "-X", "importtime",
                               "-m", "distsort", *job], env=_env(DISTSORT_SHARED_GPU=shared),
                              capture_output=True, text=True, timeout=300, cwd=tmp_path)
        said = [line for line in done.stderr.splitlines() if not line.startswith("import time:")]
        assert done.returncode == 0, (job, "\n".join(said[-40:]))
        imported = {line.rsplit("|", 1)[-1].strip() for line in done.stderr.splitlines()
                    if line.startswith("import time:")}
        assert "distsort.api" in imported, job  # the ranks' imports are listed
        assert not imported & {"cupyx.scipy.sparse", "scipy.sparse"}, job

