"""The CPU radix sort (distsort/local/lsd.c: plain LSD below its HYBRID_BYTES, one MSD pass and
then in-cache LSD passes per bucket from there) against NumPy's sort, ns a key, by size and
key type, in 1 and in P processes at once (each sorting its own keys, as P ranks of a node do
in their finish: they share the memory's bandwidth). Fresh random keys each call; the best of
--reps; each result checked against NumPy's.

    python3 bench/history/lsd_sizes.py [--logs 20,22,24,26] [--procs 1,16] [--out DIR]
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from distsort.local import lsd  # noqa: E402

CASES = {"u32": (np.uint32, None), "u64": (np.uint64, None),
         "u32+u32": (np.uint32, np.uint32), "u64+u64": (np.uint64, np.uint64)}


def one(case: str, n: int, reps: int, seed: int, start) -> dict:
    """ns a key of lsd and of NumPy (np.sort; pairs: a stable argsort and two gathers)."""
    dtype, vdtype = CASES[case]
    rng = np.random.default_rng(seed)
    best = {"lsd": np.inf, "numpy": np.inf}
    for _ in range(reps):
        for way in best:
            keys = rng.integers(0, np.iinfo(dtype).max, n, dtype=dtype, endpoint=True)
            values = None if vdtype is None else np.arange(n, dtype=vdtype)
            start.wait()  # every process's call at once
            began = time.perf_counter()
            if way == "lsd":
                got = (lsd.sort(keys, overwrite=True) if values is None
                       else lsd.sort_pairs(keys, values, overwrite=True)[0])
            elif values is None:
                got = np.sort(keys)
            else:
                order = np.argsort(keys, kind="stable")
                got, _ = keys[order], values[order]
            took = time.perf_counter() - began
            if way == "lsd" and values is None:
                assert np.all(got[1:] >= got[:-1]), "lsd: not sorted"
            best[way] = min(best[way], took)
    return {k: v * 1e9 / n for k, v in best.items()}


def _worker(args) -> dict:
    case, n, reps, seed = args
    return one(case, n, reps, seed, _worker.start)


def _init(start) -> None:
    _worker.start = start


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--logs", default="20,22,24,26")
    ap.add_argument("--procs", default="1")
    ap.add_argument("--cases", default=",".join(CASES))
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    rows = []
    for procs in map(int, args.procs.split(",")):
        start = multiprocessing.Barrier(procs)
        with multiprocessing.Pool(procs, initializer=_init, initargs=(start,)) as pool:
            for log in map(int, args.logs.split(",")):
                for case in args.cases.split(","):
                    got = pool.map(_worker, [(case, 1 << log, args.reps, s) for s in range(procs)])
                    row = {"procs": procs, "log": log, "case": case,
                           "lsd_ns": max(g["lsd"] for g in got),
                           "numpy_ns": max(g["numpy"] for g in got)}
                    rows.append(row)
                    print(f"P={procs} 2^{log} {case:8s} lsd {row['lsd_ns']:6.2f} ns/key, NumPy "
                          f"{row['numpy_ns']:6.2f}: x{row['numpy_ns'] / row['lsd_ns']:.2f}",
                          flush=True)
    if args.out:
        Path(args.out).mkdir(parents=True, exist_ok=True)
        Path(args.out, "lsd_sizes.json").write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
