"""Can the GPU copy straight out of the page cache, and straight into it?

A file job copies every byte twice on the CPU: the input from the page cache into a pinned
staging buffer (then up to the device), the output from a pinned buffer into the output file's
pages (after it came down). Were the file's own mapping page-locked (cudaHostRegister of a
mapping of the file; read-only for the input), the device's copy engines would move the bytes
and the CPU would copy nothing. This times, on one process, medians of --reps:
- up: the input's bytes to the device through io/staging.load (our threaded reads), against
  registering a read-only mapping of the input and copying from it (the registration, the copy
  and the unregistration apart);
- down: the bytes back from the device into a new file's mapping, through a pinned buffer and
  the CPU's copy (io/parallel.FileRange, as the out-of-core writer), against registering the
  new file's mapping (its pages faulted in first, as io/ahead.py does) and copying into it.
Prints what the kernel refuses (a registration of file pages may be). The kernel and the
filesystem of --dir are printed too: both decide whether file pages may be locked.
`python bench/dma_probe.py IN.npy --out DIR` (IN in the page cache, e.g. `distsort gen`).
"""

from __future__ import annotations

import argparse
import json
import mmap
import os
import platform
import statistics
import subprocess
import sys
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

READ_ONLY = 8  # cudaHostRegisterReadOnly
PIECE = 1 << 30  # bytes a copy
POPULATE_WRITE = 23  # MADV_POPULATE_WRITE (Linux 5.14)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("input")
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--out", default=".")
    args = parser.parse_args()
    import cupy

    from distsort.io import detect_format, open_input
    from distsort.io.parallel import FileRange, reserve
    from distsort.io.staging import load
    from distsort.workers import threads_for, use_threads

    use_threads(threads_for(1))
    rt = cupy.cuda.runtime
    source = open_input(args.input, detect_format(args.input))
    nbytes = source.count * source.fmt.itemsize
    device = cupy.empty(nbytes, np.uint8)
    times: dict[str, list[float]] = {}
    facts = {"kernel": platform.release(), "bytes": nbytes,
             "filesystem": subprocess.run(["stat", "-f", "-c", "%T", os.path.dirname(
                 os.path.abspath(args.input))], capture_output=True, text=True).stdout.strip()}

    def timed(name: str, work) -> bool:
        """Time work(); False (the error kept in facts) where it raises."""
        began = time.perf_counter()
        try:
            work()
            cupy.cuda.Device().synchronize()
        except Exception as exc:  # what the driver refuses is the finding
            facts[name] = f"{type(exc).__name__}: {exc}"
            return False
        times.setdefault(name, []).append(time.perf_counter() - began)
        return True

    def copy(to: int, frm: int, n: int, kind: int) -> None:
        for at in range(0, n, PIECE):
            rt.memcpy(to + at, frm + at, min(PIECE, n - at), kind)

    def up_registered() -> None:
        with open(args.input, "rb") as f:
            view = mmap.mmap(f.fileno(), 0, prot=mmap.PROT_READ)
        base = np.frombuffer(view, np.uint8).ctypes.data  # the array goes at once: no export
        if timed("up: register the input's mapping (read-only)",
                 lambda: rt.hostRegister(base, len(view), READ_ONLY)):
            timed("up: copy from the registered mapping",
                  lambda: copy(device.data.ptr, base + source.offset, nbytes,
                               rt.memcpyHostToDevice))
            timed("up: unregister", lambda: rt.hostUnregister(base))
        view.close()

    def down(registered: bool) -> None:
        if os.path.exists(out_path):
            os.unlink(out_path)
        os.sync()  # no dirty pages of the last try left to throttle this one's
        fd = os.open(out_path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            reserve(fd, nbytes)
            view = mmap.mmap(fd, nbytes)
            base = np.frombuffer(view, np.uint8).ctypes.data
            timed(f"down: fault the new file's pages in ({'registered' if registered else 'ring'})",
                  lambda: view.madvise(POPULATE_WRITE))
            if registered:
                if timed("down: register the new file's mapping",
                         lambda: rt.hostRegister(base, nbytes, 0)):
                    timed("down: copy into the registered mapping",
                          lambda: copy(base, device.data.ptr, nbytes, rt.memcpyDeviceToHost))
                    timed("down: unregister", lambda: rt.hostUnregister(base))
            else:
                writer = FileRange(fd, 0, nbytes, mapped=True)
                timed("down: through a pinned buffer into the mapping",
                      lambda: through_ring(writer))
                writer.close()
            view.close()
        finally:
            os.close(fd)

    def through_ring(writer) -> None:
        for at in range(0, nbytes, len(ring)):
            n = min(len(ring), nbytes - at)
            device[at : at + n].get(out=ring[:n])
            writer.write(ring[:n], at)

    staging = cupy.cuda.alloc_pinned_memory(64 << 20)
    ring = np.frombuffer(staging, np.uint8, 64 << 20)
    out_path = os.path.join(os.path.dirname(os.path.abspath(args.input)), "dma_probe_out.bin")
    for _ in range(args.reps):
        timed("up: staging.load", lambda: load(source, 0, source.count, cupy, into=device))
        up_registered()
        for registered in (False, True):
            down(registered)
    os.unlink(out_path)
    rows = {name: statistics.median(t) for name, t in times.items()}
    for name, seconds in rows.items():
        print(f"{seconds:8.3f} s  {nbytes / seconds / 1e9:6.1f} GB/s  {name}")
    for name, fact in facts.items():
        print(f"{name}: {fact}")
    with open(os.path.join(args.out, "dma_probe.json"), "w") as f:
        json.dump({"seconds": times, "facts": facts}, f, indent=1)


if __name__ == "__main__":
    main()
