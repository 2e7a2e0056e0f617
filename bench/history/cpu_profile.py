"""Issue 40: where a CPU rank's time goes inside each phase of an in-memory sort, function by
function (cProfile), every rank at once.

`mpirun -n P python3 bench/history/cpu_profile.py N [OUT]` (N uint32 keys a rank, uniform):
a warm-up sort, then --reps sorts of fresh copies under the profiler; each rank writes its
functions by own time and by cumulative time to OUT/profile_rank<r>.txt, and rank 0 prints the
phases (the slowest rank's, medians of the reps) and its own table.
"""

from __future__ import annotations

import cProfile
import io
import os
import pstats
import statistics
import sys
import time

import numpy as np
from mpi4py import MPI

import distsort
from distsort.gen import generate
from distsort.io.reader import rank_range
from distsort.report import SortReport

REPS = 3


def main() -> None:
    comm = MPI.COMM_WORLD
    rank, count = comm.Get_rank(), int(sys.argv[1])
    out = sys.argv[2] if len(sys.argv) > 2 else "."
    lo, hi = rank_range(count * comm.Get_size(), rank, comm.Get_size())
    keys = generate("uniform", np.dtype(np.uint32), lo, hi, seed=1)
    distsort.sort(keys.copy(), comm, backend="cpu")  # warm-up
    profiler, walls, phases = cProfile.Profile(), [], []
    for _ in range(REPS):
        fresh, report = keys.copy(), SortReport()
        comm.Barrier()
        start = time.perf_counter()
        profiler.enable()
        sorted_keys = distsort.sort(fresh, comm, backend="cpu", report=report)
        profiler.disable()
        walls.append(comm.allreduce(time.perf_counter() - start, op=MPI.MAX))
        phases.append({k: comm.allreduce(v, op=MPI.MAX) for k, v in report.phases.items()})
        assert np.all(sorted_keys[:-1] <= sorted_keys[1:])
    text = io.StringIO()
    stats = pstats.Stats(profiler, stream=text)
    stats.sort_stats("tottime").print_stats(25)
    stats.sort_stats("cumulative").print_stats(40)
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, f"profile_rank{rank}.txt"), "w") as f:
        f.write(text.getvalue())
    if rank == 0:
        print(f"P={comm.Get_size()} N={count}: wall {statistics.median(walls):.3f} s; phases "
              + ", ".join(f"{k} {statistics.median(p[k] for p in phases):.3f}"
                          for k in phases[0]))


if __name__ == "__main__":
    main()
