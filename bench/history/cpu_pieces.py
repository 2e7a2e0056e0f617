"""Issue 40: would a rank's finish sort faster as key-range pieces that fit a core's caches
(the senders grouping each destination's keys by their top bits too) than as one NumPy sort of
all its keys, every rank at once?

`mpirun -n P python3 bench/history/cpu_pieces.py N [B,B,...]` (N uint32 keys a rank, uniform
over a rank's range): each rank sorts a fresh copy of its keys in place, whole and as B pieces
of consecutive key ranges (the pieces made before the clock), best of 3 after a warm-up; rank 0
prints the median and the largest over the ranks, ms, and the scatter's classify alone. (Run
397 also timed one C pass cutting a rank's keys into 256 such ranges, then NumPy's sort of each:
the pass cost more than the pieces saved; bench/RESULTS.md, session 47.)
"""

from __future__ import annotations

import sys
import time

import numpy as np
from mpi4py import MPI

from distsort.local import clib, scatter


def best(run, make) -> float:
    times = []
    for _ in range(4):  # the first is a warm-up
        given = make()
        MPI.COMM_WORLD.Barrier()
        start = time.perf_counter()
        run(given)
        times.append(time.perf_counter() - start)
    return min(times[1:])


def in_pieces(keys: np.ndarray, pieces: int) -> tuple[np.ndarray, np.ndarray]:
    """keys grouped by their top bits into `pieces` ranges, and the pieces' bounds."""
    top = (keys >> np.uint32(32 - pieces.bit_length() + 1)).astype(np.int64)
    grouped = keys[np.argsort(top, kind="stable")]
    return grouped, np.searchsorted(np.sort(top), np.arange(pieces + 1))


def main() -> None:
    comm = MPI.COMM_WORLD
    n = int(sys.argv[1])
    counts = [int(b) for b in (sys.argv[2] if len(sys.argv) > 2 else "8,32,128").split(",")]
    keys = np.random.default_rng(comm.Get_rank()).integers(0, 2**32, n, dtype=np.uint32)
    cases = {"whole": best(lambda k: k.sort(), keys.copy)}
    for b in counts:
        grouped, bounds = in_pieces(keys, b)

        def sort_pieces(k, bounds=bounds):
            for lo, hi in zip(bounds[:-1], bounds[1:]):
                k[lo:hi].sort()

        cases[f"{b} pieces"] = best(sort_pieces, grouped.copy)
    splitters = np.stack([np.sort(keys[:: max(1, n // 15)][:15]).astype(np.uint64),
                          np.zeros(15, np.uint64)], axis=1)
    cases["classify (16 ranks)"] = best(
        lambda d: scatter._classifier(clib.library(), keys, 0, splitters)(
            0, n, d, np.zeros(16, np.int64)), lambda: np.empty(n, np.uint16))
    cases["by_rank"] = best(lambda k: scatter.by_rank(k, 0, splitters), keys.copy)
    every = comm.gather(cases)
    if comm.Get_rank() == 0:
        for name in cases:
            got = sorted(c[name] for c in every)
            print(f"P={comm.Get_size()} N={n} {name:>20}: median {1e3 * got[len(got) // 2]:7.1f}"
                  f"  largest {1e3 * got[-1]:7.1f} ms")


if __name__ == "__main__":
    main()
