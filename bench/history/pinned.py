"""Host buffers for the out-of-core sort (issue 5), one GPU, well under a minute at 4 GB: how
long each way of making a big host array takes (s/GB), and how fast the GPU copies into and out
of it (GB/s).

    python bench/history/pinned.py --size 4GB [--out DIR]

Ways: "alloc" cudaHostAlloc through CuPy's pinned pool; "touch N" np.empty
and a first touch of every page by N threads (pageable: no page-locking); "register" a touched
array page-locked by cudaHostRegister alone (and its hostUnregister); "mmap+register" all of
distsort.memory.Registered (distsort's default, DISTSORT_PINNED=register: mapping, huge pages
asked for, threads' first touch, cudaHostRegister), with the fraction of it in transparent
huge pages. Copies: SIZE bytes host->device and
device->host in 256 MiB pieces on one stream, into and out of alloc'ed, registered and
pageable memory.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

import cupy
import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", ".."))  # the repo
from distsort.memory import Registered, first_touch, huge_page_bytes, parse_size  # noqa: E402

PIECE = 1 << 28


def seconds(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def rss() -> int:
    """This process's resident bytes (VmRSS)."""
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) * 1024 for line in f if line.startswith("VmRSS"))


def resident(fn, holder: dict, size: int) -> float:
    """Seconds per GB that fn takes to make an array (kept in holder["a"]), and its resident
    bytes over size: > 1 where the allocator rounds up (an 8 GB request taking 8 GiB or more)."""
    before = rss()
    took = seconds(lambda: holder.update(a=fn(size)))
    return took / (size / 1e9), (rss() - before) / size


def alloc(size: int) -> np.ndarray:
    return np.frombuffer(cupy.cuda.alloc_pinned_memory(size), np.uint8, size)


def touched(size: int, threads: int) -> np.ndarray:
    host = np.empty(size, np.uint8)
    first_touch(host, threads)
    return host


def queue_copies(stream, host: np.ndarray, device, upload: bool) -> None:
    """Queue host -> device (upload) or device -> host copies on the stream, PIECE at a time."""
    for lo in range(0, len(host), PIECE):
        part, hi = device[lo : lo + PIECE], min(lo + PIECE, len(host))
        if upload:
            part.set(host[lo:hi], stream=stream)
        else:
            part.get(stream=stream, out=host[lo:hi], blocking=False)


def copy_rates(host: np.ndarray, device) -> tuple[float, float]:
    """GB/s host->device and device->host, piece by piece on one stream."""
    stream = cupy.cuda.Stream(non_blocking=True)
    rates = []
    for upload in (True, False):
        stream.synchronize()
        start = time.perf_counter()
        queue_copies(stream, host, device, upload)
        stream.synchronize()
        rates.append(len(host) / (time.perf_counter() - start) / 1e9)
    return rates[0], rates[1]


def measure(size: int) -> dict:
    gb, device, result = size / 1e9, cupy.empty(size, np.uint8), {}
    device.fill(1)
    holder = {}
    result["alloc_s_per_gb"], result["alloc_rss_over_size"] = resident(alloc, holder, size)
    result["alloc_copy_gb_per_s"] = copy_rates(holder.pop("a"), device)
    cupy.get_default_pinned_memory_pool().free_all_blocks()
    for threads in sorted({1, 4, os.cpu_count() or 1}):
        result[f"touch{threads}_s_per_gb"] = seconds(
            lambda t=threads: holder.update(a=touched(size, t))) / gb
    host = holder.pop("a")
    result["pageable_copy_gb_per_s"] = copy_rates(host, device)
    ptr = host.ctypes.data
    result["register_s_per_gb"] = seconds(lambda: cupy.cuda.runtime.hostRegister(ptr, size, 0)) / gb
    result["registered_copy_gb_per_s"] = copy_rates(host, device)
    result["unregister_s_per_gb"] = seconds(lambda: cupy.cuda.runtime.hostUnregister(ptr)) / gb
    del host
    made, huge = {}, huge_page_bytes()
    result["mmap_register_s_per_gb"], result["mmap_register_rss_over_size"] = resident(
        lambda n: np.asarray(Registered(n).pin_all()), made, size)
    result["mmap_register_huge_page_fraction"] = (huge_page_bytes() - huge) / size
    result["mmap_register_copy_gb_per_s"] = copy_rates(made.pop("a"), device)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", default="4GB", help="bytes of each host array")
    parser.add_argument("--out", default="bench/results", help="folder for the JSON")
    args = parser.parse_args()
    result = {"size_bytes": parse_size(args.size), **measure(parse_size(args.size))}
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "pinned.json"), "w") as f:
        json.dump(result, f, indent=2)
    for key, value in result.items():
        shown = " / ".join(f"{v:.2f}" for v in value) if isinstance(value, tuple) else value
        print(f"{key}: {shown}" + ("  (H2D / D2H)" if isinstance(value, tuple) else ""))


if __name__ == "__main__":
    main()
