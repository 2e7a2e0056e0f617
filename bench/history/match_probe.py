"""Issue 39: the onesweep pass's warp ranking, its lanes of equal digits found by 8 ballots (the
engine's) or by one shared-memory atomicOr a key (RADIX_MATCH_ATOMIC=1), each build compiled
apart and timed on the same fresh keys, alternated.

`python3 bench/history/match_probe.py [--logs 24,26,28] [--runs 7] [--rounds 2]`

Our engine at every size (min_n=0), CUDA events after a warm-up, medians; every result checked
against cupy.sort / cupy.argsort (odd sizes: partial tiles).
"""

from __future__ import annotations

import argparse
import statistics

import cupy as cp

import distsort.local.radix as rx
from distsort.local.radix import RadixEngine


def build(atomic: int) -> RadixEngine:
    rx.DEFINES["RADIX_MATCH_ATOMIC"] = atomic
    rx._module.cache_clear()
    rx._kernel.cache_clear()
    return RadixEngine(min_n=0)


def keys(n: int, dtype, seed: int):
    rs = cp.random.RandomState(seed)
    return rs.randint(0, 2**62, n, dtype=cp.int64).astype(cp.uint64).astype(dtype)


def timed(call, n: int, dtype, runs: int) -> float:
    times = []
    for r in range(runs + 1):
        x = keys(n, dtype, 100 + r)
        start, end = cp.cuda.Event(), cp.cuda.Event()
        start.record()
        call(x)
        end.record()
        end.synchronize()
        times.append(cp.cuda.get_elapsed_time(start, end))
    return statistics.median(times[1:])


def checked(engine: RadixEngine) -> None:
    for n in (1000, 123457, (1 << 22) + 3):
        for dtype in (cp.uint32, cp.uint64):
            x = keys(n, dtype, 7)
            assert bool((engine.sort(x) == cp.sort(x)).all()), ("sort", n, dtype)
            assert bool((engine.argsort(x) == cp.argsort(x)).all()), ("argsort", n, dtype)
            k, v = engine.sort_pairs(x, cp.arange(n, dtype=cp.uint32))
            assert bool((v == cp.argsort(x).astype(cp.uint32)).all()), ("pairs", n, dtype)
        few = keys(n, cp.uint32, 8) % cp.uint32(3)  # many equal digits in a warp
        assert bool((engine.argsort(few) == cp.argsort(few)).all()), ("ties", n)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--logs", default="24,26,28")
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--rounds", type=int, default=2)
    args = ap.parse_args()
    for round_ in range(args.rounds):
        for atomic in (0, 1):
            engine = build(atomic)
            if round_ == 0:
                checked(engine)
            for log in (int(s) for s in args.logs.split(",")):
                n = 1 << log
                row = []
                for name, dtype, call in (("u32", cp.uint32, engine.sort),
                                          ("u64", cp.uint64, engine.sort),
                                          ("argsort-u32", cp.uint32, engine.argsort)):
                    row.append(f"{name} {timed(call, n, dtype, args.runs):.3f}")
                print(f"round {round_} atomic {atomic} 2^{log}: " + ", ".join(row) + " ms",
                      flush=True)


if __name__ == "__main__":
    main()
