"""Where the sample phase's time goes: `mpirun -n P python bench/sample.py [--n 2^30]`.

Times, on fresh random uint32 keys per run (median of --reps after a warm-up, slowest rank,
device synchronized at both ends of each step): local_sample (draw this rank's sample), the
gather of the samples at rank 0 alone, the ordering of the gathered sample on rank 0 alone, and
choose_splitters as a whole (gather, order, broadcast).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys

import cupy
import numpy as np
from mpi4py import MPI

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
from dist_sort import random_keys, timed  # noqa: E402

from distsort.cli import parse_count  # noqa: E402
from distsort.pipeline import _host_order  # noqa: E402
from distsort.runtime import get_runtime  # noqa: E402
from distsort.splitters import choose_splitters, local_sample  # noqa: E402

COMM = MPI.COMM_WORLD


def one_run(rt, n: int) -> dict:
    keys = random_keys(n, np.uint32)
    counts = COMM.allgather(n)
    out = {}
    out["local_sample"] = timed(lambda: out.setdefault(
        "rows", local_sample([keys], counts, COMM.Get_rank(), rt.backend)))
    rows = out.pop("rows")
    out["gather"] = timed(lambda: COMM.gather(rows, root=0))
    everything = np.concatenate(COMM.allgather(rows))
    out["order_on_rank0"] = timed(
        lambda: COMM.Get_rank() == 0 and _host_order(rt, [everything[:, 0]]))
    out["choose_splitters"] = timed(
        lambda: choose_splitters(COMM, rows, lambda cols: _host_order(rt, cols)))
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
        for step in ("local_sample", "gather", "order_on_rank0", "choose_splitters"):
            print(f"  {step:>16}: {statistics.median(r[step] for r in runs) * 1e3:.3f}")


if __name__ == "__main__":
    main()
