"""Host <-> GPU copy rates with every rank copying at once:
`mpirun -n P python bench/history/pcie.py`.

The out-of-core sort moves each byte host -> device and device -> host at the same time (piece
i+1 in while run i-1 goes out), on every GPU of a node at once. This measures that: per rank, on
its own GPU, with page-locked host memory made as distsort makes it (distsort.memory), SIZE
bytes host -> device alone, device -> host alone, and both at once on two streams; all ranks
start together (barrier) and the slowest rank's time counts. Prints GB/s per rank and for the
node.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import cupy
import numpy as np
from mpi4py import MPI

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", ".."))  # the repo
from pinned import queue_copies  # noqa: E402

from distsort.memory import host_empty, parse_size  # noqa: E402
from distsort.runtime import get_runtime  # noqa: E402

COMM = MPI.COMM_WORLD


def copies(pairs: list) -> float:
    """Seconds, slowest rank, for every (stream, host, device, upload) copy queued at once."""
    COMM.Barrier()
    start = time.perf_counter()
    for stream, host, device, upload in pairs:
        queue_copies(stream, host, device, upload)
    for stream, *_ in pairs:
        stream.synchronize()
    return COMM.allreduce(time.perf_counter() - start, op=MPI.MAX)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", default="4GB", help="bytes each way per rank")
    args = parser.parse_args()
    get_runtime(COMM, "gpu")  # binds this rank's GPU
    size = parse_size(args.size)
    src, dst = host_empty((size,), np.uint8, True), host_empty((size,), np.uint8, True)
    src[:] = 1
    up, down = cupy.empty(size, np.uint8), cupy.empty(size, np.uint8)
    a, b = cupy.cuda.Stream(non_blocking=True), cupy.cuda.Stream(non_blocking=True)
    copies([(a, src, up, True), (b, dst, down, False)])  # warm-up
    gb, p = size / 1e9, COMM.Get_size()
    h2d = gb / copies([(a, src, up, True)])
    d2h = gb / copies([(b, dst, down, False)])
    both = gb / copies([(a, src, up, True), (b, dst, down, False)])
    if COMM.Get_rank() == 0:
        print(f"P={p}, {gb:.1f} GB each way per rank, GB/s per rank (node): H2D alone "
              f"{h2d:.1f} ({h2d * p:.0f}), D2H alone {d2h:.1f} ({d2h * p:.0f}), both at once "
              f"{both:.1f} + {both:.1f} ({2 * both * p:.0f})", flush=True)


if __name__ == "__main__":
    main()
