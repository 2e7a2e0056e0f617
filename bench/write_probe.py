"""Why does the out-of-core file job write its output at a third of the floor's speed?

The out-of-core job writes an 8 GiB output round by round (~170 MiB a round, each a new
parallel.FileRange: a shared mapping of the range), from a reused 64 MiB staging buffer, while
it holds its runs (8 GiB of page-locked host memory); the floor writes one mapping of the whole
file from one 8 GiB buffer. This times the writer's own code (parallel.FileRange, 16 threads) in
each of those ways, one factor at a time, GB/s, medians of --reps (dirty pages written out
before each, outside the clock):
- whole: one mapping of the file, 64 MiB pieces from a buffer of the file's size;
- rounds: a mapping per round, pieces from that buffer;
- rounds+ring: a mapping per round, every piece from one reused 64 MiB buffer;
- positioned: as rounds+ring, by positioned writes into the sparse file;
- each again with --size bytes page-locked beside (on a machine with CUDA).
`python bench/write_probe.py --size 8GiB --dir /tmp --out DIR` prints a table and writes
write_probe.json.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
from distsort.io.parallel import FileRange, reserve  # noqa: E402
from distsort.memory import host_empty, parse_size  # noqa: E402
from distsort.workers import use_threads  # noqa: E402

STAGE = 64 << 20


def write(path: str, source: np.ndarray, size: int, round_bytes: int, ring: bool,
          mapped: bool) -> float:
    if os.path.exists(path):
        os.unlink(path)
    os.sync()
    start = time.perf_counter()
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL)
    try:
        if mapped:
            reserve(fd, size)
        else:
            os.ftruncate(fd, size)
        for lo in range(0, size, round_bytes):
            n = min(round_bytes, size - lo)
            target = FileRange(fd, lo, n, mapped)
            for at in range(0, n, STAGE):
                piece = min(STAGE, n - at)
                data = source[:piece] if ring else source[lo + at : lo + at + piece]
                target.write(data, at)
            target.close()
    finally:
        os.close(fd)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--size", type=parse_size, default=8 << 30)
    parser.add_argument("--round", type=parse_size, default=170 << 20)
    parser.add_argument("--dir", default="/tmp")
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--out", default=".")
    args = parser.parse_args()
    use_threads(16)
    size, path = args.size, os.path.join(args.dir, "write_probe.bin")
    source = np.random.default_rng(1).integers(0, 256, size, dtype=np.uint8)
    ways = {"whole": (size, False, True), "rounds": (args.round, False, True),
            "rounds+ring": (args.round, True, True), "positioned": (args.round, True, False)}
    held: list = []
    try:
        import cupy  # noqa: F401

        pinned = [False, True]
    except ImportError:
        pinned = [False]
    rates = {}
    for pin in pinned:
        if pin:
            held.append(host_empty((size,), np.uint8, pinned=True))
        for name, (round_bytes, ring, mapped) in ways.items():
            label = name + (", page-locked held" if pin else "")
            times = [write(path, source, size, round_bytes, ring, mapped)
                     for _ in range(args.reps)]
            rates[label] = size / statistics.median(times) / 1e9
            print(f"{label:>32}: {rates[label]:6.2f} GB/s  "
                  f"({', '.join(f'{t:.2f}' for t in times)} s)", flush=True)
    os.unlink(path)
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "write_probe.json"), "w") as f:
        json.dump({"bytes": size, "round": args.round, "gb_per_s": rates}, f, indent=1)


if __name__ == "__main__":
    main()
