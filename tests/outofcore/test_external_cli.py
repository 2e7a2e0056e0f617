"""The out-of-core sort from the command line: `mpiexec -n 4 python -m distsort sort ...
--device-memory 1MiB --verify` on a file whose shards need many runs each."""

from __future__ import annotations

import os

import numpy as np
import pytest
from helpers import complex_keys, distsort, mixed_keys, string_keys, structured_rows


def test_sort_with_a_small_device_budget_matches_numpy(tmp_path):
    x = mixed_keys("uint32", n=400_000)  # 2.4M keys: 600k per rank, 1MiB runs hold ~52k
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


def test_values_stable_argsort_and_records_out_of_core(tmp_path):
    keys = mixed_keys("float32", n=100_000)  # 600k keys: many runs per rank at 256KiB
    np.save(tmp_path / "k.npy", keys)
    np.save(tmp_path / "v.npy", np.arange(len(keys), dtype=np.int64))
    budget = ["--device-memory", "256KiB"]
    run = distsort("sort", "k.npy", "-o", "s.npy", "--values", "v.npy", "--stable", "--verify",
                   *budget, cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    order = np.argsort(keys, kind="stable")
    np.testing.assert_array_equal(np.load(tmp_path / "s.values.npy"), order)
    assert np.load(tmp_path / "s.npy").tobytes() == keys[order].tobytes()
    stamps = np.arange(len(keys)).astype("datetime64[us]")  # a payload of any dtype
    np.save(tmp_path / "t.npy", stamps)
    run = distsort("sort", "k.npy", "-o", "s.npy", "--values", "t.npy", "--stable", "--verify",
                   *budget, cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    np.testing.assert_array_equal(np.load(tmp_path / "s.values.npy"), stamps[order])
    run = distsort("sort", "k.npy", "-o", "p.npy", "--argsort", "--descending", *budget,
                   ranks=3, cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    with np.errstate(invalid="ignore"):  # signalling NaNs among the random bit patterns
        descending = np.where(np.isnan(keys), 0, -keys.astype(np.float64))
    ref = np.lexsort((descending, np.isnan(keys)))  # stable: ties (and NaNs) in input order
    np.testing.assert_array_equal(np.load(tmp_path / "p.npy"), ref)
    records = np.random.default_rng(1).integers(0, 4, (60_000, 100), dtype=np.uint8)
    records.tofile(tmp_path / "r.dat")
    run = distsort("sort", "r.dat", "-o", "o.dat", "--record-size", "100", "--key-size", "10",
                   "--verify", *budget, cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    out = np.fromfile(tmp_path / "o.dat", dtype=np.uint8).reshape(-1, 100)
    order = np.lexsort([records[:, i] for i in range(9, -1, -1)])  # stable, by 10 key bytes
    np.testing.assert_array_equal(out, records[order])



@pytest.mark.parametrize("dtype", ["S10", "U3", "record"])
def test_values_of_strings_and_records_out_of_core(tmp_path, dtype):
    """Values that travel as rows of bytes come back as their dtype out of core too (the
    writer took the restored elements for rows of the wrong shape)."""
    keys = np.random.default_rng(2).integers(0, 1000, 20_000).astype(np.uint32)
    if dtype == "record":
        values = np.array([(i, str(i).encode()) for i in range(len(keys))],
                          dtype=[("a", "<u4"), ("b", "S6")])
    else:
        values = np.arange(len(keys)).astype(dtype)
    np.save(tmp_path / "k.npy", keys)
    np.save(tmp_path / "v.npy", values)
    run = distsort("sort", "k.npy", "-o", "o.npy", "--values", "v.npy", "--verify",
                   "--device-memory", "64KiB", ranks=2, cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    order = np.argsort(keys, kind="stable")
    assert np.load(tmp_path / "o.values.npy").tobytes() == values[order].tobytes()

@pytest.mark.parametrize("budget", [[], ["--device-memory", "64KiB"]])
def test_verify_fails_a_wrong_sort_and_publishes_nothing(tmp_path, monkeypatch, capsys, budget):
    """A sort that loses one key (a bug stood in by a wrapper) is caught by --verify, in memory
    and out of core: one message, exit 2, no output and no temporary file."""
    from distsort import api
    from distsort.cli import main
    from distsort.outofcore import merge as ooc_merge

    def lossy(sort):
        def wrapped(*args, **kwargs):
            out = sort(*args, **kwargs)
            first = out[0] if isinstance(out, list) else out
            first[:1] = first[1:2]  # one key written over by its neighbour
            return out
        return wrapped

    monkeypatch.setattr(api, "sort", lossy(api.sort))
    monkeypatch.setattr(ooc_merge, "sort_round", lossy(ooc_merge.sort_round))
    np.save(tmp_path / "in.npy", np.arange(50_000, dtype=np.uint32)[::-1])
    code = main(["sort", str(tmp_path / "in.npy"), "-o", str(tmp_path / "out.npy"), "--verify",
                 "--backend", "cpu", *budget])
    assert code == 2 and "--verify failed, nothing written" in capsys.readouterr().err
    assert sorted(os.listdir(tmp_path)) == ["in.npy"]


@pytest.mark.parametrize("kind", ["complex", "unicode", "structured"])
@pytest.mark.parametrize("fault", ["swapped", "replaced"])
@pytest.mark.parametrize("budget", [[], ["--device-memory", "64KiB"]])
def test_verify_fails_a_wrong_sort_of_rows_that_sort_by_their_fields(tmp_path, monkeypatch,
                                                                      capsys, kind, fault,
                                                                      budget):
    """--verify of complex numbers, strings and structured rows (ordered by their fields' keys,
    their bytes hashed) catches two rows out of order and a row written over by another."""
    from distsort import api
    from distsort.cli import main

    keys = {"complex": complex_keys(20_000, 0), "unicode": string_keys("U", 20_000, 0),
            "structured": structured_rows(20_000, 0)}[kind]

    def wrong(*args, **kwargs):
        out = sort(*args, **kwargs)
        out[[0, -1]] = out[[-1, -1]] if fault == "replaced" else out[[-1, 0]]
        return out

    sort = api.sort
    monkeypatch.setattr(api, "sort", wrong)
    np.save(tmp_path / "in.npy", keys)
    code = main(["sort", str(tmp_path / "in.npy"), "-o", str(tmp_path / "out.npy"), "--verify",
                 "--backend", "cpu", *budget])
    said = capsys.readouterr().err
    assert code == 2 and "--verify failed, nothing written" in said, said
    assert ("checksum" if fault == "replaced" else "out of order") in said, said
    assert sorted(os.listdir(tmp_path)) == ["in.npy"]


@pytest.mark.parametrize("how", ["", ":term"])  # SIGKILL, SIGTERM
def test_a_rank_killed_writing_behind_the_rounds_leaves_nothing(tmp_path, monkeypatch, how):
    """The output is written on a thread of its own (outofcore/writes.py): a rank killed there
    ends the job on every rank, and neither output nor temporary file is left."""
    np.save(tmp_path / "in.npy", mixed_keys("uint32", n=50_000))
    monkeypatch.setenv("DISTSORT_FAULT", f"written:1{how}")
    run = distsort("sort", "in.npy", "-o", "out.npy", "--device-memory", "1MiB", cwd=tmp_path)
    assert "injected fault written:1" in run.stderr
    assert run.returncode != 0
    assert os.listdir(tmp_path) == ["in.npy"]
