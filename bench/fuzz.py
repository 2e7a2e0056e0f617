"""Random jobs against NumPy: every dtype, distribution, option and rank count, in memory and
out of core, on the CPU backend (or with --backend gpu on GPUs, ranks sharing them as
DISTSORT_SHARED_GPU says).

`mpiexec -n P python bench/fuzz.py api SEED CASES`: API calls (`sort`, `argsort`, `sort_pairs`;
a quarter of them `sort_records` or structured keys by `order=`) on P ranks, each holding an
uneven share (some none), compared on rank 0 with NumPy's stable order (descending: ties in
input order, NaN and NaT last, complex NaN groups in NumPy's order), every bit where the sort is
stable.
`python bench/fuzz.py files SEED CASES`: file jobs (`mpiexec -n 1..4 python -m distsort sort`
of a `.npy`, raw file or records, with `--values` of several dtypes, `--argsort`, `--stable`,
`--descending`, `--verify`, `--device-memory`), each output compared with NumPy's, then `check`
of it at 1-3 ranks.
Each case is drawn from (SEED, its number): `... SEED CASES FIRST` replays cases FIRST.. alone.
A line names each problem; the last line counts them (a budget refused as too small for the
data, with the size to give, is no problem). The campaigns run are in bench/RESULTS.md.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
import traceback

import numpy as np

DTYPES = ["int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64", "float16",
          "float32", "float64", "bool", "datetime64[ns]", "timedelta64[s]", ">i4", ">f8", "S6",
          "U4", "complex64", "complex128"]
DISTS = ["uniform", "few", "sorted", "reversed", "equal", "special"]
SIZES = [0, 1, 2, 17, 1000, 40_000, 300_000, 1 << 20, 3 << 19]
BUDGETS = [None, None, None, "256KiB", "4MiB"]  # out of core now and then
STRUCT = np.dtype([("a", "<i2"), ("b", ">f8"), ("s", "S3"), ("t", "<M8[s]")])
TOO_SMALL = "is too small for"  # a budget refused, with the size to give


def keys(rng, dtype: str, n: int, dist: str) -> np.ndarray:
    """n keys of dtype drawn as dist says: ties, extremes, NaN (payloads), infinities, -0.0,
    subnormals, NaT, strings with NULs, complex NaN parts."""
    dt = np.dtype(dtype)
    if dt.kind in "SU":
        x = _strings(rng, dt, n, dist)
    elif dt.kind == "c":
        x = (rng.normal(size=n) + 1j * rng.integers(-2, 3, n)).astype(dt)
        odd = [complex(np.nan, 1), complex(1, np.nan), complex(np.nan, np.nan),
               complex(np.inf, 0), complex(-0.0, 0.0)]
        x = _sprinkle(rng, x, odd, 0.2) if dist == "special" else x
    elif dt.kind == "b":
        x = rng.integers(0, 2, n).astype(bool)
    elif dt.kind in "Mm":
        wide = dist == "uniform"
        bits = rng.integers(-2**62, 2**62, n) if wide else rng.integers(-1000, 1000, n)
        nat, top = np.iinfo(np.int64).min, np.iinfo(np.int64).max
        x = (_sprinkle(rng, bits, [nat, nat, top], 0.15) if dist == "special" else bits).view(dt)
    elif dt.kind == "f":
        x = (rng.integers(-3, 3, n) if dist == "few" else rng.normal(size=n)).astype(dt)
        odd = [np.nan, -np.nan, np.inf, -np.inf, -0.0, 0.0, 1e-40]
        x = _sprinkle(rng, x, odd, 0.3) if dist == "special" else x
    else:
        x = _integers(rng, dt, n, dist)
    if dist in ("sorted", "reversed") and dt.kind != "c":
        x = np.sort(x) if dist == "sorted" else np.sort(x)[::-1].copy()
    elif dist == "equal" and n:
        x = np.full(n, x[0], dt)
    return x


def _strings(rng, dt: np.dtype, n: int, dist: str) -> np.ndarray:
    alphabet = np.array(list("ab\0c") if dist == "few" else list("abcdefghij"))
    width = dt.itemsize // (4 if dt.kind == "U" else 1)
    chars = alphabet[rng.integers(0, len(alphabet), (n, width))]
    x = np.array(["".join(r).rstrip("\0") for r in chars], dtype="U")
    return x.astype(dt) if dt.kind == "U" else np.char.encode(x).astype(dt)


def _integers(rng, dt: np.dtype, n: int, dist: str) -> np.ndarray:
    info, native = np.iinfo(dt), dt.newbyteorder("=")
    if dist == "few":
        return rng.integers(0, 5, n).astype(dt)
    if dist == "special":
        return rng.choice(np.array([info.min, info.max, 0, 1], native), n).astype(dt)
    return rng.integers(info.min, int(info.max) + 1, n, dtype=native).astype(dt)


def _sprinkle(rng, x: np.ndarray, odd: list, share: float) -> np.ndarray:
    """x with about `share` of its elements replaced by ones of `odd`."""
    x = x.copy()
    picked = rng.random(len(x)) < share
    x[picked] = np.array(odd, x.dtype)[rng.integers(0, len(odd), int(picked.sum()))]
    return x


def nan_group(x: np.ndarray) -> np.ndarray:
    """Where NumPy puts a key after all numbers, in either order: NaN, NaT; complex: 1 with an
    imaginary NaN, 2 a real NaN, 3 both (groups in that order, descending too)."""
    if x.dtype.kind == "c":
        return np.isnan(x.imag).astype(int) + 2 * np.isnan(x.real)
    if x.dtype.kind == "f":
        return np.isnan(x).astype(int)
    if x.dtype.kind in "Mm":
        return np.isnat(x).astype(int)
    return np.zeros(len(x), int)


def stable_order(x: np.ndarray, descending: bool) -> np.ndarray:
    """The permutation distsort's stable sort makes: NumPy's; descending, the ties' groups
    reversed (each in input order), the NaN groups kept last."""
    up = np.argsort(x, kind="stable")
    if not descending or len(x) == 0:
        return up
    s, group = x[up], nan_group(x)[up]
    if x.dtype.kind == "c":  # ties: one group, and the parts that order it equal
        re, im = (np.where(np.isnan(v), 0, v) for v in (s.real, s.imag))
        tie = (group[1:] == group[:-1]) & (re[1:] == re[:-1]) & (im[1:] == im[:-1])
    else:
        tie = (s[1:] == s[:-1]) | ((group[1:] > 0) & (group[:-1] > 0))
    rank = np.empty(len(x), np.int64)
    rank[up] = np.concatenate([[0], np.cumsum(~tie)])
    return np.lexsort((-rank, nan_group(x)))


def same_values(got: np.ndarray, want: np.ndarray) -> bool:
    """Equal as sorted keys are: NaNs equal, -0.0 == 0.0, NaT == NaT."""
    if got.dtype.kind in "fc":
        return np.array_equal(got, want, equal_nan=True)
    if got.dtype.kind in "Mm":
        return np.array_equal(got.view(np.int64), want.view(np.int64))
    return np.array_equal(got, want)


def same_bits(got: np.ndarray, want: np.ndarray) -> bool:
    return np.array_equal(got.astype(want.dtype).view(np.uint8), want.view(np.uint8))


# --- API calls on the ranks of one mpiexec --------------------------------------------------

def api_case(rng, comm, backend: str) -> tuple[tuple, str | None]:
    """One random API call on every rank; (what it was, the problem or None) on rank 0."""
    dtype, dist = str(rng.choice(DTYPES)), str(rng.choice(DISTS))
    n = int(rng.choice(SIZES))
    n += int(rng.integers(0, 50)) if n > 2 else 0
    op = str(rng.choice(["sort", "sort", "argsort", "pairs"]))
    descending, stable, overwrite = (bool(rng.integers(0, 2)) for _ in range(3))
    common = dict(descending=descending, backend=backend, device_memory=rng.choice(BUDGETS))
    what = (dtype, n, dist, op, descending, stable, common["device_memory"], overwrite)
    if rng.random() < 0.25:
        return _records_or_fields(rng, comm, what, min(n, 200_000), common)
    data = keys(rng, dtype, n, dist)
    lo, hi = _share(rng, n, comm)
    mine, values = data[lo:hi].copy(), np.arange(lo, hi, dtype=np.int64)
    import distsort

    calls = {"sort": lambda: [distsort.sort(mine, comm, stable=stable, overwrite_input=overwrite,
                                            **common)],
             "argsort": lambda: [distsort.argsort(mine, comm, **common)],
             "pairs": lambda: list(distsort.sort_pairs(mine, values, comm, stable=stable,
                                                       overwrite_input=overwrite, **common))}
    got, problem = _called(comm, calls[op])
    if got is None or comm.Get_rank():
        return what, problem
    if op != "argsort" and any(p.dtype != data.dtype for p in got[0]):
        return what, "WRONG dtype"
    got = [np.concatenate(parts) for parts in got]
    want = stable_order(data, descending)
    if op == "argsort":
        ok = np.array_equal(got[0], want)
    elif op == "sort":
        ok = same_bits(got[0], data[want]) if stable else same_values(got[0], data[want])
    elif stable:
        ok = np.array_equal(got[1], want) and same_bits(got[0], data[want])
    else:
        ok = (same_values(got[0], data[want]) and np.array_equal(np.sort(got[1]), np.arange(n))
              and same_bits(got[0], data[got[1]]))
    return what, None if ok else "WRONG"


def _share(rng, n: int, comm) -> tuple[int, int]:
    """This rank's [lo, hi) of n rows cut at random places (the same on every rank)."""
    cuts = np.concatenate([[0], np.sort(rng.integers(0, n + 1, comm.Get_size() - 1)), [n]])
    return int(cuts[comm.Get_rank()]), int(cuts[comm.Get_rank() + 1])


def _called(comm, call) -> tuple[list | None, str | None]:
    """(each output's parts on rank 0, None) of call(), or (None, what it raised)."""
    import distsort

    try:
        outputs = call()
    except distsort.DistsortError as exc:
        return None, f"refused: {str(exc)[:160]}"
    except Exception:  # noqa: BLE001  (every crash is a finding)
        return None, "CRASH " + traceback.format_exc()[-800:]
    return [comm.gather(np.asarray(o), root=0) for o in outputs], None


def _records_or_fields(rng, comm, what: tuple, n: int, common: dict) -> tuple:
    import distsort

    lo, hi = _share(rng, n, comm)
    if rng.random() < 0.5:  # records by the memcmp order of their key bytes
        size = int(rng.choice([3, 8, 12, 100]))
        width = int(rng.integers(1, size + 1))
        rows = rng.integers(0, int(rng.choice([3, 256])), (n, size), dtype=np.uint8)
        what += ("records", size, width)
        got, problem = _called(comm, lambda: [distsort.sort_records(rows[lo:hi].copy(), width,
                                                                    comm, **common)])
        if got is None or comm.Get_rank():
            return what, problem
        ok = _records_sorted(np.concatenate(got[0]), rows, width, common["descending"])
        return what, None if ok else "WRONG records"
    data = _fields(rng, n)  # structured keys by order=: NumPy's order, stably
    fields = [str(f) for f in rng.permutation(STRUCT.names)[: int(rng.integers(1, 4))]]
    what += ("fields", tuple(fields))
    ascending = {k: v for k, v in common.items() if k != "descending"}
    got, problem = _called(comm, lambda: [distsort.sort(data[lo:hi].copy(), comm, order=fields,
                                                        **ascending)])
    if got is None or comm.Get_rank():
        return what, problem
    if any(p.dtype != data.dtype for p in got[0]):
        return what, "WRONG dtype"
    want = np.argsort(data, order=fields, kind="stable")
    return what, None if same_bits(np.concatenate(got[0]), data[want]) else "WRONG fields"


def _key_bytes(rows: np.ndarray, width: int) -> np.ndarray:
    return np.ascontiguousarray(rows[:, :width]).view(f"S{width}").reshape(-1)


def _records_sorted(got: np.ndarray, rows: np.ndarray, width: int, descending: bool) -> bool:
    """Are got's records the rows' records, by their first width bytes in memcmp order?"""
    key = _key_bytes(rows, width)
    size = rows.shape[1]
    return same_values(_key_bytes(got, width), key[stable_order(key, descending)]) and (
        np.array_equal(np.sort(_key_bytes(got, size)), np.sort(_key_bytes(rows, size))))


# --- file jobs -------------------------------------------------------------------------------

def files_case(rng, folder: str, backend: str) -> tuple[tuple, str | None]:
    """One random `sort` file job and a `check` of its output; (what it was, the problem)."""
    kind, data, job = _input_file(rng, folder)
    n = len(data)
    descending, stable, verify = (bool(rng.integers(0, 2)) for _ in range(3))
    argsort = kind != "records" and data.dtype.names is None and rng.random() < 0.2
    values = None if argsort or kind == "records" or rng.random() < 0.6 else str(
        rng.choice(["int64", "datetime", "bytes", "rows", "f32"]))
    budget = rng.choice([None, None, "512KiB", "8MiB"])
    flags = (["--descending"] * descending + ["--stable"] * stable
             + ["--verify"] * (verify and not argsort) + ["--argsort"] * argsort
             + (["--device-memory", str(budget)] if budget else []))
    if values:
        np.save(f"{folder}/v.npy", _naming_positions(np.arange(n), values))
        flags += ["--values", f"{folder}/v.npy", "--values-output", f"{folder}/vo.npy"]
    ranks = int(rng.integers(1, 5))
    what = (kind, str(data.dtype), n, ranks, " ".join(flags).replace(folder + "/", ""), values)
    if data.dtype.names and descending:
        flags.remove("--descending")  # a structured descending order is not modelled here
    done = _distsort(ranks, ["sort", *job, "--quiet", "--backend", backend, *flags])
    if done.returncode:
        return what, f"exit {done.returncode}: {done.stderr.strip()[-300:]}"
    problem = _compare(kind, data, job, "--descending" in flags, stable, argsort, values, folder)
    if problem is None and not argsort:
        checked = _distsort(int(rng.integers(1, 4)), ["check", job[0], job[2], *job[3:],
                                                      "--backend", backend]
                            + ["--descending"] * ("--descending" in flags))
        problem = None if checked.returncode == 0 else f"check: {checked.stdout[-300:]}"
    return what, problem


def _input_file(rng, folder: str) -> tuple[str, np.ndarray, list]:
    """(kind, the data, the job's input and output arguments) of a new input file."""
    kind = str(rng.choice(["npy", "npy", "raw", "records"]))
    n = int(rng.choice([0, 1, 5, 3000, 200_000, 1 << 20])) + int(rng.integers(0, 9))
    dist = str(rng.choice(DISTS))
    if kind == "records":
        size = int(rng.choice([4, 10, 16, 100]))
        rows = rng.integers(0, 4 if dist == "few" else 256, (n, size), dtype=np.uint8)
        rows.tofile(f"{folder}/in.dat")
        width = int(rng.integers(1, size + 1))
        return kind, rows, [f"{folder}/in.dat", "-o", f"{folder}/out.dat", "--record-size",
                            str(size), "--key-size", str(width)]
    raw_kinds = [d for d in DTYPES if d[0] not in "SUc"]
    dtype = str(rng.choice(DTYPES + ["struct"] if kind == "npy" else raw_kinds))
    data = keys(rng, dtype, n, dist) if dtype != "struct" else _fields(rng, n)
    if kind == "npy":
        np.save(f"{folder}/in.npy", data)
        return kind, data, [f"{folder}/in.npy", "-o", f"{folder}/out.npy"]
    data.tofile(f"{folder}/in.bin")
    return kind, data, [f"{folder}/in.bin", "-o", f"{folder}/out.bin", "--dtype", data.dtype.str]


def _fields(rng, n: int) -> np.ndarray:
    """n structured rows of STRUCT with ties in every field."""
    data = np.zeros(n, STRUCT)
    data["a"], data["b"] = rng.integers(-3, 3, n), rng.normal(size=n).round(1)
    data["s"], data["t"] = rng.choice([b"x", b"yy", b"", b"zz"], n), rng.integers(0, 5, n)
    return data


def _naming_positions(i: np.ndarray, kind: str) -> np.ndarray:
    """Values of another dtype, each naming its input position (_positions reads them)."""
    if kind == "datetime":
        return i.astype("datetime64[ns]")
    if kind == "bytes":
        return np.char.encode(np.char.zfill(i.astype(str), 9))
    if kind == "f32":
        return i.astype(">f4")
    if kind == "rows":
        rows = np.zeros(len(i), dtype=[("pos", ">i8"), ("tag", "S3")])
        rows["pos"], rows["tag"] = i, b"abc"
        return rows
    return i.astype(np.int64)


def _positions(values: np.ndarray, kind: str) -> np.ndarray | None:
    if kind == "rows":
        return values["pos"].astype(np.int64) if (values["tag"] == b"abc").all() else None
    return values.astype(np.int64)


def _distsort(ranks: int, args: list) -> subprocess.CompletedProcess:
    return subprocess.run(["mpiexec", "-n", str(ranks), sys.executable, "-m", "distsort", *args],
                          capture_output=True, text=True, timeout=600)


def _compare(kind: str, data: np.ndarray, job: list, descending: bool, stable: bool,
             argsort: bool, values: str | None, folder: str) -> str | None:
    """What is wrong with the job's output files (None: nothing); job: its input and output
    arguments."""
    n, structured, out = len(data), data.dtype.names is not None, job[2]
    if argsort:
        got = np.load(out) if out.endswith(".npy") else np.fromfile(out, np.int64)
        return None if np.array_equal(got, stable_order(data, descending)) else "WRONG argsort"
    if kind == "records":
        size, width = data.shape[1], int(job[job.index("--key-size") + 1])
        got = np.fromfile(out, np.uint8).reshape(-1, size)
        ok = _records_sorted(got, data, width, descending)
        if ok and stable:
            ok = np.array_equal(got, data[stable_order(_key_bytes(data, width), descending)])
        return None if ok else "WRONG records"
    got = np.load(out) if kind == "npy" else np.fromfile(out, data.dtype)
    want = np.argsort(data, kind="stable") if structured else stable_order(data, descending)
    exact = stable or structured
    if not (same_bits(got, data[want]) if exact else same_values(got, data[want])):
        return "WRONG keys"
    if values:
        moved = _positions(np.load(f"{folder}/vo.npy"), values)
        ok = moved is not None and (np.array_equal(moved, want) if exact else (
            np.array_equal(np.sort(moved), np.arange(n)) and same_bits(got, data[moved])))
        return None if ok else "WRONG values"
    return None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("mode", choices=["api", "files"])
    parser.add_argument("seed", type=int)
    parser.add_argument("cases", type=int)
    parser.add_argument("first", type=int, nargs="?", default=0)
    parser.add_argument("--backend", choices=["cpu", "gpu"], default="cpu")
    args = parser.parse_args()
    comm = None
    if args.mode == "api":
        from mpi4py import MPI

        comm = MPI.COMM_WORLD
    problems, start = 0, time.time()
    for case in range(args.first, args.cases):
        rng = np.random.default_rng([args.seed, case])
        if comm is not None:
            what, problem = api_case(rng, comm, args.backend)
            if comm.Get_rank():
                continue
        else:
            with tempfile.TemporaryDirectory() as folder:
                what, problem = files_case(rng, folder, args.backend)
        if problem:
            problems += TOO_SMALL not in problem
            print(case, what, problem, flush=True)
    if comm is None or comm.Get_rank() == 0:
        ranks = comm.Get_size() if comm is not None else "1-4"
        print(f"{args.mode} seed {args.seed}: {args.cases - args.first} cases on {ranks} "
              f"{args.backend} ranks, "
              f"{problems} problems, {time.time() - start:.0f} s", flush=True)


if __name__ == "__main__":
    main()
