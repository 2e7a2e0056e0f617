"""What a machine's CPUs can give issue 40's CPU sort: the cores it has (and whether the
"cores" are hyperthreads), and the memory rate of 1, 2, 4, ... processes copying at once.

Each process copies its own --mib of uint32 --reps times into a second array after a shared
barrier, into the same array each time (faulted in before the clock) and, with --fresh, into
a new one each time (as a sort's buffers are: large arrays are mapped anew by each
allocation, and every page is faulted in as it is first written); the rate counts the bytes
read and written by all of them over the slowest one's time. A sort on 16 ranks cannot run
faster than its passes over memory at the 16-process rate.

    python3 bench/history/host_rate.py [--procs 1,2,4,8,16] [--mib 256] [--reps 5] [--fresh]
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import subprocess
import time

import numpy as np


def _copy(barrier, mib: int, reps: int, fresh: bool, queue) -> None:
    a = np.arange(mib << 18, dtype=np.uint32)
    b = np.empty_like(a)
    b[:] = 1  # faulted in before the clock
    barrier.wait()
    start = time.perf_counter()
    for _ in range(reps):
        if fresh:
            b = np.empty_like(a)
        np.copyto(b, a)
    queue.put(time.perf_counter() - start)


def rate(procs: int, mib: int, reps: int, fresh: bool = False) -> float:
    """GB/s read and written by `procs` processes copying at once (into new arrays: fresh)."""
    barrier, queue = mp.Barrier(procs), mp.Queue()
    workers = [mp.Process(target=_copy, args=(barrier, mib, reps, fresh, queue))
               for _ in range(procs)]
    for w in workers:
        w.start()
    slowest = max(queue.get() for _ in workers)
    for w in workers:
        w.join()
    return 2 * procs * reps * (mib << 20) / slowest / 1e9


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--procs", default="1,2,4,8,16")
    parser.add_argument("--mib", type=int, default=256)
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--fresh", action="store_true", help="also into new arrays")
    args = parser.parse_args()
    lscpu = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
    wanted = ("Model name", "CPU(s):", "Thread(s) per core", "Core(s) per socket", "Socket(s)",
              "NUMA node(s)", "L3 cache")
    print("\n".join(line for line in lscpu.splitlines() if line.startswith(wanted)))
    print(f"os.cpu_count {os.cpu_count()}, usable {len(os.sched_getaffinity(0))}")
    for p in (int(x) for x in args.procs.split(",")):
        gbs = rate(p, args.mib, args.reps)
        fresh = f", into new arrays {rate(p, args.mib, args.reps, True):6.1f}" if args.fresh else ""
        print(f"{p:3d} processes copying {args.mib} MiB each: {gbs:6.1f} GB/s{fresh}")


if __name__ == "__main__":
    main()
