"""Issue 39's small sizes: where a one-rank sort of 2^20-2^25 keys spends its time.

For each size, fresh random keys every call, CUDA events, medians: cupy.sort, distsort.sort
(the public API), our radix kernels forced at every size (RadixEngine(min_n=2)), our engine
as it routes (RadixEngine(): CUB, or a graph of our kernels for a size seen before), and CUB
through our engine; each also timed on the host alone (the call's own seconds, the device
not waited for), and on the device alone (queued behind a 2 ms spin kernel, so that every
launch is in the stream before the device reaches the first: no gaps between kernels), which
says whether a call is bound by the host's launches or by the device. --profile: a cProfile of
our kernels' host path at the smallest size.

    python3 bench/history/small_sorts.py [--logs 20,22,24] [--calls 21] [--dtypes uint32,int32]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import cupy as cp

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import distsort  # noqa: E402
from distsort.keys import NumericCodec  # noqa: E402
from distsort.local.cub import CubEngine  # noqa: E402
from distsort.local.radix import RadixEngine  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--logs", default="20,21,22,23,24,25")
    ap.add_argument("--calls", type=int, default=21)
    ap.add_argument("--dtypes", default="uint32,int32,argsort")
    ap.add_argument("--json", type=Path)
    ap.add_argument("--profile", action="store_true")
    args = ap.parse_args()
    ours, cub, routed = RadixEngine(min_n=2), CubEngine(), RadixEngine()
    if args.profile:
        _profile(ours, 1 << min(int(x) for x in args.logs.split(",")))
    rows = []
    for dtype in args.dtypes.split(","):
        for log in (int(x) for x in args.logs.split(",")):
            rows.append(_case(dtype, 1 << log, args.calls, ours, cub, routed))
            print(json.dumps(rows[-1]), flush=True)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))
    return 0


def _case(dtype: str, n: int, calls: int, ours: RadixEngine, cub: CubEngine,
          routed: RadixEngine) -> dict:
    rs = cp.random.RandomState(n)
    kind = "uint32" if dtype == "argsort" else dtype
    codec = NumericCodec(cp.dtype(kind), False)

    def fresh():
        return rs.randint(0, 2**31, n, dtype=cp.int64).astype(kind)

    if dtype == "argsort":
        fns = {"cupy": cp.argsort, "api": distsort.argsort, "ours": ours.argsort,
               "cub": cub.argsort, "routed": routed.argsort}
    else:
        fns = {"cupy": cp.sort, "api": distsort.sort,
               "ours": lambda x: ours.sort(x, codec=codec), "cub": cub.sort,
               "routed": lambda x: routed.sort(x, codec=codec)}
    row = {"dtype": dtype, "log": n.bit_length() - 1}
    for name, fn in fns.items():
        for _ in range(3):
            fn(fresh())
        check = fn(fresh())
        row[f"{name}_ok"] = bool(cp.all(check[1:] >= check[:-1])) if dtype != "argsort" else True
        device, host = [], []
        for _ in range(calls):
            x = fresh()
            start, end = cp.cuda.Event(), cp.cuda.Event()
            cp.cuda.Device().synchronize()
            start.record()
            t = time.perf_counter()
            fn(x)
            host.append(1e3 * (time.perf_counter() - t))
            end.record()
            end.synchronize()
            device.append(cp.cuda.get_elapsed_time(start, end))
        row[f"{name}_ms"] = round(statistics.median(device), 4)
        row[f"{name}_host_ms"] = round(statistics.median(host), 4)
        row[f"{name}_gpu_ms"] = round(statistics.median(_behind_spin(fn, fresh)
                                                        for _ in range(calls)), 4)
    return row


_SPIN = r"""
extern "C" __global__ void spin(long long cycles) {
    long long start = clock64();
    while (clock64() - start < cycles) {}
}
"""


def _behind_spin(fn, fresh) -> float:
    """fn's device time alone: its launches queued behind a spin kernel of ~2 ms."""
    spin = cp.RawKernel(_SPIN, "spin")
    x = fresh()
    start, end = cp.cuda.Event(), cp.cuda.Event()
    cp.cuda.Device().synchronize()
    spin((1,), (1,), (cp.int64(4_000_000),))
    start.record()
    fn(x)
    end.record()
    end.synchronize()
    return cp.cuda.get_elapsed_time(start, end)


def _profile(ours: RadixEngine, n: int) -> None:
    import cProfile
    import pstats

    keys = [cp.random.randint(0, 2**31, n, dtype=cp.int64).astype(cp.uint32) for _ in range(200)]
    ours.sort(keys[0])
    cp.cuda.Device().synchronize()
    profile = cProfile.Profile()
    profile.enable()
    for x in keys:
        ours.sort(x)
    profile.disable()
    cp.cuda.Device().synchronize()
    pstats.Stats(profile).sort_stats("tottime").print_stats(25)


if __name__ == "__main__":
    sys.exit(main())
