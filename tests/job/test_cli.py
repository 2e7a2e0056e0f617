"""The command line end to end: `mpiexec -n 4 python -m distsort ...` in a subprocess, on files.

Each test launches real ranks, so these are the slowest tests; they run once per CI (not under
pytest-mpi). Inputs mix the distributions the product promises to handle.
"""

from __future__ import annotations

import argparse
import errno
import functools
import json
import os
import re
import shutil
import signal
import stat
import subprocess
import sys
import time

import numpy as np
import pytest
from helpers import (
    bool_or_time_order,
    complex_keys,
    distsort,
    mixed_keys,
    mpiexec,
    string_keys,
    structured_rows,
)
from mpi4py import MPI

import distsort as distsort_module
from distsort import commands
from distsort.cli import parse_count
from distsort.errors import DistsortError
from distsort.io.writer import TEMP_MARK

DTYPES = ["int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64",
          "float16", "float32", "float64", ">i4", ">f8"]


@pytest.mark.parametrize("dtype", DTYPES)
def test_sort_npy_matches_numpy(tmp_path, dtype):
    x = mixed_keys(dtype)
    np.save(tmp_path / "in.npy", x)
    run = distsort("sort", "in.npy", "-o", "out.npy", "--verify", cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    out = np.load(tmp_path / "out.npy")
    assert out.dtype == x.dtype
    np.testing.assert_array_equal(out, np.sort(x))
    assert sorted(os.listdir(tmp_path)) == ["in.npy", "out.npy"]  # no temporary left


@pytest.mark.parametrize("dtype", ["uint32", "uint64"])
def test_ranks_that_write_into_each_others_memory_sort_as_numpy(tmp_path, dtype):
    """Plain keys on 5 to 64 ranks of one node whose ranks reach each other's memory (the
    cma transport, where the kernel lets them): the partition writes each rank's keys
    straight into their receiver's area (push.c). The MPI tests run on 1 to 4 ranks."""
    x = mixed_keys(dtype, 30_000)
    np.save(tmp_path / "in.npy", x)
    run = distsort("sort", "in.npy", "-o", "out.npy", "--verify", ranks=6, cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    np.testing.assert_array_equal(np.load(tmp_path / "out.npy"), np.sort(x))


@pytest.mark.parametrize("budget", [[], ["--device-memory", "1MiB"]])
def test_the_outputs_are_made_before_the_input_is_read(tmp_path, monkeypatch, budget):
    """So their pages come in while the job reads and sorts (io/ahead.py), in memory and out of
    core; the values' output too."""
    from distsort.cli import main
    from distsort.outofcore import files

    made = []

    def watched(load):
        def read(*args, **kwargs):
            made.append(sum(TEMP_MARK in name for name in os.listdir(tmp_path)))
            return load(*args, **kwargs)
        return read

    monkeypatch.setattr(commands, "load", watched(commands.load))
    monkeypatch.setattr(files, "load", watched(files.load))
    np.save(tmp_path / "in.npy", np.arange(50_000, dtype=np.uint32)[::-1])
    np.save(tmp_path / "v.npy", np.arange(50_000, dtype=np.int64))
    code = main(["sort", str(tmp_path / "in.npy"), "-o", str(tmp_path / "out.npy"), "--values",
                 str(tmp_path / "v.npy"), "--quiet", "--backend", "cpu", *budget])
    assert code == 0 and np.array_equal(np.load(tmp_path / "out.npy"), np.arange(50_000))
    assert made and set(made) == {2}  # keys' and values' outputs, at every read


def test_sort_raw_descending_and_check(tmp_path):
    x = mixed_keys("float32")
    x.tofile(tmp_path / "in.bin")
    run = distsort("sort", "in.bin", "-o", "out.bin", "--dtype", "float32", "--descending",
                   "--verify", cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    out = np.fromfile(tmp_path / "out.bin", dtype=np.float32)
    ref = np.sort(x)
    nan = np.isnan(ref)
    np.testing.assert_array_equal(out, np.concatenate([ref[~nan][::-1], ref[nan]]))
    good = distsort("check", "in.bin", "out.bin", "--dtype", "float32", "--descending",
                    ranks=2, cwd=tmp_path)
    assert good.returncode == 0 and "OK" in good.stdout, good.stdout + good.stderr
    bad = distsort("check", "in.bin", "in.bin", "--dtype", "float32", ranks=3, cwd=tmp_path)
    assert bad.returncode == 1 and "FAILED" in bad.stdout
    np.save(tmp_path / "wide.npy", out.astype(np.float64))  # the right numbers, a wrong type
    wide = distsort("check", "in.bin", "wide.npy", "--dtype", "float32", ranks=2, cwd=tmp_path)
    assert wide.returncode == 1 and "FAILED" in wide.stdout and "float64" in wide.stdout


def test_records_without_a_key_size_are_keyed_by_the_whole_record_and_say_so(tmp_path):
    records = np.random.default_rng(2).integers(0, 3, (3000, 6), dtype=np.uint8)
    records.tofile(tmp_path / "in.dat")
    run = distsort("sort", "in.dat", "-o", "out.dat", "--record-size", "6", cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    assert "6-byte records with 6-byte keys" in run.stdout
    out = np.fromfile(tmp_path / "out.dat", dtype=np.uint8).reshape(-1, 6)
    assert list(map(bytes, out)) == sorted(map(bytes, records))


def test_records_come_out_in_memcmp_order(tmp_path):
    rng = np.random.default_rng(1)
    records = rng.integers(0, 256, (20000, 100), dtype=np.uint8)
    records[:5000, :9] = 7  # long shared prefixes: ties decided by the last key bytes
    records.tofile(tmp_path / "in.dat")
    run = distsort("sort", "in.dat", "-o", "out.dat", "--record-size", "100", "--key-size", "10",
                   "--verify", cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    out = np.fromfile(tmp_path / "out.dat", dtype=np.uint8).reshape(-1, 100)
    keys = [bytes(r[:10]) for r in out]
    assert keys == sorted(keys)
    assert sorted(map(bytes, out)) == sorted(map(bytes, records))


def test_values_stable_and_argsort(tmp_path):
    keys = mixed_keys("int16")
    np.save(tmp_path / "k.npy", keys)
    np.save(tmp_path / "v.npy", np.arange(len(keys), dtype=np.uint32))
    run = distsort("sort", "k.npy", "-o", "s.npy", "--values", "v.npy", "--stable", "--verify",
                   cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    order = np.argsort(keys, kind="stable")
    np.testing.assert_array_equal(np.load(tmp_path / "s.values.npy"), order)
    run = distsort("sort", "k.npy", "-o", "p.npy", "--argsort", ranks=3, cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    np.testing.assert_array_equal(np.load(tmp_path / "p.npy"), order)


@pytest.mark.parametrize("dtype", [">M8[us]", "m8[s]", "bool"])
@pytest.mark.parametrize("budget", [[], ["--device-memory", "64KiB"]])  # in memory, out of core
def test_files_of_bool_and_time_keys_sort_in_numpys_order(tmp_path, dtype, budget):
    rng = np.random.default_rng(5)
    if dtype == "bool":
        keys = rng.integers(0, 2, 40_000).astype(bool)
    else:
        bits = rng.integers(-1000, 1000, 40_000)
        bits[::9] = np.iinfo(np.int64).min  # NaT
        keys = bits.view(np.dtype(dtype).newbyteorder("=")).astype(dtype)
    np.save(tmp_path / "k.npy", keys)
    native = keys.astype(keys.dtype.newbyteorder("="))
    for way in ([], ["--descending"]):
        run = distsort("sort", "k.npy", "-o", "s.npy", "--verify", *way, *budget, cwd=tmp_path)
        assert run.returncode == 0, run.stderr
        got = np.load(tmp_path / "s.npy")
        assert got.dtype == keys.dtype
        want = native[bool_or_time_order(native, bool(way))]
        assert got.astype(native.dtype).tobytes() == want.tobytes()
        ok = check_run(tmp_path, "k.npy", "s.npy", *way)
        assert ok.returncode == 0 and "OK" in ok.stdout, ok.stdout + ok.stderr
        run = distsort("sort", "k.npy", "-o", "p.npy", "--argsort", *way, *budget, cwd=tmp_path)
        assert run.returncode == 0, run.stderr
        ok = check_run(tmp_path, "k.npy", "p.npy", "--argsort", *way)
        assert ok.returncode == 0 and "OK" in ok.stdout, ok.stdout + ok.stderr


def check_run(tmp_path, *args: str) -> subprocess.CompletedProcess:
    return distsort("check", *args, ranks=3, cwd=tmp_path)


@pytest.mark.parametrize("descending", [False, True])
def test_check_argsort_positions_permutation_order_and_stability(tmp_path, descending):
    """check --argsort passes a stable argsort (floats with NaN, -0.0 and many ties) and names
    what is wrong with a broken one: ties out of input order, keys out of order, a position
    twice."""
    keys = mixed_keys("float32", 2000)
    np.save(tmp_path / "k.npy", keys)
    way = ["--descending"] if descending else []
    run = distsort("sort", "k.npy", "-o", "p.npy", "--argsort", *way, cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    ok = check_run(tmp_path, "k.npy", "p.npy", "--argsort", *way)
    assert ok.returncode == 0 and "OK" in ok.stdout, ok.stdout + ok.stderr
    good = np.load(tmp_path / "p.npy")
    sorted_keys = keys[good]
    tie = next(i for i in range(len(good) - 1) if sorted_keys[i] == sorted_keys[i + 1])
    step = next(i for i in range(len(good) - 1)
                if not np.isnan(sorted_keys[i + 1]) and sorted_keys[i] != sorted_keys[i + 1])
    for broken, says in ((lambda p: p[[tie + 1, tie]], f"input position {good[tie + 1]}"),
                         (lambda p: p[[step + 1, step]], "out of order"),
                         (lambda p: p[[step, step]], "not a permutation")):
        bad = good.copy()
        rows = [tie, tie + 1] if "position" in says else [step, step + 1]
        bad[rows] = broken(good)
        np.save(tmp_path / "bad.npy", bad)
        run = check_run(tmp_path, "k.npy", "bad.npy", "--argsort", *way)
        assert run.returncode == 1 and says in run.stdout, run.stdout + run.stderr


def test_check_argsort_of_an_empty_raw_file(tmp_path):
    """An empty raw input (which cannot be mapped) and its empty argsort check OK."""
    (tmp_path / "k.bin").write_bytes(b"")
    run = distsort("sort", "k.bin", "-o", "p.bin", "--dtype", "uint32", "--argsort",
                   cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    ok = check_run(tmp_path, "k.bin", "p.bin", "--dtype", "uint32", "--argsort")
    assert ok.returncode == 0 and "OK" in ok.stdout, ok.stdout + ok.stderr


def test_check_values_each_value_stays_with_its_key(tmp_path):
    keys = mixed_keys("int32", 1500)
    np.save(tmp_path / "k.npy", keys)
    np.save(tmp_path / "v.npy", np.arange(len(keys)).astype("datetime64[s]"))
    run = distsort("sort", "k.npy", "-o", "s.npy", "--values", "v.npy", cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    pairs = ["--values", "v.npy", "s.values.npy"]
    ok = check_run(tmp_path, "k.npy", "s.npy", *pairs)
    assert ok.returncode == 0 and "OK" in ok.stdout, ok.stdout + ok.stderr
    out_keys, out_values = np.load(tmp_path / "s.npy"), np.load(tmp_path / "s.values.npy")
    i = int(np.flatnonzero(out_keys[1:] != out_keys[:-1])[0])  # two rows with different keys
    out_values[[i, i + 1]] = out_values[[i + 1, i]]  # their values swapped: same multiset
    np.save(tmp_path / "swapped.npy", out_values)
    run = check_run(tmp_path, "k.npy", "s.npy", "--values", "v.npy", "swapped.npy")
    assert run.returncode == 1 and "(key, value) pairs: a value left its key" in run.stdout, \
        run.stdout
    np.save(tmp_path / "short.npy", out_values[:-1])
    short = check_run(tmp_path, "k.npy", "s.npy", "--values", "v.npy", "short.npy")
    assert short.returncode == 2 and "values but s.npy holds" in short.stderr, short.stderr


@pytest.mark.parametrize("dtype", ["float64", "datetime64[s]"])
def test_check_stable_finds_equal_keys_out_of_input_order(tmp_path, dtype):
    """`check --values --stable` passes a stable sort's output, and fails one where two values
    of equal keys swapped places, which the plain `--values` check cannot see."""
    keys = np.random.default_rng(3).integers(0, 5, 3000).astype(dtype)
    if dtype == "float64":
        keys[::7] = -0.0  # equal to 0.0: one key, as for NumPy
        keys[::11] = np.nan
    np.save(tmp_path / "k.npy", keys)
    np.save(tmp_path / "v.npy", np.arange(len(keys)) * 3)
    run = distsort("sort", "k.npy", "-o", "s.npy", "--values", "v.npy", "--stable", cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    stable = ["--values", "v.npy", "s.values.npy", "--stable"]
    ok = check_run(tmp_path, "k.npy", "s.npy", *stable)
    assert ok.returncode == 0 and "stable:" in ok.stdout, ok.stdout + ok.stderr
    out_values = np.load(tmp_path / "s.values.npy")
    out_values[[0, 1]] = out_values[[1, 0]]  # the two first rows hold the smallest key
    np.save(tmp_path / "swapped.npy", out_values)
    pairs = ["--values", "v.npy", "swapped.npy"]
    assert check_run(tmp_path, "k.npy", "s.npy", *pairs).returncode == 0  # still its keys' values
    run = check_run(tmp_path, "k.npy", "s.npy", *pairs, "--stable")
    assert run.returncode == 1 and "check: not stable" in run.stdout, run.stdout
    assert "OK" not in run.stdout and "(otherwise " in run.stdout, run.stdout
    run = check_run(tmp_path, "k.npy", "s.npy", "--stable")
    assert run.returncode == 2 and run.stderr.count("--stable checks the values") == 1


def test_values_files_of_any_dtype(tmp_path):
    """Values files are a payload: datetime64 in .npy, byte strings raw (--values-dtype)."""
    keys = mixed_keys("int32")
    order = np.argsort(keys, kind="stable")
    stamps = np.arange(len(keys)).astype("datetime64[ms]")
    np.save(tmp_path / "k.npy", keys)
    np.save(tmp_path / "t.npy", stamps)
    names = np.char.encode(np.char.zfill(np.arange(len(keys)).astype(str), 7))
    names.tofile(tmp_path / "n.raw")
    run = distsort("sort", "k.npy", "-o", "s.npy", "--values", "t.npy", "--stable", "--verify",
                   cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    np.testing.assert_array_equal(np.load(tmp_path / "s.values.npy"), stamps[order])
    run = distsort("sort", "k.npy", "-o", "s.npy", "--values", "n.raw", "--values-dtype", "S7",
                   "--values-output", "n.out", "--stable", "--verify", cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    np.testing.assert_array_equal(np.fromfile(tmp_path / "n.out", dtype="S7"), names[order])


@pytest.mark.parametrize("budget", [[], ["--device-memory", "256KiB"]])  # in memory, out of core
def test_a_structured_file_sorts_by_its_fields(tmp_path, budget):
    """`sort --order a,b --verify` equals NumPy's stable sort by those fields (NaN, NaT, ties);
    --argsort writes the permutation; --order on a plain file is one clear error."""
    rows = structured_rows(20000, 3)
    np.save(tmp_path / "s.npy", rows)
    run = distsort("sort", "s.npy", "-o", "t.npy", "--order", "a,b", "--verify", *budget,
                   cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    want = np.sort(rows, order=["a", "b"], kind="stable")
    assert np.load(tmp_path / "t.npy").tobytes() == want.tobytes()
    run = distsort("sort", "s.npy", "-o", "p.npy", "--order", "t", "--argsort", *budget,
                   cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    np.testing.assert_array_equal(np.load(tmp_path / "p.npy"),
                                  np.argsort(rows, order="t", kind="stable"))
    np.save(tmp_path / "plain.npy", np.arange(10))
    run = distsort("sort", "plain.npy", "-o", "q.npy", "--order", "a", cwd=tmp_path)
    assert run.returncode != 0 and run.stderr.count("--order names fields") == 1
    run = distsort("check", "s.npy", "t.npy", "--order", "a,b", cwd=tmp_path)
    assert run.returncode == 0 and "OK" in run.stdout, run.stdout + run.stderr
    run = distsort("check", "s.npy", "p.npy", "--order", "t", "--argsort", cwd=tmp_path)
    assert run.returncode == 0 and "OK" in run.stdout, run.stdout + run.stderr
    run = distsort("check", "s.npy", "t.npy", "--order", "t", cwd=tmp_path)  # another order
    assert run.returncode == 1 and "FAILED: out of order" in run.stdout
    for args, says in [(["plain.npy", "q.npy", "--order", "a"], "--order names fields"),
                       (["s.npy", "t.npy", "--stable", "--values", "s.npy", "t.npy"],
                        "always sort stably")]:
        run = distsort("check", *args, cwd=tmp_path)
        assert run.returncode == 2 and run.stderr.count(says) == 1, run.stderr


def test_a_file_of_complex_numbers_sorts_as_numpy_sorts_them(tmp_path):
    """`sort --verify` and `--argsort` of a .npy of complex numbers match NumPy's stable sort
    (NaN parts and all); `--descending` passes `check --descending` and fails `check`; a
    changed value fails the checksum."""
    keys = complex_keys(30000, 0)
    np.save(tmp_path / "z.npy", keys)
    for extra, want in [(["--verify"], np.sort(keys, kind="stable")),
                        (["--argsort"], np.argsort(keys, kind="stable"))]:
        run = distsort("sort", "z.npy", "-o", "o.npy", *extra, cwd=tmp_path)
        assert run.returncode == 0, run.stderr
        got = np.load(tmp_path / "o.npy")
        assert got.dtype == want.dtype and got.tobytes() == want.tobytes(), extra
    run = distsort("sort", "z.npy", "-o", "d.npy", "--descending", "--verify", cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    for how, rc in [(["--descending"], 0), ([], 1)]:
        run = distsort("check", "z.npy", "d.npy", *how, cwd=tmp_path)
        assert run.returncode == rc, run.stdout + run.stderr
    changed = np.sort(keys)
    assert np.isnan(changed[-1].real) and np.isnan(changed[-1].imag)
    changed.view(np.uint64)[-2] ^= np.uint64(1)  # another NaN for the last real part: in order
    np.save(tmp_path / "c.npy", changed)
    run = distsort("check", "z.npy", "c.npy", cwd=tmp_path)
    assert run.returncode == 1 and "checksum" in run.stdout and "out of order" not in run.stdout


@pytest.mark.parametrize("kind", ["S", "U"])
def test_files_of_bytes_and_strings_sort_as_numpy_sorts_them(tmp_path, kind):
    """`sort --verify`, `--descending` and `--argsort` of a .npy of bytes or unicode strings
    (fields.py: one field each), and `check` of each output: OK as sorted, FAILED for the other
    direction or a changed byte."""
    keys = string_keys(kind, 30000, 5)
    np.save(tmp_path / "w.npy", keys)
    for extra, want in [(["--verify"], np.sort(keys, kind="stable")),
                        (["--descending"], np.sort(keys)[::-1]),
                        (["--argsort"], np.argsort(keys, kind="stable"))]:
        run = distsort("sort", "w.npy", "-o", "o.npy", *extra, cwd=tmp_path)
        assert run.returncode == 0, run.stderr
        got = np.load(tmp_path / "o.npy")
        assert got.dtype == want.dtype and got.tobytes() == want.tobytes(), extra
        how = [x for x in extra if x != "--verify"]
        run = distsort("check", "w.npy", "o.npy", *how, cwd=tmp_path)
        assert run.returncode == 0 and "OK" in run.stdout, run.stdout + run.stderr
        if how != ["--argsort"]:
            other = [] if how else ["--descending"]
            run = distsort("check", "w.npy", "o.npy", *other, cwd=tmp_path)
            assert run.returncode == 1 and "FAILED: out of order" in run.stdout
    np.save(tmp_path / "o.npy", np.sort(keys))
    changed = np.load(tmp_path / "o.npy")
    changed[-1] += "x" if kind == "U" else b"\x01"  # the largest, one more character: in order
    np.save(tmp_path / "o.npy", changed)
    run = distsort("check", "w.npy", "o.npy", cwd=tmp_path)
    assert run.returncode == 1 and "checksum" in run.stdout and "out of order" not in run.stdout


def test_default_job_sorts_and_validates():
    run = distsort("--count", "200000")
    assert run.returncode == 0, run.stderr
    assert re.search(r"\(\d[\d.]* [kMGT]? ?keys/s", run.stdout) and "check: OK" in run.stdout
    assert re.search(r"on 4 ranks \(cpu, engine numpy, in memory, transport (cma|mpi)\)",
                     run.stdout)


def test_gen_then_sort_then_check(tmp_path):
    for dist, key in [("zipf", "int64"), ("fewdistinct", "int64"), ("gensort", None),
                      ("specials", "datetime64[ns]"), ("uniform", "bool")]:
        name = f"{dist}.dat" if dist == "gensort" else f"{dist}.npy"
        fmt = ["--record-size", "100", "--key-size", "10"] if dist == "gensort" else []
        dtype = [] if dist == "gensort" else ["--dtype", key]
        run = distsort("gen", name, "--count", "30000", *dtype, "--dist", dist, cwd=tmp_path)
        assert run.returncode == 0, run.stderr
        run = distsort("sort", name, "-o", "sorted-" + name, *fmt, cwd=tmp_path)
        assert run.returncode == 0, run.stderr
        run = distsort("check", name, "sorted-" + name, *fmt, ranks=3, cwd=tmp_path)
        assert run.returncode == 0 and "OK" in run.stdout, run.stdout + run.stderr


@pytest.mark.parametrize("args, message", [
    (["sort", "missing.npy", "-o", "o.npy"], "missing.npy"),
    (["sort", "in.npy", "-o", "nodir/o.npy"], "nodir"),
    (["sort", "in.npy", "-o", "in.npy/o.npy"], "in.npy"),
    (["sort", "odd.bin", "-o", "o.bin", "--dtype", "uint32"], "multiple"),
    (["sort", "odd.bin", "-o", "o.bin", "--dtype", "uint33"], "uint33"),
    (["sort", "odd.bin", "-o", "o.bin", "--record-size", "10", "--key-size", "11"], "key"),
    (["sort", "in.npy", "-o", "o.npy", "--values", "short.npy"], "short.npy"),
    (["sort", "complex.npy", "-o", "o.npy"], "complex"),
    (["sort", "odd.bin", "-o", "o.npy"], "odd.bin"),
    (["sort", "in.npy", "-o", "o.npy", "--report", "nodir/r.json"], "the report nodir/r.json"),
    (["sort", "in.npy", "-o", "o.npy", "--report", "."], "it is a folder"),
    (["--count", "1000", "--report", "nodir/r.json"], "the report nodir/r.json"),
    (["sort", "in.npy", "-o", "o.npy", "--report", "./in.npy"],
     "the report ./in.npy would overwrite in.npy"),
    (["sort", "in.npy", "-o", "o.npy", "--report", "o.npy"], "would overwrite o.npy"),
    (["sort", "in.npy", "-o", "o.npy", "--values", "v.npy", "--report", "o.values.npy"],
     "would overwrite o.values.npy"),
    (["sort", "in.npy", "-o", "o.npy", "--report", "/proc/r.json"], "/proc takes no new files"),
    (["sort", "pipe", "-o", "o.bin", "--dtype", "uint32"], "input pipe is not a regular file"),
    (["sort", "in.npy", "-o", "pipe"], "output pipe: it is not a regular file"),
    (["sort", "in.npy", "-o", "o.npy", "--values", "v.npy", "--values-output", "pipe"],
     "output pipe: it is not a regular file"),
    (["gen", "pipe", "--count", "10", "--dtype", "uint8"], "output pipe: it is not a regular"),
    (["sort", "in.npy", "-o", "."], "it is a folder"),
    (["sort", "in.npy", "-o", "newdir/"], "a name that ends in / names a folder"),
    (["sort", "in.npy", "-o", "o.npy", "--values", "v.npy", "--values-record-size", "8"],
     "v.npy is an .npy file; --values-record-size is for raw record files"),
    (["check", "in.npy", "missing.npy"], "output file missing.npy does not exist"),
    (["sort", "in.npy", "-o", "o.npy", "--values-output", "w.npy"],
     "--values-output is for values files: give them with --values"),
    (["sort", "in.npy", "-o", "o.npy", "--values", "odd.bin"], "give --values-dtype"),
    (["sort", "in.npy", "-o", "o.npz"], "not .npz archives"),
    (["sort", "in.npy", "-o", "./in.npy"], "the output ./in.npy is the input in.npy"),
    (["sort", "in.npy", "-o", "v.npy", "--values", "v.npy"], "is the input v.npy"),
    (["sort", "in.npy", "-o", "o.npy", "--values", "v.npy", "--values-output", "in.npy"],
     "the output in.npy is the input in.npy"),
    (["sort", "in.npy", "-o", "o.npy", "--values", "v.npy", "--values-output", "./o.npy"],
     "both be written to o.npy"),
    (["bench", "--count", "2^10", "--reps", "0"], "--reps 0: give 1 or more"),
    (["bench", "--count", "0"], "--count 0: give 1 or more"),
    (["gen", "g.dat", "--count", "10", "--record-size", "0"],
     "--record-size must be a positive whole number of bytes, not 0"),
    (["bench", "--count", "2^10", "--dist", "foo"], "unknown --dist 'foo'"),
    (["bench", "--count", "2^10", "--report", "nodir/b.json"], "the report nodir/b.json"),
    (["bench", "--count", "2^10", "--plot", "nodir/b.png"], "nodir"),
])
def test_bad_input_gets_one_clear_message_and_no_output(tmp_path, args, message):
    np.save(tmp_path / "in.npy", np.arange(100, dtype=np.int32))
    np.save(tmp_path / "v.npy", np.arange(100))
    np.save(tmp_path / "short.npy", np.arange(7))
    np.save(tmp_path / "complex.npy", np.ones(10, dtype=np.clongdouble))  # complex64/128 sort
    (tmp_path / "odd.bin").write_bytes(b"\x01" * 10)
    os.mkfifo(tmp_path / "pipe")  # opening it to read would wait for a writer: a hang
    before = sorted(os.listdir(tmp_path))
    run = distsort(*args, cwd=tmp_path)
    assert run.returncode != 0
    assert run.stderr.count("distsort: error:") == 1, run.stderr  # one rank speaks
    assert message in " ".join(run.stderr.split()) and "Traceback" not in run.stderr
    assert sorted(os.listdir(tmp_path)) == before  # nothing written, no temporary left
    assert stat.S_ISFIFO(os.stat(tmp_path / "pipe").st_mode)  # not replaced by a file


@pytest.mark.parametrize("args, says", [
    (["sort", "in.npy"], "the following arguments are required: -o/--output"),
    (["--count", "2^x"], "--count"),
    (["sort", "in.npy", "-o", "o.npy", "--device-memory", "lots"], "not a size"),
    (["sort", "--help"], "--durable"),
    (["gen", "g.npy", "--count", "1.5"], "a whole number of elements"),
    (["gen", "--help"], "fewdistinct, sorted, reverse"),
    (["sort", "in.npy", "-o", "o.npy", "--dtpye", "u4"], "usage: python -m distsort sort"),
])
def test_usage_help_and_option_errors_come_from_one_rank(tmp_path, args, says):
    run = distsort(*args, ranks=3, cwd=tmp_path)
    out = run.stdout + run.stderr
    assert run.returncode == (0 if "--help" in args else 2), out
    assert says in " ".join(out.split()) and out.count("usage:") == 1, out
    assert out.count("error:") == (0 if "--help" in args else 1), out
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize("text, count", [("12", 12), ("1e9", 10**9), ("2^28", 2**28),
                                         ("4*2^30", 2**32), ("2**10", 1024), ("3.0e2", 300)])
def test_counts_are_whole_numbers_in_any_notation(text, count):
    assert parse_count(text) == count


@pytest.mark.parametrize("text", ["1.5", "2.9e0", "2^x", "lots", "-3", "2^-1"])
def test_counts_that_are_not_whole_numbers_are_refused(text):
    with pytest.raises(argparse.ArgumentTypeError):
        parse_count(text)


def test_an_output_name_as_long_as_the_folder_takes_is_written(tmp_path):
    np.save(tmp_path / "in.npy", np.arange(100, dtype=np.int32)[::-1])
    name = "a" * (os.pathconf(tmp_path, "PC_NAME_MAX") - 4) + ".npy"  # its temporary is longer
    run = distsort("sort", "in.npy", "-o", name, "--report", name[1:], ranks=2, cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    np.testing.assert_array_equal(np.load(tmp_path / name), np.arange(100))
    assert sorted(os.listdir(tmp_path)) == sorted(["in.npy", name, name[1:]])


def test_a_report_that_cannot_be_written_leaves_the_former_one_whole(tmp_path, monkeypatch):
    report = tmp_path / "r.json"
    report.write_text('{"former": 1}')

    def disk_full(summary, f, **options):
        f.write('{"cut')
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(json, "dump", disk_full)
    with pytest.raises(DistsortError, match=r"cannot write the report .*r.json: No space left on "
                       r"device \(the job's outputs are written: o.npy\)"):
        commands._publish_report(str(report), MPI.COMM_SELF, {"files": [{"path": "o.npy"}]})
    assert report.read_text() == '{"former": 1}' and os.listdir(tmp_path) == ["r.json"]


def test_a_raw_output_says_so_in_the_summary(tmp_path):
    np.save(tmp_path / "in.npy", np.arange(10, dtype=np.uint16)[::-1])
    run = distsort("sort", "in.npy", "-o", "out.bin", ranks=1, cwd=tmp_path)
    assert run.returncode == 0 and "wrote out.bin (raw uint16)" in run.stdout, run.stdout
    assert np.array_equal(np.fromfile(tmp_path / "out.bin", np.uint16), np.arange(10))


def test_the_console_script_calls_itself_distsort():
    script = shutil.which("distsort", path=os.path.dirname(sys.executable))
    if script is None:
        pytest.skip("distsort is not installed as a console script here")
    run = subprocess.run([script, "--help"], capture_output=True, text=True, timeout=60)
    assert run.returncode == 0 and run.stdout.startswith("usage: distsort "), run.stdout


def test_version():
    run = distsort("--version", ranks=1)
    assert run.returncode == 0 and run.stdout.strip() == f"distsort {distsort_module.__version__}"


def test_a_rank_killed_mid_sort_stops_every_rank_and_leaves_no_output(tmp_path):
    np.save(tmp_path / "in.npy", np.arange(300_000, dtype=np.int64)[::-1])
    env_fault = dict(os.environ, DISTSORT_FAULT="exchange:2")
    cmd = [mpiexec(), "-n", "4", sys.executable, "-m", "distsort", "sort", "in.npy", "-o", "o.npy"]
    env_fault["PYTHONPATH"] = os.getcwd()
    run = subprocess.run(cmd, capture_output=True, text=True, timeout=60, env=env_fault,
                         cwd=tmp_path)  # the timeout is the "no hang" check
    assert run.returncode != 0
    assert os.listdir(tmp_path) == ["in.npy"]


@pytest.mark.parametrize("how", ["", ":term"])  # SIGKILL, SIGTERM
def test_a_rank_killed_while_writing_leaves_neither_output_nor_temporary(tmp_path, how):
    np.save(tmp_path / "in.npy", np.arange(300_000, dtype=np.int64)[::-1])
    tag = f"{os.getpid()}-{how}"
    env = dict(os.environ, DISTSORT_BACKEND="cpu", PYTHONPATH=os.getcwd(),
               DISTSORT_FAULT=f"written:2{how}", DISTSORT_TEST_JOB=tag)
    cmd = [mpiexec(), "-n", "4", sys.executable, "-m", "distsort", "sort", "in.npy", "-o", "o.npy"]
    run = subprocess.run(cmd, capture_output=True, text=True, timeout=30, env=env, cwd=tmp_path)
    assert "injected fault written:2" in run.stderr  # rank 2 died with the temporary file there
    assert run.returncode != 0
    assert os.listdir(tmp_path) == ["in.npy"]
    assert job_processes("DISTSORT_TEST_JOB", tag) == []  # no rank, no watcher left running


def test_a_rank_that_runs_out_of_memory_in_its_finish_ends_the_job_with_one_message(tmp_path):
    """An OOM in rank 1's finish (injected), which every rank agrees on: one message, exit 2 on
    every rank without an abort, no output and no temporary file."""
    np.save(tmp_path / "in.npy", np.arange(300_000, dtype=np.int64)[::-1])
    env = dict(os.environ, DISTSORT_BACKEND="cpu", PYTHONPATH=os.getcwd(),
               DISTSORT_FAULT="sorting:1:oom")
    cmd = [mpiexec(), "-n", "3", sys.executable, "-m", "distsort", "sort", "in.npy", "-o", "o.npy"]
    run = subprocess.run(cmd, capture_output=True, text=True, timeout=60, env=env, cwd=tmp_path)
    assert run.returncode == 2, run.stderr
    assert run.stderr.count("distsort: error:") == 1, run.stderr
    assert "rank 1 ran out of memory (injected fault sorting:1:oom)" in run.stderr
    assert "Traceback" not in run.stderr and "abort" not in run.stderr.lower()
    assert os.listdir(tmp_path) == ["in.npy"]


def test_a_fault_in_an_early_phase_strikes_the_rank_it_names(tmp_path):
    """The phases before the sort know their rank: a fault injected in rank 1's read once fired
    on every rank as rank 0's, and never as rank 1's (the failure tests aimed past rank 0 in
    those phases tested nothing)."""
    np.save(tmp_path / "in.npy", np.arange(300_000, dtype=np.int64)[::-1])
    env = dict(os.environ, DISTSORT_BACKEND="cpu", PYTHONPATH=os.getcwd(),
               DISTSORT_FAULT="read:1:oom")
    cmd = [mpiexec(), "-n", "3", sys.executable, "-m", "distsort", "sort", "in.npy", "-o", "o.npy"]
    run = subprocess.run(cmd, capture_output=True, text=True, timeout=60, env=env, cwd=tmp_path)
    assert run.returncode != 0
    assert run.stderr.count("distsort: error:") == 1, run.stderr
    assert "rank 1 ran out of memory (injected fault read:1:oom)" in run.stderr
    assert os.listdir(tmp_path) == ["in.npy"]


def job_processes(name: str, value: str) -> list[int]:
    """Processes whose environment holds name=value (Linux /proc; skips elsewhere)."""
    if not os.path.isdir("/proc/self"):
        pytest.skip("needs /proc")
    mark, found = f"{name}={value}".encode(), []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/environ", "rb") as f:
                if mark in f.read().split(b"\0"):
                    found.append(int(pid))
        except OSError:
            continue  # gone, or not ours
    return found


def test_bench_reports_every_size(tmp_path):
    run = distsort("bench", "--count", "2^16", "--steps", "3", "--reps", "1",
                   "--report", "b.json", ranks=2, cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    assert sorted(os.listdir(tmp_path)) == ["b.json"]  # no plot unless asked: no matplotlib needed
    import json

    rows = json.loads((tmp_path / "b.json").read_text())
    assert [r["keys"] for r in rows] == [2**12, 2**14, 2**16]
    assert all(r["seconds"] > 0 and len(r["per_rank"]) == 2 for r in rows)


def test_the_summary_adds_up_to_the_whole_command(tmp_path):
    """A file job's summary: the command's time, the phases that make it up (start, read,
    encode, ..., verify, write, and what no phase covers) adding up to it, the throughput in
    readable units, every file written (the values file too)."""
    import json

    # a stable sort of floats: their canonical codes are made by a pass of their own (other
    # numbers are coded by the partition's passes), so every phase shows
    x = np.random.default_rng(3).integers(0, 2**31, 50_000).astype(np.float64)
    np.save(tmp_path / "k.npy", x)
    np.save(tmp_path / "v.npy", x.astype(np.float32))
    run = distsort("sort", "k.npy", "-o", "o.npy", "--values", "v.npy", "--verify", "--stable",
                   "--report", "r.json", ranks=2, cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    report = json.loads((tmp_path / "r.json").read_text())
    phases = report["phases"]
    for phase in ("start", "read", "encode", "sample", "finish", "decode", "verify", "write"):
        assert phases.get(phase, 0) > 0, phase
    assert sum(phases.values()) == pytest.approx(report["seconds"], rel=0.05)
    assert "wrote o.npy (npy float64), o.values.npy (npy float32)  (verified)" in run.stdout
    line = r"time [\d.]+ m?s \([\d.]+ [kMG]? ?keys/s, [\d.]+ [kMG]?B/s, read "
    assert re.search(line, run.stdout)
    assert report["input"] == "k.npy" and report["bytes"] == 50_000 * 12
    peaks = [r["peak_host_bytes"] for r in report["per_rank"]]
    assert report["peak_host_bytes"] == max(peaks) and min(peaks) > 10 << 20  # Python alone
    assert re.search(r"peak host memory [\d.]+ [kMG]?B a rank", run.stdout), run.stdout
    assert report["files"] == [{"path": "o.npy", "format": "npy float64"},
                               {"path": "o.values.npy", "format": "npy float32"}]
    for step in ("read", "write"):  # the same bytes each way: keys and values
        assert report[f"{step}_bytes_per_s"] == pytest.approx(50_000 * 12 / phases[step])
    run = distsort("sort", "k.npy", "-o", "o.npy", "--device-memory", "64KiB", "--verify",
                   "--report", "r.json", ranks=2, cwd=tmp_path)  # out of core: I/O in phases
    report = json.loads((tmp_path / "r.json").read_text())
    assert report["path"] == "out of core" and report["files"][0]["path"] == "o.npy"
    assert report["phases"]["verify"] > 0 and report["phases"]["other"] < 0.05 * report["seconds"]
    assert report["read_bytes_per_s"] is None and report["write_bytes_per_s"] is None
    assert " read " not in run.stdout.splitlines()[1], run.stdout  # no rate it cannot know


def test_a_setting_no_rank_can_read_is_one_message_before_any_work(tmp_path, monkeypatch):
    """Read by each rank inside its steps, it would be said by every rank, each aborting."""
    np.save(tmp_path / "in.npy", np.arange(100, dtype=np.int32))
    monkeypatch.setenv("DISTSORT_TIMEOUT", "nan")
    run = distsort("sort", "in.npy", "-o", "o.npy", ranks=3, cwd=tmp_path)
    assert run.returncode == 2 and run.stderr.count("distsort: error:") == 1, run.stderr
    assert "DISTSORT_TIMEOUT='nan'" in run.stderr and "Abort" not in run.stderr
    assert sorted(os.listdir(tmp_path)) == ["in.npy"]
    run = distsort("info", ranks=1, cwd=tmp_path)  # info runs, and flags it
    assert run.returncode == 0 and "DISTSORT_TIMEOUT=nan   <- DISTSORT_TIMEOUT='nan'" in \
        run.stdout, run.stdout + run.stderr


def test_compile_on_cpus_writes_the_bytecode_a_job_would_compile(tmp_path, monkeypatch):
    """Without a GPU, compile does what a CPU job would otherwise do as it runs: compile
    the bytecode of distsort and of the packages a job imports (here into a cache of the
    test's own, where PYTHONDONTWRITEBYTECODE keeps the imports from writing any) and the C
    kernels, and time their sorts against
    NumPy's (the answers beside them); one rank says that there is no CUDA to build."""
    from distsort.local import lsd

    monkeypatch.setenv("PYTHONPYCACHEPREFIX", str(tmp_path / "pyc"))
    monkeypatch.setenv("PYTHONDONTWRITEBYTECODE", "1")
    answers = lsd._store_path()  # beside the C library the ranks find
    if answers and os.path.exists(answers):
        os.unlink(answers)
    run = distsort("compile", ranks=2, cwd=tmp_path)
    assert run.returncode == 0 and "Traceback" not in run.stderr, run.stderr
    assert run.stdout.count("no CUDA kernels to compile") == 1, run.stdout
    compiled = {path.name.split(".")[0] for path in (tmp_path / "pyc").rglob("*.pyc")}
    assert {"api", "commands", "radix", "lsd", "exchange"} <= compiled, sorted(compiled)
    assert {"fromnumeric", "std"} <= compiled, sorted(compiled)  # NumPy's, tqdm's
    assert answers is None or os.path.exists(answers)  # None: no C compiler here


def test_ctrl_c_on_mpiexec_stops_every_rank_cleanly(tmp_path):
    """Ctrl-C while a temporary output exists: rank 0 stops answering once it has written its
    piece (an injected hang: the job lives until it is interrupted) and says so on stderr; the
    interrupt is sent only when that line has come, whatever the machine's speed."""
    import queue
    import threading

    np.save(tmp_path / "in.npy", np.random.default_rng(0).integers(0, 2**31, 2**20))
    env = dict(os.environ, DISTSORT_BACKEND="cpu", PYTHONPATH=os.getcwd(),
               DISTSORT_FAULT="written:0:hang")
    cmd = [mpiexec(), "-n", "4", sys.executable, "-m", "distsort", "sort", "in.npy", "-o",
           "out.npy", "--verify"]
    job = subprocess.Popen(cmd, cwd=tmp_path, env=env, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True)
    lines: queue.Queue = queue.Queue()
    threading.Thread(target=lambda: [lines.put(x) for x in job.stderr], daemon=True).start()
    try:
        while "injected fault" not in lines.get(timeout=120):
            pass
        assert any(TEMP_MARK in n for n in os.listdir(tmp_path)), "no temporary output yet"
        job.send_signal(signal.SIGINT)
        job.wait(timeout=60)  # stops: no rank left waiting
    finally:
        job.kill()
    err = "".join(lines.queue)
    assert job.returncode != 0
    assert "Traceback" not in err and err.count("distsort: interrupted") <= 1  # not once a rank
    assert sorted(os.listdir(tmp_path)) == ["in.npy"]


def test_a_ctrl_c_that_lands_in_a_finalizer_is_raised_again(monkeypatch):
    """Python prints a KeyboardInterrupt raised in a finalizer (or weakref callback) with a
    traceback and drops it; under the CLI's hook it comes again once the finalizer is over."""
    from distsort.cli import interrupt_again, main

    class Interrupted:
        def __del__(self):
            raise KeyboardInterrupt

    hook = sys.unraisablehook
    assert main(["info", "--json"]) == 0 and sys.unraisablehook is hook  # put back after main
    monkeypatch.setattr(sys, "unraisablehook", functools.partial(interrupt_again, hook))
    # Python's own SIGINT handler, whatever was inherited (a shell's background job ignores it)
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    deadline = time.monotonic() + 60
    try:
        with pytest.raises(KeyboardInterrupt):
            Interrupted()  # finalized at once; its interrupt goes to the hook
            while time.monotonic() < deadline:  # until the interrupt comes back
                pass
    finally:
        signal.signal(signal.SIGINT, previous)


@pytest.mark.parametrize("command", ["sort", "gen", "check", "bench", "info"])
def test_every_command_help_shows_examples(command):
    from distsort.cli import parser

    text = parser()._subparsers._group_actions[0].choices[command].format_help()
    assert "examples:" in text and f"distsort {command}" in text


def test_a_rank_that_stops_answering_is_caught_by_the_watchdog(tmp_path):
    np.save(tmp_path / "in.npy", np.arange(100_000, dtype=np.int64)[::-1])
    env = dict(os.environ, DISTSORT_BACKEND="cpu", PYTHONPATH=os.getcwd(),
               DISTSORT_FAULT="exchange:1:hang", DISTSORT_TIMEOUT="4")
    cmd = [mpiexec(), "-n", "3", sys.executable, "-m", "distsort", "sort", "in.npy", "-o", "o.npy"]
    run = subprocess.run(cmd, capture_output=True, text=True, timeout=60, env=env, cwd=tmp_path)
    assert run.returncode != 0
    assert run.stderr.count("spent more than 4 s in the exchange phase") == 1, run.stderr
    assert "rank 0 spent" in run.stderr  # the first in line reports, the others are ended
    assert os.listdir(tmp_path) == ["in.npy"]


@pytest.mark.parametrize("command", ["gen", "check"])
def test_gen_and_check_are_watched_too(tmp_path, command):
    """A rank that stops answering in gen or check ends the job as in sort: no hang."""
    np.save(tmp_path / "in.npy", np.arange(1000, dtype=np.int64))
    env = dict(os.environ, DISTSORT_BACKEND="cpu", PYTHONPATH=os.getcwd(),
               DISTSORT_FAULT=f"{command}:1:hang", DISTSORT_TIMEOUT="4")
    words = ["g.npy", "--count", "1000"] if command == "gen" else ["in.npy", "in.npy"]
    cmd = [mpiexec(), "-n", "3", sys.executable, "-m", "distsort", command, *words]
    run = subprocess.run(cmd, capture_output=True, text=True, timeout=60, env=env, cwd=tmp_path)
    assert run.returncode != 0
    assert run.stderr.count(f"spent more than 4 s in the {command} phase") == 1, run.stderr
    assert os.listdir(tmp_path) == ["in.npy"]


def test_two_dimensional_values_get_advice_that_works(tmp_path):
    """A 2-D values .npy is refused with advice (raw rows and --values-record-size), and the
    advice, followed, sorts the rows with their keys."""
    keys = np.array([3, 1, 2], np.int32)
    rows = np.arange(6, dtype=np.int16).reshape(3, 2)
    np.save(tmp_path / "k.npy", keys)
    np.save(tmp_path / "v.npy", rows)
    run = distsort("sort", "k.npy", "-o", "o.npy", "--values", "v.npy", ranks=2, cwd=tmp_path)
    assert run.returncode == 2 and "--values-record-size" in run.stderr, run.stderr
    rows.tofile(tmp_path / "v.raw")
    run = distsort("sort", "k.npy", "-o", "o.npy", "--values", "v.raw", "--values-record-size",
                   "4", "--values-output", "vo.raw", ranks=2, cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    got = np.fromfile(tmp_path / "vo.raw", np.int16).reshape(3, 2)
    np.testing.assert_array_equal(got, rows[np.argsort(keys)])


def test_check_reads_raw_values_files_given_their_format(tmp_path):
    """`check --values IN OUT --values-dtype T` checks the raw values `sort` wrote; a swapped
    value fails it; the options without --values are refused."""
    keys = np.random.default_rng(5).integers(0, 50, 3000).astype(np.uint32)
    np.save(tmp_path / "k.npy", keys)
    np.arange(len(keys), dtype=np.int32).tofile(tmp_path / "v.bin")
    run = distsort("sort", "k.npy", "-o", "o.npy", "--values", "v.bin", "--values-dtype",
                   "int32", "--values-output", "o.vals", "--stable", cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    check = ["check", "k.npy", "o.npy", "--values", "v.bin", "o.vals", "--values-dtype", "int32"]
    run = distsort(*check, "--stable", cwd=tmp_path)
    assert run.returncode == 0 and "stable" in run.stdout, run.stdout + run.stderr
    values = np.fromfile(tmp_path / "o.vals", np.int32)
    values[[0, -1]] = values[[-1, 0]]
    values.tofile(tmp_path / "o.vals")
    assert distsort(*check, cwd=tmp_path).returncode == 1
    run = distsort("check", "k.npy", "o.npy", "--values-dtype", "int32", cwd=tmp_path)
    assert run.returncode == 2 and run.stderr.count("give them with --values") == 1


@pytest.mark.parametrize("values_dtype", ["f8", ">i4,<f2,S2"])  # numbers; big-endian records
def test_check_reads_a_raw_values_output_in_the_format_sort_wrote_it(tmp_path, values_dtype):
    """`sort --values v.npy -o o.raw` writes raw values in the input values' format: `check`
    reads them so without --values-dtype (it said it could not tell their format); a swapped
    value still fails it, and a raw values output of another length is named with its count."""
    keys = np.random.default_rng(6).integers(0, 2**32, 2000, dtype=np.uint64).astype(np.uint32)
    keys.tofile(tmp_path / "k.raw")
    dtype = np.dtype(values_dtype)
    bytes_ = np.random.default_rng(7).integers(0, 256, len(keys) * dtype.itemsize, np.uint8)
    np.save(tmp_path / "v.npy", bytes_.view(dtype))
    run = distsort("sort", "k.raw", "--dtype", "uint32", "-o", "o.raw", "--values", "v.npy",
                   "--values-output", "o.vals", cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    check = ["k.raw", "o.raw", "--dtype", "uint32", "--values", "v.npy", "o.vals"]
    run = check_run(tmp_path, *check)
    assert run.returncode == 0 and "OK" in run.stdout, run.stdout + run.stderr
    values = np.fromfile(tmp_path / "o.vals", np.uint8).reshape(len(keys), -1)
    values[[0, -1]] = values[[-1, 0]]
    values.tofile(tmp_path / "o.vals")
    assert check_run(tmp_path, *check).returncode == 1
    values[1:].tofile(tmp_path / "o.vals")
    run = check_run(tmp_path, *check)
    assert run.returncode == 2 and f"holds {len(keys) - 1} values" in run.stderr, run.stderr


def test_records_of_values_get_a_raw_default_output_beside_an_npy_output(tmp_path):
    """OUT.values.npy cannot hold raw records: the default is OUT.values.bin (it was refused,
    naming an output the user never chose)."""
    np.save(tmp_path / "k.npy", np.array([3, 1, 2], np.uint32))
    rows = np.arange(9, dtype=np.uint8).reshape(3, 3)
    rows.tofile(tmp_path / "v.bin")
    run = distsort("sort", "k.npy", "-o", "o.npy", "--values", "v.bin",
                   "--values-record-size", "3", cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    got = np.fromfile(tmp_path / "o.values.bin", np.uint8).reshape(3, 3)
    np.testing.assert_array_equal(got, rows[[1, 2, 0]])
    assert "o.values.bin (3-byte records)" in run.stdout, run.stdout  # values have no key


@pytest.mark.parametrize("args, says", [
    (["--report", "r.json", "sort", "in.npy", "-o", "o.npy"], "give options after the command"),
    (["--count", "1000", "--dtype", "float32", "run"], "give options after the command"),
    (["--report", "r.json", "gen", "g.npy", "--count", "10"], "--report: not an option of gen"),
])
def test_options_before_the_command_are_refused_not_dropped(tmp_path, args, says):
    """The command's own defaults replaced them without a word (no report written, the
    default dtype sorted): now the command line is refused, by one rank; an option the
    command does not take is named as such (not sent after the command)."""
    np.save(tmp_path / "in.npy", np.arange(100, dtype=np.int32))
    run = distsort(*args, cwd=tmp_path)
    assert run.returncode == 2
    assert run.stderr.count(says) == 1, run.stderr
    assert sorted(os.listdir(tmp_path)) == ["in.npy"]
