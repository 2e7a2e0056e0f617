"""One radix pass over pieces against a plain one: `python bench/pieces_pass.py [--n 2^30]`.

Times, on one GPU with CUDA events (median of --reps after a warm-up, fresh keys each call), one
onesweep pass of uint32 keys over n keys lying as one array (radix_onesweep), as one piece read
by radix_onesweep_pieces, and as --pieces pieces of random sizes (mean n / pieces) placed in a
random order (the landing sort's pass over every block's runs of two digits: ~200 k pieces).
--items sets the keys a thread of key-only passes (radix.KEY_ITEMS) for both kernels. Every
output is checked against a pass over the pieces' keys put together. Prints one JSON object.
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
from distsort.local import radix  # noqa: E402
from distsort.local.tiles import piece_rows  # noqa: E402


def layout(n: int, pieces: int, rng) -> tuple[np.ndarray, np.ndarray]:
    """Rows and input starts of `pieces` pieces of n rows in all, placed in a random order."""
    cuts = np.sort(rng.integers(0, n, pieces - 1))
    rows = np.diff(np.concatenate([[0], cuts, [n]])).astype(np.int64)
    place = rng.permutation(pieces)
    at = np.empty(pieces, np.int64)
    at[place] = np.cumsum(rows[place]) - rows[place]
    return rows, at


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--n", type=parse_count, default=2**30)
    parser.add_argument("--pieces", type=parse_count, default=196608)
    parser.add_argument("--items", type=int, default=radix.KEY_ITEMS[4])
    parser.add_argument("--reps", type=int, default=5)
    args = parser.parse_args()
    radix.KEY_ITEMS[4] = args.items  # before the module compiles
    n, tile, rng = args.n, radix.tile_keys(4, "keys"), np.random.default_rng(1)
    src, dst = cupy.empty(n, np.uint32), cupy.empty(n, np.uint32)
    dummy, low, shift = cupy.empty(1, np.uint32), np.uint32(0), (8, 8)
    flags = cupy.empty(radix.flag_words(-(-n // tile), n), np.uint32)
    counter = cupy.zeros(1, np.uint32)
    layouts = {"one piece": (np.array([n]), np.array([0])), "pieces": layout(n, args.pieces, rng)}
    tables = {k: piece_rows(cupy.asarray(r), cupy.asarray(a.astype(np.uint32)), n, tile)
              for k, (r, a) in layouts.items()}
    gen = cupy.random.default_rng(2)

    def run(kind: str):
        whole = src if kind == "plain" else cupy.concatenate(
            [src[int(a) : int(a + r)] for r, a in zip(*layouts[kind])])
        digit = (whole >> np.uint32(8)) & np.uint32(255)
        counts = cupy.bincount(digit, minlength=256)
        bases = (cupy.cumsum(counts) - counts).astype(np.uint32)
        want = whole[cupy.argsort(digit)]  # stable for integer keys
        flags.fill(0)
        counter.fill(0)
        start, end = cupy.cuda.Event(), cupy.cuda.Event()
        pass_args = (bases, counter, flags)
        start.record()
        if kind == "plain":
            radix.onesweep((src, dummy), (dst, dummy), radix.KEYS_ONLY, shift, low, pass_args,
                           n >= radix.WIDE_ROWS, -(-n // tile))
        else:
            radix.onesweep_pieces((src, dummy), (dst, dummy), radix.KEYS_ONLY, shift, low,
                                  pass_args, tables[kind])
        end.record()
        end.synchronize()
        if not bool((dst == want).all()):
            raise SystemExit(f"{kind}: wrong output")
        return cupy.cuda.get_elapsed_time(start, end)

    result = {"n": n, "piece count": args.pieces, "items": args.items,
              "device": cupy.cuda.runtime.getDeviceProperties(0)["name"].decode()}
    for kind in ("plain", "one piece", "pieces", "plain", "one piece", "pieces"):
        times = []
        for _ in range(args.reps + 1):
            src[...] = gen.integers(0, 2**32, n, dtype=np.uint64).astype(np.uint32)
            times.append(run(kind))
        result.setdefault(kind, []).append(statistics.median(times[1:]))
    print(json.dumps(result))


if __name__ == "__main__":
    main()
