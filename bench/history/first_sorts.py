"""Why a CPU file job's partition and exchange take several times what bench/cpu_sort.py
measures: that times sorts after a warm-up, a job runs one sort in a fresh process. Here each
rank sorts fresh uniform uint32 keys --calls times in one process (every rank at once, after
a barrier), and rank 0 prints each call's wall and phases (the slowest rank's).

    mpiexec -n P python bench/history/first_sorts.py [--count 2^26] [--calls 3]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import numpy as np  # noqa: E402
from mpi4py import MPI  # noqa: E402

import distsort  # noqa: E402
from distsort.report import SortReport  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--count", default="2^26", help="keys in all")
    ap.add_argument("--calls", type=int, default=3)
    args = ap.parse_args()
    comm = MPI.COMM_WORLD
    rank, p = comm.Get_rank(), comm.Get_size()
    base, power = (int(x) for x in args.count.split("^")) if "^" in args.count else (
        int(args.count), 1)
    n = base**power // p
    for call in range(args.calls):
        keys = np.random.default_rng(1000 * call + rank).integers(0, 2**32, n, dtype=np.uint32)
        report = SortReport()
        comm.Barrier()
        start = time.perf_counter()
        out = distsort.sort(keys, report=report)
        comm.Barrier()
        wall = time.perf_counter() - start
        phases = comm.gather(dict(report.phases))
        if not bool(comm.allreduce(bool(np.all(out[1:] >= out[:-1])), op=MPI.LAND)):
            raise AssertionError("a shard is not sorted")
        if rank == 0:
            slowest = {k: max(ph.get(k, 0.0) for ph in phases) for k in phases[0]}
            print(f"P={p} call {call}: {wall:.3f} s; " +
                  ", ".join(f"{k} {v:.3f}" for k, v in slowest.items()), flush=True)


if __name__ == "__main__":
    main()
