"""Why one dtype's API sort lags another's of the same width: distsort.sort and cupy.sort of
2^--log fresh keys (uint32, int32, float32 of random bits, float32 normal), CUDA events around
each call, the median of the last 7 of 9, and the phases a report gives. Session 45 (run 380b)
found float32 at 2^24 on our one-by-one kernels where int32 went to a graph (radix.MIN_N).

    python3 bench/history/api_dtypes.py [--log 24]
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import cupy as cp  # noqa: E402

import distsort  # noqa: E402
from distsort.report import SortReport  # noqa: E402

KINDS = {"uint32": cp.uint32, "int32": cp.int32, "f32bits": cp.float32}


def fresh(kind: str, n: int, seed: int):
    rs = cp.random.RandomState(seed)
    if kind == "f32normal":
        return rs.standard_normal(n, dtype=cp.float32)
    return rs.randint(0, 2**32, n, dtype=cp.uint64).astype(cp.uint32).view(KINDS[kind])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--log", type=int, default=24)
    n = 1 << ap.parse_args().log
    for kind in (*KINDS, "f32normal"):
        for name, sort in (("distsort", distsort.sort), ("cupy", cp.sort)):
            times = []
            for seed in range(9):
                keys = fresh(kind, n, seed)
                cp.cuda.Device().synchronize()
                start, end = cp.cuda.Event(), cp.cuda.Event()
                start.record()
                out = sort(keys)
                end.record()
                end.synchronize()
                times.append(cp.cuda.get_elapsed_time(start, end))
                assert not bool((out[1:] < out[:-1]).any())
            print(f"{kind} {name}: median {statistics.median(times[2:]):.3f} ms", flush=True)
        report = SortReport()
        distsort.sort(fresh(kind, n, 99), report=report)
        print(f"{kind} report: {report.phases}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
