"""What a machine's CPUs can give issue 40's CPU sort: the cores it has (and whether the
"cores" are hyperthreads), and the memory rate of 1, 2, 4, ... processes copying at once.

Each process copies its own --mib of uint32 (faulted in before the clock) --reps times into a
second array after a shared barrier; the rate counts the bytes read and written by all of
them over the slowest one's time. A sort on 16 ranks cannot run faster than its passes over
memory at the 16-process rate.

    python3 bench/history/host_rate.py [--procs 1,2,4,8,16] [--mib 256] [--reps 5]
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import subprocess
import time

import numpy as np


def _copy(barrier, mib: int, reps: int, queue) -> None:
    a = np.arange(mib << 18, dtype=np.uint32)
    b = np.empty_like(a)
    b[:] = 1  # faulted in before the clock
    barrier.wait()
    start = time.perf_counter()
    for _ in range(reps):
        np.copyto(b, a)
    queue.put(time.perf_counter() - start)


def rate(procs: int, mib: int, reps: int) -> float:
    """GB/s read and written by `procs` processes copying at once."""
    barrier, queue = mp.Barrier(procs), mp.Queue()
    workers = [mp.Process(target=_copy, args=(barrier, mib, reps, queue)) for _ in range(procs)]
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
    args = parser.parse_args()
    lscpu = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
    wanted = ("Model name", "CPU(s):", "Thread(s) per core", "Core(s) per socket", "Socket(s)",
              "NUMA node(s)", "L3 cache")
    print("\n".join(line for line in lscpu.splitlines() if line.startswith(wanted)))
    print(f"os.cpu_count {os.cpu_count()}, usable {len(os.sched_getaffinity(0))}")
    for p in (int(x) for x in args.procs.split(",")):
        gbs = rate(p, args.mib, args.reps)
        print(f"{p:3d} processes copying {args.mib} MiB each: {gbs:6.1f} GB/s")


if __name__ == "__main__":
    main()
