"""Where the sample phase's time goes: `mpirun -n P python bench/history/sample.py [--n 2^30]`.

Times, on fresh random uint32 keys per run (median of --reps after a warm-up, slowest rank,
device synchronized at both ends of each step): local_sample (draw this rank's sample), the
all-to-all that gives every rank every sample, alone, and choose_splitters as a whole (that
all-to-all, the ordering of the sample on every rank, the picks).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys

import cupy
import numpy as np
from mpi4py import MPI

here = os.path.dirname(__file__)
sys.path[:0] = [os.path.join(here, ".."), os.path.join(here, "..", "..")]  # dist_sort, the repo
from dist_sort import random_keys, timed  # noqa: E402

from distsort.cli import parse_count  # noqa: E402
from distsort.runtime import get_runtime  # noqa: E402
from distsort.steps.sample import local_sample, sample_sizes  # noqa: E402
from distsort.steps.splitters import choose_splitters  # noqa: E402

COMM = MPI.COMM_WORLD


def one_run(rt, n: int) -> dict:
    keys = random_keys(n, np.uint32)
    counts = COMM.allgather(n)
    out = {}
    out["local_sample"] = timed(lambda: out.setdefault(
        "rows", local_sample([keys], counts, COMM.Get_rank(), rt.backend)))
    rows = out.pop("rows")
    p = COMM.Get_size()
    send = np.full(p, len(rows), dtype=np.int64)
    sizes = sample_sizes(counts)
    recv = np.asarray(sizes, dtype=np.int64)
    out["share"] = timed(lambda: rt.transport.alltoallv([rows], send, recv, np.zeros(p, np.int64)))
    out["choose_splitters"] = timed(lambda: choose_splitters(rt, rows, sizes))
    out["rows_per_rank"] = len(rows)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--n", type=parse_count, default=2**30, help="keys per rank")
    parser.add_argument("--reps", type=int, default=7)
    args = parser.parse_args()
    rt = get_runtime(COMM, "gpu")
    runs = [one_run(rt, args.n) for _ in range(args.reps + 1)][1:]
    cupy.get_default_memory_pool().free_all_blocks()
    if COMM.Get_rank() == 0:
        print(f"P={COMM.Get_size()} n={args.n} per rank, sample rows per rank "
              f"{runs[0]['rows_per_rank']}; ms (median of {args.reps}):")
        for step in ("local_sample", "share", "choose_splitters"):
            print(f"  {step:>16}: {statistics.median(r[step] for r in runs) * 1e3:.3f}")


if __name__ == "__main__":
    main()
