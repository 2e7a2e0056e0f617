"""The out-of-core sort from the command line: `mpiexec -n 4 python -m distsort sort ...
--device-memory 1MiB --verify` on a file whose shards need many runs each."""

from __future__ import annotations

import os

import numpy as np
from test_cli import distsort, mixed_keys


def test_sort_with_a_small_device_budget_matches_numpy(tmp_path):
    x = mixed_keys("uint32", n=400_000)  # 2.4M keys: 600k per rank, 1MiB fits 64k of them
    np.save(tmp_path / "in.npy", x)
    run = distsort("sort", "in.npy", "-o", "out.npy", "--device-memory", "1MiB", "--verify",
                   "--report", "report.json", cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    np.testing.assert_array_equal(np.load(tmp_path / "out.npy"), np.sort(x))
    assert sorted(os.listdir(tmp_path)) == ["in.npy", "out.npy", "report.json"]


def test_a_bad_size_is_one_clear_message(tmp_path):
    np.save(tmp_path / "in.npy", np.arange(10, dtype=np.int32))
    run = distsort("sort", "in.npy", "-o", "out.npy", "--device-memory", "lots", ranks=1,
                   cwd=tmp_path)
    assert run.returncode == 2
    assert "--device-memory" in run.stderr and "not a size" in run.stderr
    assert not (tmp_path / "out.npy").exists()
