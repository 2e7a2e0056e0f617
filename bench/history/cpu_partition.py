"""Issue 40: on a node's cores, what the CPU partition's C scatter (local/scatter.py: classify,
then scatter) costs a rank beside one NumPy sort of the same keys, every rank at once.

`mpirun -n P python3 bench/history/cpu_partition.py N` (N uint32 keys a rank; threads as a
job's rank gets them, workers.threads_for): the best of 3 timed rounds after a warm-up, the
median and the largest over the ranks, ms: by_rank alone and up to the barrier after it,
np.sort alike, and a copy into new memory.
"""

from __future__ import annotations

import sys
import time

import numpy as np
from mpi4py import MPI

from distsort import workers
from distsort.local import scatter


def main() -> None:
    comm = MPI.COMM_WORLD
    p, rank, n = comm.Get_size(), comm.Get_rank(), int(sys.argv[1])
    workers.use_threads(workers.threads_for(p))
    rng = np.random.default_rng(rank)
    keys = rng.integers(0, 2**32, n, dtype=np.uint32)
    cuts = np.sort(rng.integers(0, 2**32, p - 1, dtype=np.uint32))
    splitters = np.stack([cuts.astype(np.uint64), np.zeros(p - 1, np.uint64)], axis=1)
    times: dict[str, list] = {}

    def note(name: str, seconds: float) -> None:
        times.setdefault(name, []).append(seconds)

    for _ in range(4):
        comm.Barrier()
        start = time.perf_counter()
        scatter.by_rank(keys, 0, splitters)
        note("scatter", time.perf_counter() - start)
        comm.Barrier()
        note("scatter_all", time.perf_counter() - start)
        start = time.perf_counter()
        np.sort(keys)
        note("npsort", time.perf_counter() - start)
        comm.Barrier()
        note("npsort_all", time.perf_counter() - start)
        start = time.perf_counter()
        np.empty_like(keys)[:] = keys
        note("newcopy", time.perf_counter() - start)
        comm.Barrier()
    everyone = comm.gather(times)
    if rank == 0:
        print(f"P={p} n={n} threads={workers.threads()}")
        for name in times:
            best = [min(t[name][1:]) for t in everyone]
            print(f"  {name}: median over ranks {np.median(best) * 1e3:.1f} ms, "
                  f"largest {max(best) * 1e3:.1f}")


if __name__ == "__main__":
    main()
