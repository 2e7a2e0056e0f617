"""Issue 40, for the next session: would one process with T threads sort uint32 keys faster as
a sample sort on its own threads (splitters from a sample, the C scatter into T key ranges on
the threads, then each range sorted by NumPy on a thread: no merge) than as the CPU engine
sorts them now (T pieces sorted on the threads, then log2(T) merge passes)?

`python3 bench/history/thread_buckets.py N [T,T,...]` (N uint32 keys, uniform; T threads, the
pool's size set as a rank's would be): each way on a fresh copy, best of 3 after a warm-up,
output checked, ms.
"""

from __future__ import annotations

import functools
import sys
import time

import numpy as np

from distsort import workers
from distsort.local import scatter
from distsort.local.engine import NumpyEngine


def bucketed(keys: np.ndarray, ranges: int) -> np.ndarray:
    """keys sorted as `ranges` key ranges: splitters from a sample, grouped by the C scatter
    on the pool's threads, each range sorted in place on a thread."""
    rng = np.random.default_rng(0)
    sample = np.sort(keys[rng.integers(0, len(keys), 256 * ranges)])
    cuts = sample[np.arange(1, ranges) * len(sample) // ranges].astype(np.uint64)
    splitters = np.stack([cuts, np.full(ranges - 1, len(keys), np.uint64)], axis=1)
    grouping = scatter.Grouping(keys, 0, splitters)
    counts = grouping.total
    (grouped,) = grouping.place(np.cumsum(counts) - counts, len(keys), len(keys))
    ends = np.cumsum(counts).tolist()
    workers.each([functools.partial(lambda a, b: grouped[a:b].sort(), a, b)
                  for a, b in zip([0] + ends[:-1], ends)])
    return grouped[: len(keys)]


def best(sort, keys: np.ndarray) -> float:
    times = []
    for _ in range(4):  # the first is a warm-up
        fresh = keys.copy()
        start = time.perf_counter()
        out = sort(fresh)
        times.append(time.perf_counter() - start)
        assert len(out) == len(keys) and np.all(out[:-1] <= out[1:])
    return min(times[1:])


def main() -> None:
    n = int(sys.argv[1])
    counts = [int(t) for t in (sys.argv[2] if len(sys.argv) > 2 else "1,2,4,8,16").split(",")]
    keys = np.random.default_rng(1).integers(0, 2**32, n, dtype=np.uint32)
    print(f"np.sort, one thread: {1e3 * best(np.sort, keys):.1f} ms")
    for t in counts:
        workers.use_threads(t)
        engine = NumpyEngine()
        now = best(lambda k, e=engine: e.sort(k, overwrite=True), keys)
        ranges = best(lambda k, t=t: bucketed(k, max(t, 2)), keys)
        print(f"T={t}: the engine (pieces, then merges) {1e3 * now:.1f} ms; "
              f"key ranges {1e3 * ranges:.1f} ms")


if __name__ == "__main__":
    main()
