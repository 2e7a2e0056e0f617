"""Where a GPU rank's read of a file range in the page cache goes (issue 36): the mapping's
residency check, its page tables filled (MADV_POPULATE_READ), the pages locked for the copy
engines (cudaHostRegister) by one thread or several, the copies, the unlocks; and the
library's own read (staging.load) of the same range, beside the output's pages faulted in ahead
as a file job does. Fresh mappings for every case; medians of --reps.

    python3 bench/history/read_locks.py FILE.npy [--reps 3] [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import mmap
import os
import statistics
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np

PIECE = 256 << 20
MADV_POPULATE_READ = 22


def _mapping(path: str):
    fd = os.open(path, os.O_RDONLY)
    size = os.fstat(fd).st_size // mmap.PAGESIZE * mmap.PAGESIZE
    view = mmap.mmap(fd, size, prot=mmap.PROT_READ)
    os.close(fd)
    return view, np.frombuffer(view, np.uint8).ctypes.data, size


def _lock_copy(address: int, size: int, target: int, threads: int, populate: bool) -> dict:
    import ctypes

    import cupy

    rt = cupy.cuda.runtime
    libc = ctypes.CDLL(None, use_errno=True)
    t0 = time.perf_counter()
    if populate:
        def fill(at: int) -> None:
            libc.madvise(ctypes.c_void_p(address + at), ctypes.c_size_t(min(PIECE, size - at)),
                         MADV_POPULATE_READ)
        with ThreadPoolExecutor(threads) as pool:
            list(pool.map(fill, range(0, size, PIECE)))
    t1 = time.perf_counter()
    streams = [cupy.cuda.Stream(non_blocking=True) for _ in range(threads)]

    def one(k: int) -> float:
        locked = 0.0
        for at in range(k * PIECE, size, threads * PIECE):
            n = min(PIECE, size - at)
            a = time.perf_counter()
            rt.hostRegister(address + at, n, 8)
            locked += time.perf_counter() - a
            rt.memcpyAsync(target + at, address + at, n, rt.memcpyHostToDevice, streams[k].ptr)
        streams[k].synchronize()
        return locked

    with ThreadPoolExecutor(threads) as pool:
        locked = list(pool.map(one, range(threads)))
    t2 = time.perf_counter()
    for at in range(0, size, PIECE):
        rt.hostUnregister(address + at)
    t3 = time.perf_counter()
    return {"populate": t1 - t0, "lock_and_copy": t2 - t1, "lock_thread_max": max(locked),
            "unlock": t3 - t2, "total": t3 - t0}


def _case(path: str, threads: int, populate: bool, target) -> dict:
    from distsort.io import libc

    view, address, size = _mapping(path)
    try:
        a = time.perf_counter()
        resident = libc.resident(address, size)
        checked = time.perf_counter() - a
        got = _lock_copy(address, size, target.data.ptr, threads, populate)
        got["residency_check"] = checked
        got["resident"] = resident
        return got
    finally:
        del address
        view.close()


def _library_read(path: str, ahead: bool) -> float:
    import cupy

    from distsort.io.ahead import PagesAhead
    from distsort.io.formats import detect_format
    from distsort.io.reader import open_input
    from distsort.io.staging import load

    source = open_input(path, detect_format(path))
    out_path = path + ".out"
    pager = None
    if ahead:
        fd = os.open(out_path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
        os.posix_fallocate(fd, 0, os.path.getsize(path))
        out = mmap.mmap(fd, os.path.getsize(path))
        os.close(fd)
        pager = PagesAhead(np.frombuffer(out, np.uint8), 4)
    try:
        a = time.perf_counter()
        got = load(source, 0, source.count, cupy)
        cupy.cuda.Device().synchronize()
        took = time.perf_counter() - a
        del got
        return took
    finally:
        if pager is not None:
            pager.stop()
            del pager
            out.close()
            os.remove(out_path)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("file")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--json")
    args = ap.parse_args()
    t0 = time.perf_counter()
    import cupy

    cupy.cuda.Device(0).use()
    cupy.empty(1)
    init = time.perf_counter() - t0
    size = os.path.getsize(args.file) // mmap.PAGESIZE * mmap.PAGESIZE
    target = cupy.empty(size, np.uint8)
    results = {"file": args.file, "bytes": size, "cuda_init_s": init, "cases": {}}
    for threads in (1, 2, 4, 8):
        for populate in (False, True):
            runs = [_case(args.file, threads, populate, target) for _ in range(args.reps)]
            name = f"threads{threads}{'_populated' if populate else ''}"
            results["cases"][name] = {k: statistics.median(r[k] for r in runs)
                                      for k in runs[0] if k != "resident"}
            print(name, {k: round(v, 4) for k, v in results["cases"][name].items()}, flush=True)
    del target
    for ahead in (False, True):
        runs = [_library_read(args.file, ahead) for _ in range(args.reps)]
        name = f"staging.load{'_with_output_ahead' if ahead else ''}"
        results["cases"][name] = {"total": statistics.median(runs)}
        print(name, [round(r, 4) for r in runs], flush=True)
    print("threads alive", threading.active_count())
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
