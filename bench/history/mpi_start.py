"""What a rank's start costs under mpirun, step by step, and what Open MPI's settings change.

`python3 bench/history/mpi_start.py [--ranks 1,2] [--reps 5] [--settings "|pml=ob1|..."]`
Each case is a whole `mpirun -n R` process; rank 0 notes (time.time, one clock for the machine)
when its interpreter began, and after importing NumPy, after MPI_Init (`from mpi4py import MPI`),
after importing CuPy and after making its CUDA context; mpirun's return ends the wall.
Each setting (`|` between settings) is a `;`-separated list of Open MPI MCA parameters given to
every rank as OMPI_MCA_*; the empty setting is the machine's default. Medians of --reps, the
settings alternated.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

RANK = r"""
import sys, time
t = [time.time()]
import numpy
t.append(time.time())
from mpi4py import MPI
t.append(time.time())
import cupy
t.append(time.time())
cupy.cuda.runtime.free(0)
t.append(time.time())
if MPI.COMM_WORLD.Get_rank() == 0:
    print("STEPS", *t, file=sys.stderr, flush=True)
"""
STEPS = ("to_interpreter", "numpy", "mpi_init", "cupy", "context", "after")


def case(ranks: int, setting: str) -> dict:
    env = dict(os.environ)
    names = []
    for item in filter(None, setting.split(";")):
        key, value = item.split("=", 1)
        env[f"OMPI_MCA_{key}"] = value
        names.append(f"OMPI_MCA_{key}")
    cmd = ["mpirun", "-n", str(ranks)] + [a for n in names for a in ("-x", n)]
    t0 = time.time()
    done = subprocess.run(cmd + [sys.executable, "-c", RANK], capture_output=True, text=True,
                          env=env, check=True)
    t_end = time.time()
    marks = [t0] + [float(x) for x in next(
        s for s in done.stderr.splitlines() if s.startswith("STEPS")).split()[1:]] + [t_end]
    return dict(zip(STEPS, (b - a for a, b in zip(marks, marks[1:])), strict=True),
                wall=t_end - t0)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--ranks", default="1,2")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--settings", default="|pml=ob1|pml=ob1;btl=self,vader|opal_cuda_support=0",
                    help="'|'-separated settings, each ';'-separated MCA parameters")
    a = ap.parse_args()
    settings = a.settings.split("|")
    res = {}
    for ranks in map(int, a.ranks.split(",")):
        for s in settings:  # a warm-up each
            case(ranks, s)
        runs = {s: [] for s in settings}
        for _ in range(a.reps):
            for s in settings:
                runs[s].append(case(ranks, s))
        for s, got in runs.items():
            name = f"{ranks} rank(s) [{s or 'default'}]"
            res[name] = {k: statistics.median(r[k] for r in got) for k in got[0]}
            print(f"{name:40s}", " ".join(f"{k} {v:.3f}" for k, v in res[name].items()),
                  flush=True)
    json.dump(res, open(os.path.join(os.environ.get("OUT", "."), "mpi_start.json"), "w"),
              indent=1)


if __name__ == "__main__":
    main()
