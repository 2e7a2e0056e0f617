"""The sort service on the GPU (`distsort serve`, DISTSORT_BACKEND=gpu) at 1 rank and at 2 ranks
on one GPU (they fold: steps/fold.py): jobs in memory, out of core, with values and argsort,
answered as the command line answers them, a bad job between them, and the service still up.
Skipped where no GPU is found.
"""

from __future__ import annotations

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
