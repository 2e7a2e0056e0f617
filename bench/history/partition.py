"""Partition kernel profile on one GPU: `python bench/history/partition.py [--n 2^30]`.

Times the count kernel, the scatter kernel and the whole `partition_keys` call separately (CUDA
events, fresh random keys per call, median of --reps after a warm-up) for 2..8 buckets, next to a
device copy of the same bytes as the memory's reference rate, and checks every grouping.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys

import cupy
import numpy as np

here = os.path.dirname(__file__)
sys.path[:0] = [os.path.join(here, ".."), os.path.join(here, "..", "..")]  # dist_sort, the repo
from dist_sort import random_keys  # noqa: E402

from distsort.cli import parse_count  # noqa: E402
from distsort.local import partition  # noqa: E402
from distsort.transport import displacements  # noqa: E402


def event_ms(fn) -> float:
    start, stop = cupy.cuda.Event(), cupy.cuda.Event()
    start.record()
    fn()
    stop.record()
    stop.synchronize()
    return cupy.cuda.get_elapsed_time(start, stop)


def one_rep(n: int, dtype, splitters: np.ndarray) -> dict:
    """Milliseconds of each step on fresh keys; asserts the grouping."""
    buckets = len(splitters) + 1
    keys = random_keys(n, dtype)
    launch = partition.Launch(keys, 0, splitters)
    times = {"count": event_ms(launch.tile_counts)}
    counts = launch.tile_counts()
    per_bucket = cupy.asnumpy(counts.reshape(buckets, launch.tiles).sum(axis=1))
    bases = displacements(per_bucket.astype(np.int64))
    out = cupy.empty_like(keys)
    times["scatter"] = event_ms(lambda: launch.scatter(counts, per_bucket, bases, out, False))
    times["scatter+dest"] = event_ms(lambda: launch.scatter(counts, per_bucket, bases, out, True))
    times["partition_keys"] = event_ms(
        lambda: partition.partition_keys(keys, 0, splitters, False, align=1024))
    times["copy"] = event_ms(keys.copy)
    launch.scatter(counts, per_bucket, bases, out, False)
    got = cupy.searchsorted(cupy.asarray(splitters[:, 0].astype(dtype)), out, side="right")
    want = cupy.repeat(cupy.arange(buckets), cupy.asarray(per_bucket.astype(np.int64)))
    assert bool((got == want).all()), "grouping wrong"
    return times


def profile(n: int, dtype, buckets: int, reps: int) -> dict:
    step = np.iinfo(dtype).max // buckets
    splitters = np.array([[step * (b + 1), 0] for b in range(buckets - 1)], dtype=np.uint64)
    runs = [one_rep(n, dtype, splitters) for _ in range(reps + 1)][1:]  # the first warms up
    return {k: statistics.median(r[k] for r in runs) for k in runs[0]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--n", type=parse_count, default=2**30)
    parser.add_argument("--reps", type=int, default=5)
    args = parser.parse_args()
    print(cupy.cuda.runtime.getDeviceProperties(0)["name"].decode())
    for dtype in (np.uint32, np.uint64):
        n = args.n if dtype == np.uint32 else args.n // 2
        for buckets in (2, 4, 8):
            ms = profile(n, dtype, buckets, args.reps)
            gb = n * np.dtype(dtype).itemsize / 1e9
            cells = " ".join(f"{k} {v:.2f}" for k, v in ms.items())
            rates = (f"copy {2 * gb / ms['copy'] * 1e3:.0f} GB/s, scatter "
                     f"{2 * gb / ms['scatter'] * 1e3:.0f} GB/s, count {gb / ms['count'] * 1e3:.0f}")
            print(f"{np.dtype(dtype).name} n={n} buckets={buckets}: {cells} ms | {rates} GB/s",
                  flush=True)


if __name__ == "__main__":
    main()
