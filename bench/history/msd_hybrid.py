"""Issue 39's question, measured: does a sort of 32-bit keys with fewer passes over device memory
beat our four LSD passes? The hybrid: our onesweep passes order the keys by their top bits
[split, 32) (a histogram and two passes), then one block a bucket of equal top bits sorts its
low bits in shared memory and writes it once (msd_buckets.cu): 28 bytes of traffic a key against
36.

`python3 bench/history/msd_hybrid.py [--logs 26,27,28] [--splits 16] [--runs 7] [--out DIR]`

Each call on fresh random keys (uniform uint32), CUDA events around it after a warm-up, the
median of --runs; cupy.sort, our engine (four LSD passes) and the hybrid in the same run, every
hybrid result checked against cupy.sort's, and skewed keys (few distinct top bits: buckets
too large for a block, sorted apart) checked too. Variants of the bucket stage: `cubB` (CUB's
BlockRadixSort, B-bit digits, from the CCCL headers CuPy ships) and `copy` (the buckets moved
unsorted: the stage's floor); runs 285-288 also had `ballot`, the onesweep tile's warp ranking
(1bfa8c8).

Measured on one H200 (bench/RESULTS.md, runs 285-288): not adopted; the bucket stage's ranking
costs about what the two device-memory passes it replaces do.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import statistics

import cupy as cp
import numpy as np

from distsort.cuda_source import compiled, source
from distsort.local.radix import RadixEngine, onesweep_defines, radix_sort

KERNELS = "../bench/history/msd_buckets.cu"  # beside this probe, named from distsort/
CUB_ITEMS = 18  # 4,608 keys a block: 2^28 uniform keys' 2^16 buckets hold 4,096 +- 64


@functools.cache
def _module(variant: str):
    """msd_buckets.cu for 'cubB' (CUB's block sort, B-bit digits; 'copy': 4)."""
    if variant == "copy":
        return _module("cub4")
    defines = onesweep_defines() + (("CUB_ITEMS", CUB_ITEMS), ("CUB_BITS", int(variant[3:])))
    options = ("-std=c++17",) + tuple(f"-D{k}={v}" for k, v in defines)
    options += tuple(f"-I{d}" for d in cccl_includes())
    return compiled(source(KERNELS), options, ("bucket_bounds", "bucket_sort_cub"))


@functools.cache
def cccl_includes() -> list[str]:
    """The folders holding CUB's and libcu++'s headers (CuPy ships them)."""
    found = []
    roots = [os.path.dirname(cp.__file__), "/usr/local/cuda/include",
             os.path.join(os.environ.get("CUDA_PATH", "/usr/local/cuda"), "include")]
    for want in ("cub/block/block_radix_sort.cuh", "cuda/std/type_traits"):
        for root in roots:
            hits = [d for d, _, files in os.walk(root)
                    if os.path.join(d, os.path.basename(want)).endswith(want)
                    and os.path.basename(want) in files]
            if hits:
                found.append(hits[0][: -len(os.path.dirname(want)) - 1])
                break
    print("CCCL headers:", found, flush=True)
    return found


def hybrid_sort(keys, split: int = 16, timings: dict | None = None, variant: str = "cub6"):
    """uint32 keys sorted: top bits by onesweep passes, each bucket's low bits in one block."""
    n, buckets = keys.size, 1 << (32 - split)
    work, scratch = keys.copy(), cp.empty_like(keys)
    marks = [cp.cuda.Event() for _ in range(4)]
    marks[0].record()
    top, _ = radix_sort(work, None, "keys", split, 32, 0, overwrite=True, scratch=scratch)
    marks[1].record()
    other = scratch if top is work else work
    bounds = cp.empty(buckets + 1, cp.uint32)
    over, overs = cp.empty(buckets, cp.uint32), cp.zeros(1, cp.uint32)
    mod = _module(variant)
    mod.get_function("bucket_bounds")(((buckets + 256) // 256,), (256,),
                                      (top, np.uint64(n), np.int32(split), np.uint32(buckets),
                                       bounds))
    marks[2].record()
    bits = 0 if variant == "copy" else split  # copy: the buckets moved unsorted, the floor
    mod.get_function("bucket_sort_cub")((buckets,), (256,),
                                        (top, other, bounds, np.int32(bits), over, overs))
    marks[3].record()
    left = int(overs.get()[0])
    if left:
        for b in over[:left].get().tolist():
            lo, hi = (int(x) for x in bounds[b : b + 2].get())
            other[lo:hi] = cp.sort(top[lo:hi])
    if timings is not None:
        marks[3].synchronize()
        timings.setdefault("top", []).append(cp.cuda.get_elapsed_time(marks[0], marks[1]))
        timings.setdefault("bounds", []).append(cp.cuda.get_elapsed_time(marks[1], marks[2]))
        timings.setdefault("buckets", []).append(cp.cuda.get_elapsed_time(marks[2], marks[3]))
        timings.setdefault("over", []).append(left)
    return other


def fresh(n: int, seed: int):
    return cp.random.RandomState(seed).randint(0, 1 << 32, size=n, dtype=cp.int64).astype(cp.uint32)


def timed(call, n: int, runs: int) -> float:
    times = []
    for r in range(runs + 1):
        x = fresh(n, 1000 + r)
        start, end = cp.cuda.Event(), cp.cuda.Event()
        start.record()
        out = call(x)
        end.record()
        end.synchronize()
        del out
        if r:  # the first is the warm-up
            times.append(cp.cuda.get_elapsed_time(start, end))
    return statistics.median(times)


def checked(n: int, split: int, variant: str) -> None:
    """The hybrid's output equals cupy.sort's, for uniform keys and for skewed ones."""
    skewed = fresh(n, 7) & cp.uint32(0x0003FFFF) | cp.uint32(0x40000000)  # 4 top-16 buckets
    narrow = fresh(n, 8) % cp.uint32(1000)
    for x in (fresh(n, 5), skewed, narrow):
        got, want = hybrid_sort(x, split, variant=variant), cp.sort(x)
        if not bool((got == want).all()):
            raise SystemExit(f"hybrid sort wrong: n={n} split={split} {variant}")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--logs", default="26,27,28")
    ap.add_argument("--splits", default="16")
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--variants", default="copy,cub4,cub6")
    ap.add_argument("--out", default=".")
    args = ap.parse_args()
    engine, rows = RadixEngine(0), []
    for log in (int(s) for s in args.logs.split(",")):
        n = 1 << log
        cub = timed(cp.sort, n, args.runs)
        ours = timed(engine.sort, n, args.runs)
        print(f"2^{log}: cupy {cub:.3f} ms, lsd {ours:.3f} ({cub / ours:.2f}x)", flush=True)
        for split in (int(s) for s in args.splits.split(",")):
            for variant in args.variants.split(","):
                try:
                    if variant != "copy":
                        checked(n, split, variant)
                except Exception as exc:  # a variant that does not build: said, the rest go on
                    print(f"  {variant}: {type(exc).__name__}: {str(exc)[:2000]}", flush=True)
                    continue
                parts: dict = {}
                hybrid = timed(functools.partial(hybrid_sort, split=split, timings=parts,
                                                 variant=variant), n, args.runs)
                row = {"log": log, "split": split, "variant": variant, "cupy_ms": cub,
                       "lsd_ms": ours, "hybrid_ms": hybrid,
                       **{f"{k}_ms": statistics.median(parts[k])
                          for k in ("top", "bounds", "buckets")},
                       "buckets_over": max(parts["over"])}
                rows.append(row)
                print(f"  split {split} {variant}: hybrid {hybrid:.3f} ({cub / hybrid:.2f}x): top "
                      f"{row['top_ms']:.3f}, bounds {row['bounds_ms']:.3f}, buckets "
                      f"{row['buckets_ms']:.3f} ({8 * n / row['buckets_ms'] / 1e9:.2f} TB/s), "
                      f"over {row['buckets_over']}", flush=True)
    with open(os.path.join(args.out, "msd_hybrid.json"), "w") as f:
        json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
