"""The CPU backend against one process's NumPy sort, in memory, in one run.

`python bench/cpu_sort.py [--cases u32,f64,u64+u64] [--count 2^26] [--ranks 1,2,4] [--out DIR]
[--rounds R]`

For each case: one process's `np.sort` of all the data (for pairs `np.argsort` and two gathers),
then distsort on the CPU backend at each rank count (this script's worker under mpiexec), each
timed on a fresh copy of the input made before the clock starts, a warm-up first, the median of
--reps, every output checked (check.verify). The data are `distsort gen`'s uniform keys, the
same whatever the rank count. The table gives seconds, the speed-up over np.sort and the largest
peak host memory of a rank, then each rank count's phases (the slowest rank's, last run), its
threads, its sort (our radix sort or NumPy's: local/lsd.py chooses), its C kernels library and
the warm-up's time: a process's first sort, as a file job's is (its new arrays' pages cost
most there: bench/history/first_sorts.py); cpu_sort.json has every run. With --rounds, np.sort
and the rank counts are alternated that many times (medians over all of them, and each round's
ratios: a machine whose own sort drifts from minute to minute, as nvidia-h200's CPUs did by
2.1-3.1 s, skews a ratio taken across minutes).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
from distsort.cli import parse_count  # noqa: E402
from distsort.gen import generate  # noqa: E402

CASES = {"u32": (np.uint32, None), "f64": (np.float64, None), "u64+u64": (np.uint64, np.uint64)}


def data(case: str, start: int, stop: int) -> tuple[np.ndarray, np.ndarray | None]:
    """Elements [start, stop) of the case's global keys (and values)."""
    keys, values = CASES[case]
    made = generate("uniform", np.dtype(keys), start, stop, seed=1)
    return made, None if values is None else generate("uniform", np.dtype(values), start,
                                                      stop, seed=2)


def numpy_seconds(case: str, count: int, reps: int) -> list[float]:
    """One process sorting everything: np.sort, or for pairs np.argsort and two gathers; the
    first of the times is the warm-up's."""
    keys, values = data(case, 0, count)
    times = []
    for _ in range(reps + 1):  # the first is a warm-up
        fresh = keys.copy()
        start = time.perf_counter()
        if values is None:
            out = np.sort(fresh)
        else:
            order = np.argsort(fresh, kind="stable")
            out, _ = fresh[order], values[order]
        times.append(time.perf_counter() - start)
        assert np.all(out[:-1] <= out[1:])
    return times


def worker(case: str, count: int, reps: int) -> None:
    """One rank of a distsort run: prints the run's JSON on rank 0."""
    from mpi4py import MPI

    import distsort
    from distsort import workers
    from distsort.check import verify
    from distsort.io.reader import rank_range
    from distsort.local import clib, lsd
    from distsort.report import SortReport

    comm = MPI.COMM_WORLD
    keys, values = data(case, *rank_range(count, comm.Get_rank(), comm.Get_size()))
    times, verdict = [], None
    for rep in range(reps + 1):  # the first is a warm-up
        fresh, report = keys.copy(), SortReport()
        comm.Barrier()
        start = time.perf_counter()
        if values is None:
            out = distsort.sort(fresh, comm, backend="cpu", report=report)
        else:
            out, moved = distsort.sort_pairs(fresh, values, comm, backend="cpu", report=report)
        times.append(comm.allreduce(time.perf_counter() - start, op=MPI.MAX))
        if rep == reps:
            pairs = {} if values is None else {"values_in": values, "values_out": moved}
            verdict = verify(comm, keys, out, **pairs)
    peak = comm.allreduce(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, op=MPI.MAX)
    phases = comm.gather(report.phases)  # the last run's, the slowest rank's of each
    if comm.Get_rank() == 0:
        slowest = {name: max(p.get(name, 0.0) for p in phases) for name in phases[0]}
        print(json.dumps({"seconds": times[1:], "first": times[0], "ok": verdict.ok,
                          "message": verdict.message,
                          "peak_rss_bytes": peak * 1024, "phases": slowest,
                          "threads": workers.threads(), "c_kernels": clib.library_path(),
                          "radix": clib.library_path() is not None and lsd.wins(
                              keys.dtype.itemsize, 0 if values is None else values.itemsize)}))


def distsort_run(case: str, count: int, ranks: int, reps: int) -> dict:
    here = os.path.dirname(sys.executable)
    mpiexec = os.path.join(here, "mpiexec") if os.path.exists(os.path.join(here, "mpiexec")) \
        else "mpiexec"
    env = dict(os.environ, DISTSORT_BACKEND="cpu", OMPI_ALLOW_RUN_AS_ROOT="1",
               OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    cmd = [mpiexec, "-n", str(ranks), sys.executable, __file__, "--worker", case, "--count",
           str(count), "--reps", str(reps)]
    done = subprocess.run(cmd, capture_output=True, text=True, env=env, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def one_round(case: str, count: int, ranks: list[str], reps: int) -> dict:
    """np.sort, then distsort at each rank count, one after another."""
    first, *base = numpy_seconds(case, count, reps)
    return {"numpy_first": first, "numpy_seconds": base,
            "distsort": {p: distsort_run(case, count, int(p), reps) for p in ranks}}


def together(runs: list[dict]) -> dict:
    """One rank count's runs of every round as one: every time, the last round's details."""
    return {**runs[-1], "seconds": [t for run in runs for t in run["seconds"]],
            "ok": all(run["ok"] for run in runs)}


def round_ratios(one: dict) -> str:
    """A round's np.sort median and each rank count's speed-up over it."""
    base = statistics.median(one["numpy_seconds"])
    return f"{base:.3f} " + " ".join(f"{base / statistics.median(run['seconds']):.2f}x"
                                     for run in one["distsort"].values())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cases", default="u32,f64,u64+u64")
    parser.add_argument("--count", type=parse_count, default=2**26,
                        help="keys in all (f64 and pairs: half as many)")
    parser.add_argument("--ranks", default="1,2,4")
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=1,
                        help="np.sort and every rank count alternated this many times")
    parser.add_argument("--out", default=".")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker(args.worker, args.count, args.reps)
        return
    results = {"cpus": os.cpu_count(), "cases": {}}
    print(f"{'case':>10} {'keys':>12} {'np.sort s':>10} " + " ".join(
        f"{'P=' + p + ' s':>9} {'x':>5} {'peak GB':>7}" for p in args.ranks.split(",")))
    for case in args.cases.split(","):
        count = args.count if case == "u32" else args.count // 2
        rounds = [one_round(case, count, args.ranks.split(","), args.reps)
                  for _ in range(args.rounds)]
        first, base = rounds[0]["numpy_first"], [t for r in rounds for t in r["numpy_seconds"]]
        runs = {p: together([r["distsort"][p] for r in rounds]) for p in rounds[0]["distsort"]}
        results["cases"][case] = {"count": count, "numpy_seconds": base, "numpy_first": first,
                                  "distsort": runs, "rounds": rounds}
        line = f"{case:>10} {count:>12} {statistics.median(base):>10.3f} "
        for run in runs.values():
            med = statistics.median(run["seconds"])
            line += (f"{med:>9.3f} {statistics.median(base) / med:>5.2f} "
                     f"{run['peak_rss_bytes'] / 1e9:>7.2f} " + ("" if run["ok"] else "FAILED "))
        print(line, flush=True)
        if args.rounds > 1:  # each round's own ratio: the machine's state drifts between rounds
            print(f"{'':>10} by round, np.sort s and each P's speed-up over it: "
                  + "; ".join(round_ratios(r) for r in rounds))
        for p, run in runs.items():
            phases = ", ".join(f"{k} {v:.3f}" for k, v in run["phases"].items())
            sort = "our radix sort" if run.get("radix") else "NumPy's sort"
            print(f"{'':>10} P={p}: {run['threads']} threads a rank, {sort}, C kernels "
                  f"{run['c_kernels']}; phases (s): {phases}; the process's first sort "
                  f"{run['first']:.3f} s (np.sort's {first:.3f})")
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "cpu_sort.json"), "w") as f:
        json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
