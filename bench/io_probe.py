"""How fast can one process move a file's bytes through the page cache? The ways a rank might
read and write its range, each timed alone on one file (page cache warm for reads).

`python bench/io_probe.py --size 4GiB --dir /tmp --out DIR`: for each way, the median of --reps
runs, in GB/s, printed and written to io_probe.json. The buffers are faulted in first (a sort's
staging buffers are reused), so what is timed is the copy through the kernel alone.
- read: preadv of 64 MiB pieces by 1, 4, 8, 16 threads;
- write: pwritev of 64 MiB pieces into a new (truncated) file by 1, 4, 8, 16 threads; the same
  then fsync; through a shared mapping of the file (threads copy into it); O_DIRECT.
"""

from __future__ import annotations

import argparse
import json
import mmap
import os
import statistics
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
from distsort.memory import parse_size  # noqa: E402

PIECE = 64 << 20


def spread(threads: int, size: int, work) -> None:
    with ThreadPoolExecutor(threads) as pool:
        list(pool.map(work, range(0, size, PIECE)))


def read(path: str, buf: np.ndarray, threads: int) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        spread(threads, len(buf), lambda o: os.preadv(fd, [buf[o : o + PIECE]], o))
    finally:
        os.close(fd)


def write(path: str, buf: np.ndarray, threads: int, sync: bool = False, direct: bool = False):
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | (os.O_DIRECT if direct else 0)
    fd = os.open(path, flags)
    try:
        os.ftruncate(fd, len(buf))
        spread(threads, len(buf), lambda o: os.pwritev(fd, [buf[o : o + PIECE]], o))
        if sync:
            os.fsync(fd)
    finally:
        os.close(fd)


def write_mapped(path: str, buf: np.ndarray, threads: int) -> None:
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC)
    try:
        os.ftruncate(fd, len(buf))
        with mmap.mmap(fd, len(buf)) as m:
            spread(threads, len(buf), lambda o: copy_into(m, buf, o))
    finally:
        os.close(fd)


def copy_into(m: mmap.mmap, buf: np.ndarray, at: int) -> None:
    out = np.frombuffer(m, np.uint8, min(PIECE, len(buf) - at), at)
    out[:] = buf[at : at + len(out)]
    del out  # no export of the mapping left when it closes


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--size", type=parse_size, default=4 << 30)
    parser.add_argument("--dir", default="/tmp")
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--out", default=".")
    args = parser.parse_args()
    size = args.size // PIECE * PIECE
    src, dst = os.path.join(args.dir, "probe_in.bin"), os.path.join(args.dir, "probe_out.bin")
    buf = np.frombuffer(mmap.mmap(-1, size), np.uint8)  # page-aligned: O_DIRECT needs that
    buf[:] = np.random.default_rng(1).integers(0, 256, size, dtype=np.uint8)
    write(src, buf, 8)
    ways = {f"read {t} threads": (lambda t=t: read(src, buf, t)) for t in (1, 4, 8, 16)}
    for t in (1, 4, 8, 16):
        ways[f"write {t} threads"] = lambda t=t: write(dst, buf, t)
    ways["write 8 threads + fsync"] = lambda: write(dst, buf, 8, sync=True)
    ways["write mapped 8 threads"] = lambda: write_mapped(dst, buf, 8)
    ways["write O_DIRECT 8 threads"] = lambda: write(dst, buf, 8, direct=True)
    times: dict[str, list[float]] = {name: [] for name in ways}
    for _ in range(args.reps):
        for name, way in ways.items():
            os.path.exists(dst) and os.unlink(dst)
            start = time.perf_counter()
            way()
            times[name].append(time.perf_counter() - start)
    fs = subprocess.run(["df", "-T", args.dir], capture_output=True, text=True).stdout
    rates = {name: size / statistics.median(t) / 1e9 for name, t in times.items()}
    for name, rate in rates.items():
        print(f"{name:>26}: {rate:6.2f} GB/s  ({', '.join(f'{x:.2f}' for x in times[name])} s)")
    print(fs)
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "io_probe.json"), "w") as f:
        json.dump({"bytes": size, "seconds": times, "gb_per_s": rates, "df": fs,
                   "cpus": os.cpu_count()}, f, indent=1)
    for path in (src, dst):
        os.unlink(path)


if __name__ == "__main__":
    main()
