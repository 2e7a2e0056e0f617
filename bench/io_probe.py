"""How fast can one process move a file's bytes through the page cache? The ways a rank might
read and write its range, each timed alone on one file (page cache warm for reads).

`python bench/io_probe.py --size 4GiB --dir /tmp --out DIR`: for each way, the median of --reps
runs, in GB/s, printed and written to io_probe.json. The buffers are faulted in first (a sort's
staging buffers are reused), so what is timed is the copy through the kernel alone.
- read: preadv of 64 MiB pieces by 1, 4, 8, 16 threads;
- write: pwritev of 64 MiB pieces into a new (truncated) file by 1, 4, 8, 16 threads; the same
  then fsync; through a shared mapping of the file (threads copy into it, or first fault their
  piece's pages in with MADV_POPULATE_WRITE), its blocks reserved by fallocate first or not;
  O_DIRECT; pwritev into a file whose blocks fallocate reserved first; and, to tell one file's
  lock from the machine's limit, 16 threads each writing a file of its own.
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
MADV_POPULATE_WRITE = 23  # Linux 5.14


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


def write_mapped(path: str, buf: np.ndarray, threads: int, populate: bool = False,
                 allocate: bool = False) -> None:
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC)
    try:
        (os.posix_fallocate(fd, 0, len(buf)) if allocate else os.ftruncate(fd, len(buf)))
        with mmap.mmap(fd, len(buf)) as m:
            spread(threads, len(buf), lambda o: copy_into(m, buf, o, populate))
    finally:
        os.close(fd)


def copy_into(m: mmap.mmap, buf: np.ndarray, at: int, populate: bool) -> None:
    n = min(PIECE, len(buf) - at)
    if populate:
        m.madvise(MADV_POPULATE_WRITE, at, n)
    out = np.frombuffer(m, np.uint8, n, at)
    out[:] = buf[at : at + n]
    del out  # no export of the mapping left when it closes


def write_allocated(path: str, buf: np.ndarray, threads: int) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    try:
        os.posix_fallocate(fd, 0, len(buf))
        spread(threads, len(buf), lambda o: os.pwritev(fd, [buf[o : o + PIECE]], o))
    finally:
        os.close(fd)


def write_files(path: str, buf: np.ndarray, threads: int) -> None:
    """Each thread writes its share of buf to a file of its own (path.K)."""
    share = len(buf) // threads

    def one(k: int) -> None:
        fd = os.open(f"{path}.{k}", os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
        try:
            for o in range(k * share, (k + 1) * share, PIECE):
                os.pwritev(fd, [buf[o : o + PIECE]], o - k * share)
        finally:
            os.close(fd)

    with ThreadPoolExecutor(threads) as pool:
        list(pool.map(one, range(threads)))


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
    ways["write mapped 16 threads"] = lambda: write_mapped(dst, buf, 16)
    ways["write mapped+populate 16 threads"] = lambda: write_mapped(dst, buf, 16, True)
    ways["write fallocated mapped 16 threads"] = lambda: write_mapped(dst, buf, 16, False, True)
    ways["write fallocated mapped+populate 16 threads"] = lambda: write_mapped(
        dst, buf, 16, True, True)
    ways["write fallocated 16 threads"] = lambda: write_allocated(dst, buf, 16)
    ways["write 16 files 16 threads"] = lambda: write_files(dst, buf, 16)
    times: dict[str, list[float]] = {name: [] for name in ways}
    for _ in range(args.reps):
        for name, way in ways.items():
            for old in [dst] + [f"{dst}.{k}" for k in range(16)]:
                os.path.exists(old) and os.unlink(old)
            start = time.perf_counter()
            way()
            times[name].append(time.perf_counter() - start)
    fs = subprocess.run(["df", "-T", args.dir], capture_output=True, text=True).stdout
    fs += f"kernel {os.uname().release}; " + " ".join(
        f"{k}={open('/proc/sys/vm/' + k).read().strip()}"
        for k in ("dirty_ratio", "dirty_background_ratio", "dirty_bytes"))
    rates = {name: size / statistics.median(t) / 1e9 for name, t in times.items()}
    for name, rate in rates.items():
        print(f"{name:>26}: {rate:6.2f} GB/s  ({', '.join(f'{x:.2f}' for x in times[name])} s)")
    print(fs)
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "io_probe.json"), "w") as f:
        json.dump({"bytes": size, "seconds": times, "gb_per_s": rates, "df": fs,
                   "cpus": os.cpu_count()}, f, indent=1)
    for path in [src, dst] + [f"{dst}.{k}" for k in range(16)]:
        os.path.exists(path) and os.unlink(path)


if __name__ == "__main__":
    main()
