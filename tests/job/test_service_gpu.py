"""The sort service on the GPU (`distsort serve`, DISTSORT_BACKEND=gpu) at 1 rank and at 2 ranks
on one GPU (they fold: steps/fold.py): jobs in memory, out of core, with values and argsort,
answered as the command line answers them, a bad job between them, and the service still up;
a job that runs out of GPU memory fails alone and gives its memory back. Skipped where no GPU
is found.
"""

from __future__ import annotations

import os

import numpy as np
import pytest
from helpers import Service

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize("ranks", [1, 2])
def test_gpu_service_answers_as_the_command_line(tmp_path, monkeypatch, ranks):
    monkeypatch.chdir(tmp_path)
    rng = np.random.default_rng(ranks)
    keys = rng.standard_normal(1 << 20).astype(np.float32)
    keys[::97] = np.nan
    np.save(tmp_path / "in.npy", keys)
    np.save(tmp_path / "v.npy", np.arange(len(keys), dtype=np.int64))
    service = Service(tmp_path, "--root", str(tmp_path), ranks=ranks, backend="gpu")
    try:
        assert f"serving {ranks} rank(s)" in service.started()
        jobs = [["sort", "in.npy", "-o", "a.npy", "--verify"],
                ["sort", "in.npy", "-o", "b.npy", "--device-memory", "1MiB", "--descending"],
                ["sort", "missing.npy", "-o", "x.npy"],
                ["sort", "in.npy", "-o", "c.npy", "--values", "v.npy", "--values-output",
                 "cv.npy", "--stable"],
                ["sort", "in.npy", "-o", "d.npy", "--argsort"]]
        replies = [service.client.submit(job) for job in jobs]
        for i, reply in enumerate(replies):
            assert reply["exit"] == (2 if i == 2 else 0), reply
        assert "missing.npy does not exist" in replies[2]["error"]
        order = np.argsort(keys, kind="stable")
        np.testing.assert_array_equal(np.load("a.npy"), keys[order])
        descending = np.concatenate([np.sort(keys[~np.isnan(keys)])[::-1],
                                     keys[np.isnan(keys)]])
        np.testing.assert_array_equal(np.load("b.npy"), descending)
        np.testing.assert_array_equal(np.load("cv.npy"), order)
        np.testing.assert_array_equal(np.load("d.npy"), order)
        assert not (tmp_path / "x.npy").exists()
        assert service.client.status()["running"] is None
    finally:
        assert service.stop() == 0


@pytest.mark.parametrize("ranks, limit_mib", [(1, 96), (2, 112)])
def test_a_job_that_runs_out_of_gpu_memory_fails_alone(tmp_path, monkeypatch, ranks, limit_mib):
    """Each rank's CuPy pool held to limit_mib: a job of 64 MiB of keys told it has 64 GiB sorts
    in memory and runs out (at 1 rank in its sort; at 2 ranks on one GPU rank 0's sort of both
    halves, folded), failing with the message; the same job within the default budget (out of core)
    then runs in the same memory, so the failed job's memory went back to the pools."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("CUPY_GPU_MEMORY_LIMIT", str(limit_mib << 20))
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")  # ranks on GPUs of their own would not fold
    keys = np.random.default_rng(7).integers(0, 2**32, 16 << 20, dtype=np.uint32)
    np.save(tmp_path / "in.npy", keys)
    service = Service(tmp_path, "--root", str(tmp_path), ranks=ranks, backend="gpu")
    try:
        assert f"serving {ranks} rank(s)" in service.started()
        too_big = ["sort", "in.npy", "-o", "x.npy", "--device-memory", "64GiB"]
        fits = ["sort", "in.npy", "-o", "a.npy", "--verify"]
        replies = [service.client.submit(job) for job in (too_big, fits, too_big, fits)]
        for reply in replies[::2]:
            assert reply["exit"] == 2 and "ran out of GPU memory" in reply["error"], reply
        for reply in replies[1::2]:
            assert reply["exit"] == 0, reply
        np.testing.assert_array_equal(np.load("a.npy"), np.sort(keys))
        assert sorted(os.listdir(tmp_path)) == ["a.npy", "in.npy", "s.sock"]
        assert service.client.status()["running"] is None
    finally:
        assert service.stop() == 0
