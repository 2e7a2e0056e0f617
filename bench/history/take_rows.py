"""Rows taken in an order on one GPU:
`python bench/history/take_rows.py [--rows 2^25] [--bytes 100]`.

Times `distsort.local.rows.take` (CUDA events, median of --reps after a warm-up, a fresh order
each call) in the two orders the records path takes its rows in: `grouped` (a stable grouping
by one of --ranks destinations: the sender's take, near-sequential reads) and `random` (a
permutation: the finish's take). The floor is a device-to-device copy of the same bytes
(cudaMemcpy). With --rows-per-lane R,R,... each R is compiled and timed in turn
(rows.ROWS_PER_LANE), and with --max-blocks B,B,... each grid size. Every output is checked
against CuPy's indexing. Prints one JSON object; --out DIR also writes it there.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import statistics
import sys

import cupy
import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", ".."))  # the repo
from distsort.cli import parse_count  # noqa: E402
from distsort.local import rows as rows_module  # noqa: E402


def timed(fn, reps: int) -> float:
    fn()
    times = []
    for _ in range(reps):
        start, end = cupy.cuda.Event(), cupy.cuda.Event()
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(cupy.cuda.get_elapsed_time(start, end))
    return statistics.median(times)


def orders(n: int, ranks: int, reps: int) -> dict:
    """Fresh orders of each kind, one a timed call (and one for the warm-up)."""
    def grouped():
        dest = cupy.random.randint(0, ranks, n, dtype=np.int32).astype(np.uint8)
        return cupy.argsort(dest, kind="stable")

    return {"grouped": [grouped() for _ in range(reps + 1)],
            "random": [cupy.random.permutation(n) for _ in range(reps + 1)]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rows", type=parse_count, default=2**25)
    parser.add_argument("--bytes", type=int, default=100, help="bytes a row")
    parser.add_argument("--ranks", type=int, default=2)
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--rows-per-lane", default=str(rows_module.ROWS_PER_LANE))
    parser.add_argument("--max-blocks", default=str(rows_module.MAX_BLOCKS),
                        help="grid sizes to compare (rows.MAX_BLOCKS)")
    parser.add_argument("--out")
    args = parser.parse_args()
    n, width = args.rows, args.bytes
    table = cupy.random.randint(0, 2**31, (n * width // 4,), dtype=np.int64)
    table = table.astype(np.uint32).view(np.uint8).reshape(n, width)
    result = {"rows": n, "bytes": width, "device": cupy.cuda.runtime.getDeviceProperties(0)[
        "name"].decode()}
    copy = cupy.empty_like(table)
    result["floor_copy_ms"] = timed(lambda: copy.data.copy_from_device(table.data, table.nbytes),
                                    args.reps)
    result["floor_GBps"] = 2 * table.nbytes / result["floor_copy_ms"] / 1e6
    made = orders(n, args.ranks, args.reps)
    for per_lane, blocks in itertools.product(*(
            [int(x) for x in arg.split(",")] for arg in (args.rows_per_lane, args.max_blocks))):
        rows_module.ROWS_PER_LANE, rows_module.MAX_BLOCKS = per_lane, blocks
        for kind, fresh in made.items():
            calls = iter(fresh)
            check = fresh[0]
            if not bool((rows_module.take(table, check) == table[check]).all()):
                raise SystemExit(f"take R={per_lane} blocks={blocks} {kind}: wrong rows")
            ms = timed(lambda calls=calls: rows_module.take(table, next(calls)), args.reps)
            name = f"R{per_lane}_b{blocks}_{kind}"
            result[f"{name}_ms"], result[f"{name}_GBps"] = ms, 2 * table.nbytes / ms / 1e6
    print(json.dumps(result, indent=1), flush=True)
    if args.out:
        with open(os.path.join(args.out, f"take_rows_{width}B.json"), "w") as f:
            json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
