"""Where a one-rank file job's wall clock goes outside its sort: mpirun's own start, the
interpreter and imports, the CUDA start, and what happens after the job (teardown).

`python3 bench/history/job_timeline.py IN.npy [--reps 3] [--args '--device-memory 2GiB']`
(writes IN.npy.out.npy, removed).
Each case is a whole `mpirun -n 1` process, medians of --reps; the job case runs `python -m
distsort sort` under a wrapper that notes (on the machine's one clock, time.time) when the
interpreter reached it and when the interpreter began its exit; mpirun's return ends the wall.
--trees alternates the job between package trees (PYTHONPATH), --exits between the ends of its
process (normal; fast: MPI finalized and os._exit once main returns), --reps times each.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

# the job's process: "normal" returns from main and lets Python, CuPy, MPI and CUDA end as they
# do; "fast" finalizes MPI once main returns and ends the process by os._exit (no finalizers)
WRAP = r"""
import atexit, os, sys, time
t_py = time.time()
from distsort.cli import main
fast = os.environ["TIMELINE_EXIT"] == "fast"
note = lambda *t: print("TIMELINE", t_py, *t, file=sys.stderr, flush=True)
if not fast:
    atexit.register(lambda: note(t_main, time.time()))
rc = main(sys.argv[1:])
t_main = time.time()
if fast:
    from mpi4py import MPI
    sys.stdout.flush()
    MPI.Finalize()
    note(t_main, time.time())
    os._exit(rc)
sys.exit(rc)
"""

MPI = ["mpirun", "-n", "1"]


def wall(cmd: list) -> tuple[float, str]:
    t = time.time()
    done = subprocess.run(cmd, capture_output=True, text=True, check=True)
    return time.time() - t, done.stderr


def job(src: str, extra: list, tree: str, exit: str = "normal") -> dict:
    out = src + ".out.npy"
    subprocess.run(["sync"], check=True)
    env = dict(os.environ, PYTHONPATH=os.path.abspath(tree), TIMELINE_EXIT=exit)
    t0 = time.time()
    done = subprocess.run(MPI + [sys.executable, "-c", WRAP, "sort", src, "-o", out, "--quiet",
                                 *extra], capture_output=True, text=True, check=True, env=env)
    t_end = time.time()
    line = next(s for s in done.stderr.splitlines() if s.startswith("TIMELINE"))
    t_py, t_main, t_exit = map(float, line.split()[1:])
    os.remove(out)
    return {"wall": t_end - t0, "to_interpreter": t_py - t0, "main": t_main - t_py,
            "main_to_exit": t_exit - t_main, "after_python": t_end - t_exit}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("src")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--no-probes", dest="probes", action="store_false",
                    help="the jobs only (not mpirun, the imports and the context alone)")
    ap.add_argument("--trees", default=".", help="package trees to alternate, e.g. .,.abold2")
    ap.add_argument("--exits", default="normal", help="process ends to alternate: normal,fast")
    ap.add_argument("--args", default="", help="more options for sort, e.g. '--device-memory 2GiB'")
    a = ap.parse_args()
    py = sys.executable
    in_python = lambda code: lambda: wall([py, "-c", code])[0]  # noqa: E731
    cases = {
        "mpirun true": lambda: wall(MPI + ["true"])[0],
        "mpirun python pass": lambda: wall(MPI + [py, "-c", "pass"])[0],
        "python import numpy, mpi4py": in_python("import numpy; from mpi4py import MPI"),
        "python import cupy": in_python("import cupy"),
        "python cupy context": in_python("import cupy; cupy.cuda.runtime.free(0)"),
        "python import distsort.cli": in_python("import distsort.cli"),
        "mpirun distsort info": lambda: wall(MPI + [py, "-m", "distsort", "info"])[0],
    }
    res = {}
    for name, f in cases.items() if a.probes else ():
        f()
        res[name] = statistics.median(f() for _ in range(a.reps))
        print(f"{name:32s} {res[name]:.3f} s", flush=True)
    extra = a.args.split()
    cases = [(tree, exit) for tree in a.trees.split(",") for exit in a.exits.split(",")]
    for tree, exit in cases:  # a warm-up each: page cache and kernel caches
        job(a.src, extra, tree, exit)
    runs = {case: [] for case in cases}
    for _ in range(a.reps):  # the cases alternated
        for case in cases:
            runs[case].append(job(a.src, extra, *case))
    for case, got in runs.items():
        name = f"job {case[0]} exit {case[1]}"
        res[name] = {k: statistics.median(r[k] for r in got) for k in got[0]}
        print(f"{name} (medians, s):", " ".join(f"{k} {v:.3f}" for k, v in res[name].items()),
              flush=True)
    imp = subprocess.run([py, "-X", "importtime", "-c", "import distsort.cli"],
                         capture_output=True, text=True).stderr.splitlines()
    top = sorted((ln for ln in imp if ln.startswith("import time:") and "|" in ln
                  and ln.split("|")[1].strip().isdigit()),
                 key=lambda ln: -int(ln.split("|")[1]))[:15]
    print("\n".join(top))
    json.dump(res, open(os.path.join(os.environ.get("OUT", "."), "job_timeline.json"), "w"),
              indent=1)


if __name__ == "__main__":
    main()
