"""What a small call of the public API pays beyond its sort, on one rank: distsort.sort against
cupy.sort on the same fresh keys (CUDA events, medians), then a cProfile of many calls, the
host functions that take the time.

    python3 bench/api_overhead.py [--log 20] [--calls 200] [--dtype uint32]
"""

from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import distsort  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--log", type=int, default=20)
    ap.add_argument("--calls", type=int, default=200)
    ap.add_argument("--dtype", default="uint32")
    args = ap.parse_args()
    import cupy as cp

    n = 1 << args.log
    rs = cp.random.RandomState(1)

    def fresh():
        return rs.randint(0, 2**31, n, dtype=cp.int64).astype(args.dtype)

    def timed(fn, x) -> float:
        start, end = cp.cuda.Event(), cp.cuda.Event()
        cp.cuda.Device().synchronize()
        start.record()
        out = fn(x)
        end.record()
        end.synchronize()
        assert out.size == n
        return cp.cuda.get_elapsed_time(start, end)

    for _ in range(3):  # warm-up: kernels, pools, the runtime
        distsort.sort(fresh())
        cp.sort(fresh())
    ours = statistics.median(timed(distsort.sort, fresh()) for _ in range(args.calls // 4))
    cub = statistics.median(timed(cp.sort, fresh()) for _ in range(args.calls // 4))
    print(f"{args.dtype} 2^{args.log}: distsort.sort {ours:.3f} ms, cupy.sort {cub:.3f} ms, "
          f"x{cub / ours:.2f}", flush=True)
    keys = [fresh() for _ in range(args.calls)]
    cp.cuda.Device().synchronize()
    profile = cProfile.Profile()
    profile.enable()
    for x in keys:
        distsort.sort(x)
    cp.cuda.Device().synchronize()
    profile.disable()
    text = io.StringIO()
    stats = pstats.Stats(profile, stream=text)
    stats.sort_stats("tottime").print_stats(30)
    stats.sort_stats("cumulative").print_stats(40)
    stats.print_callers("wait|acquire")  # who waits on another thread
    print(text.getvalue())
    return 0


if __name__ == "__main__":
    sys.exit(main())
