"""Would an output's mapping written after its pages were faulted in ahead write faster?

The file job writes its output by copying into a shared mapping of a fallocated file (io/
parallel.FileRange); each first touch of a page faults (a page-cache page allocated, zeroed,
the file system told). If the faults can be taken ahead, by threads while the job reads and
sorts, the write itself may run at copy speed. This times, GB/s of --size bytes, medians of
--reps (dirty pages written out before each, outside the clock), 16 threads:
- fresh: reserve, map, copy (the writer today);
- populate: madvise(MADV_POPULATE_WRITE) over the mapping in pieces on the threads (populate@N:
  on N threads), then the copy, each timed;
- touch: one byte a page written by the threads (NumPy, strided), then the copy;
- race@N: N threads of their own populate front to back while the copy runs at once;
- inline: each thread populates its 4 MiB piece, then copies into it (no pass ahead).
`python bench/history/populate_probe.py --size 8GiB --dir /tmp --out DIR`.
"""

from __future__ import annotations

import argparse
import ctypes
import itertools
import json
import os
import statistics
import sys
import threading
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, ROOT)
from distsort.io.parallel import FileRange, reserve  # noqa: E402
from distsort.memory import parse_size  # noqa: E402
from distsort.workers import spread, use_threads  # noqa: E402

MADV_POPULATE_WRITE = 23
PIECE = 64 << 20
THREADS = 16
libc = ctypes.CDLL(None, use_errno=True)
libc.madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]


def populate(view: np.ndarray, threads: int) -> None:
    base = view.ctypes.data

    def one(lo: int, hi: int) -> None:
        if libc.madvise(base + lo, hi - lo, MADV_POPULATE_WRITE) != 0:
            raise OSError(ctypes.get_errno(), "madvise")

    use_threads(threads)
    try:
        spread(one, len(view), PIECE)
    finally:
        use_threads(THREADS)


def populate_race(view: np.ndarray, threads: int) -> None:
    """populate's pieces taken front to back by `threads` threads of its own (not the pool's,
    which the copy uses), each piece once, a page already in left as it is."""
    base, pieces = view.ctypes.data, itertools.count()

    def run() -> None:
        for k in pieces:
            lo = k * PIECE
            if lo >= len(view):
                return
            libc.madvise(base + lo, min(PIECE, len(view) - lo), MADV_POPULATE_WRITE)

    workers = [threading.Thread(target=run) for _ in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()


def touch(view: np.ndarray) -> None:
    def one(lo: int, hi: int) -> None:
        view[lo:hi:4096] = 0

    spread(one, len(view), PIECE)


def inline(view: np.ndarray, source: np.ndarray) -> None:
    base = view.ctypes.data

    def one(lo: int, hi: int) -> None:
        if libc.madvise(base + lo, hi - lo, MADV_POPULATE_WRITE) != 0:
            raise OSError(ctypes.get_errno(), "madvise")
        np.copyto(view[lo:hi], source[lo:hi])

    spread(one, len(view), 4 << 20)


def once(path: str, source: np.ndarray, way: str) -> dict:
    if os.path.exists(path):
        os.unlink(path)
    os.sync()
    size = len(source)
    t0 = time.perf_counter()
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL)
    try:
        reserve(fd, size)
        target = FileRange(fd, 0, size, True)
        t1 = time.perf_counter()
        if way.startswith("populate"):
            populate(target._bytes, int(way.partition("@")[2] or THREADS))
        elif way == "touch":
            touch(target._bytes)
        t2 = time.perf_counter()
        if way.startswith("race"):  # populated by N threads while the copy runs behind
            ahead = threading.Thread(target=populate_race, args=(target._bytes,
                                                                 int(way.partition("@")[2])))
            ahead.start()
            for at in range(0, size, PIECE):
                target.write(source[at : at + PIECE], at)
            ahead.join()
        elif way == "inline":
            inline(target._bytes, source)
        else:
            for at in range(0, size, PIECE):
                target.write(source[at : at + PIECE], at)
        t3 = time.perf_counter()
        target.close()
    finally:
        os.close(fd)
    t4 = time.perf_counter()
    return {"setup": t1 - t0, "ahead": t2 - t1, "copy": t3 - t2, "close": t4 - t3}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--size", type=parse_size, default=8 << 30)
    parser.add_argument("--dir", default="/tmp")
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--threads", type=int, default=16)
    parser.add_argument("--out", default=".")
    parser.add_argument("--ways", default="fresh,populate,touch,inline",
                        help="populate@N: populated by N threads")
    args = parser.parse_args()
    global THREADS
    THREADS = args.threads
    use_threads(args.threads)
    path = os.path.join(args.dir, "populate_probe.bin")
    source = np.random.default_rng(1).integers(0, 256, args.size, dtype=np.uint8)
    results = {}
    for _ in range(args.reps):
        for way in args.ways.split(","):
            results.setdefault(way, []).append(once(path, source, way))
    os.unlink(path)
    table = {}
    for way, runs in results.items():
        table[way] = {k: statistics.median(r[k] for r in runs) for k in runs[0]}
        t = table[way]
        print(f"{way:>9}: ahead {t['ahead']:.3f} s, copy {t['copy']:.3f} s "
              f"({args.size / t['copy'] / 1e9:.2f} GB/s), setup {t['setup']:.3f}, "
              f"close {t['close']:.3f}", flush=True)
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "populate_probe.json"), "w") as f:
        json.dump({"bytes": args.size, "threads": args.threads, "median_s": table,
                   "runs": results}, f, indent=1)


if __name__ == "__main__":
    main()
