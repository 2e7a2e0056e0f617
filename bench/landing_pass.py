"""A rank's landing sort on one GPU: `python bench/landing_pass.py [--n 2^30] [--ranks 4]`.

Builds what a rank of --ranks receives in the chunked exchange (--chunks from every source, each
block sorted by the senders' first digit: the low bucket_bits(ranks) bits of key - low, keys
spread evenly over a range of 2^64 / ranks values or 2^32 / ranks), then times, with CUDA
events, the landing work of every block (`land`) and what is left after the last block
(`finish`), with the second digit landed (DISTSORT_LANDING_SECOND's mode) and without,
alternated twice. In the exchange the landing work runs beside the transfers; the finish is
what follows the last one. Median of --reps after a warm-up, fresh keys every call, every
output checked sorted. Prints one JSON object; --out DIR also writes it there.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys

import cupy
import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
from distsort.cli import parse_count  # noqa: E402
from distsort.exchange import aligned_displacements  # noqa: E402
from distsort.local import segments  # noqa: E402
from distsort.local.landing import LandingSort  # noqa: E402


def received(n: int, ranks: int, chunks: int, dtype, seed: int) -> tuple:
    """(receive buffer, block counts, starts, first-digit table, low, span) of one rank."""
    bits, width = segments.bucket_bits(ranks), 8 * np.dtype(dtype).itemsize
    span = (1 << width) // ranks - 1
    low = span + 1  # rank 1's range
    rng = cupy.random.default_rng(seed)
    counts = np.full(ranks * chunks, n // (ranks * chunks), np.int64)
    counts[-1] += n - counts.sum()
    starts = aligned_displacements(counts, 1024)
    keys = cupy.empty(int(starts[-1] + counts[-1]), dtype)
    table = np.empty((len(counts), 1 << bits), np.int64)
    for b, (at, k) in enumerate(zip(starts, counts)):
        block = (rng.integers(0, span, int(k), dtype=np.uint64, endpoint=True)
                 + np.uint64(low)).astype(dtype)
        digit = ((block - dtype(low)) & dtype((1 << bits) - 1)).astype(np.uint8)
        keys[int(at) : int(at + k)] = block[cupy.argsort(digit)]
        table[b] = cupy.asnumpy(cupy.bincount(digit, minlength=1 << bits))
    return keys, counts, starts, (bits, table), low, span


def one_sort(args, dtype, second: bool, seed: int) -> dict:
    """Land every block, then finish: ms of each, the output checked."""
    keys, counts, starts, presorted, low, span = received(args.n, args.ranks, args.chunks,
                                                          dtype, seed)
    out_starts = np.cumsum(counts) - counts
    scratch = cupy.empty(keys.size, dtype)
    marks = [cupy.cuda.Event() for _ in range(3)]
    marks[0].record()
    sorter = LandingSort(dtype, counts, starts, out_starts, low, span, presorted, None, second)
    for b in range(len(counts)):
        sorter.land(b, [keys], [scratch])
    sorter.prepare()
    marks[1].record()
    out = sorter.finish([keys], [scratch])[0]
    marks[2].record()
    marks[2].synchronize()
    if not bool((out[1:] >= out[:-1]).all()) or out.size != args.n:
        raise SystemExit(f"not sorted (second={second})")
    return {"land": cupy.cuda.get_elapsed_time(marks[0], marks[1]),
            "finish": cupy.cuda.get_elapsed_time(marks[1], marks[2]), "on": sorter.second}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--n", type=parse_count, default=2**30, help="keys the rank receives")
    parser.add_argument("--ranks", type=int, default=4)
    parser.add_argument("--chunks", type=int, default=3)
    parser.add_argument("--dtype", default="uint32")
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    dtype = np.dtype(args.dtype).type
    result = {"n": args.n, "ranks": args.ranks, "chunks": args.chunks, "dtype": args.dtype,
              "device": cupy.cuda.runtime.getDeviceProperties(0)["name"].decode()}
    for second in (False, True, False, True):  # alternated
        runs = [one_sort(args, dtype, second, seed) for seed in range(args.reps + 1)][1:]
        key = "second" if second else "first"
        row = {k: statistics.median(r[k] for r in runs) for k in ("land", "finish")}
        row["total"] = row["land"] + row["finish"]
        row["mode taken"] = runs[0]["on"]
        result.setdefault(key, []).append(row)
    text = json.dumps(result, indent=1)
    print(text)
    if args.out:
        os.makedirs(args.out, exist_ok=True)
        name = f"landing_pass_{args.dtype}_p{args.ranks}.json"
        with open(os.path.join(args.out, name), "w") as f:
            f.write(text)


if __name__ == "__main__":
    main()
