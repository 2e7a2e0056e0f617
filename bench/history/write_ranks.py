"""Why does a 4-rank file job on one node write its output at a quarter of one rank's speed?

`mpirun -n P python bench/history/write_ranks.py --size 16GiB --threads 16,4,1 --dir /tmp`:
rank 0 makes a file of --size bytes with its blocks reserved (parallel.reserve), then every
rank writes its P-th of it through the writer's own code (parallel.FileRange: a shared mapping
of its range), 64 MiB pieces from one reused buffer, with T pool threads, for each T given;
GB/s of the whole file (its size over the slowest rank's time), medians of --reps. Dirty pages
are written out before each (os.sync, outside the clock).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

import numpy as np
from mpi4py import MPI

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, ROOT)
from distsort.io.parallel import FileRange, reserve  # noqa: E402
from distsort.memory import parse_size  # noqa: E402
from distsort.workers import use_threads  # noqa: E402

COMM = MPI.COMM_WORLD
STAGE = 64 << 20


def once(path: str, size: int, source: np.ndarray) -> float:
    rank, p = COMM.Get_rank(), COMM.Get_size()
    if rank == 0:
        if os.path.exists(path):
            os.unlink(path)
        os.sync()
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL)
        reserve(fd, size)
        os.close(fd)
    COMM.Barrier()
    lo, hi = size * rank // p, size * (rank + 1) // p
    start = time.perf_counter()
    fd = os.open(path, os.O_RDWR)
    target = FileRange(fd, lo, hi - lo, True)
    for at in range(0, hi - lo, STAGE):
        target.write(source[: min(STAGE, hi - lo - at)], at)
    target.close()
    os.close(fd)
    return COMM.allreduce(time.perf_counter() - start, op=MPI.MAX)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--size", type=parse_size, default=16 << 30)
    parser.add_argument("--threads", default="16,4,1")
    parser.add_argument("--dir", default="/tmp")
    parser.add_argument("--reps", type=int, default=2)
    args = parser.parse_args()
    path = os.path.join(args.dir, "write_ranks.bin")
    source = np.random.default_rng(COMM.Get_rank()).integers(0, 256, STAGE, dtype=np.uint8)
    for threads in [int(t) for t in args.threads.split(",")]:
        use_threads(threads)
        times = [once(path, args.size, source) for _ in range(args.reps)]
        if COMM.Get_rank() == 0:
            print(f"P={COMM.Get_size()} T={threads:>2}: "
                  f"{args.size / statistics.median(times) / 1e9:6.2f} GB/s "
                  f"({', '.join(f'{t:.2f}' for t in times)} s)", flush=True)
    if COMM.Get_rank() == 0:
        os.unlink(path)


if __name__ == "__main__":
    main()
