"""What a small call of the public API pays beyond its sort, on one rank: distsort.sort against
cupy.sort on the same fresh keys (CUDA events, medians), then a cProfile of many calls, the
host functions that take the time. With --backend cpu: NumPy keys against np.sort, timed by
the host's clock.

    python3 bench/api_overhead.py [--log 20] [--calls 200] [--dtype uint32] [--backend cpu]
"""

from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import distsort  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--log", type=int, default=20)
    ap.add_argument("--calls", type=int, default=200)
    ap.add_argument("--dtype", default="uint32")
    ap.add_argument("--backend", choices=("gpu", "cpu"), default="gpu")
    args = ap.parse_args()
    n, xp = 1 << args.log, _array_module(args.backend)
    rs = xp.random.RandomState(1)

    def fresh():
        return rs.randint(0, 2**31, n, dtype=xp.int64).astype(args.dtype)

    timed = _events_timer(xp) if args.backend == "gpu" else _host_timer

    for _ in range(3):  # warm-up: kernels, pools, the runtime
        distsort.sort(fresh())
        xp.sort(fresh())
    ours = statistics.median(timed(distsort.sort, fresh()) for _ in range(args.calls // 4))
    theirs = statistics.median(timed(xp.sort, fresh()) for _ in range(args.calls // 4))
    print(f"{args.dtype} 2^{args.log}: distsort.sort {ours:.3f} ms, {xp.__name__}.sort "
          f"{theirs:.3f} ms, x{theirs / ours:.2f}", flush=True)
    keys = [fresh() for _ in range(args.calls)]
    synchronize = xp.cuda.Device().synchronize if args.backend == "gpu" else (lambda: None)
    synchronize()
    profile = cProfile.Profile()
    profile.enable()
    for x in keys:
        distsort.sort(x)
    synchronize()
    profile.disable()
    text = io.StringIO()
    stats = pstats.Stats(profile, stream=text)
    stats.sort_stats("tottime").print_stats(30)
    stats.sort_stats("cumulative").print_stats(40)
    stats.print_callers("wait|acquire")  # who waits on another thread
    print(text.getvalue())
    return 0


def _array_module(backend: str):
    if backend == "gpu":
        import cupy

        return cupy
    import numpy

    return numpy


def _events_timer(cp):
    def timed(fn, x) -> float:
        start, end = cp.cuda.Event(), cp.cuda.Event()
        cp.cuda.Device().synchronize()
        start.record()
        out = fn(x)
        end.record()
        end.synchronize()
        assert out.size == x.size
        return cp.cuda.get_elapsed_time(start, end)

    return timed


def _host_timer(fn, x) -> float:
    started = time.perf_counter()
    out = fn(x)
    elapsed = time.perf_counter() - started
    assert out.size == x.size
    return elapsed * 1e3


if __name__ == "__main__":
    sys.exit(main())
