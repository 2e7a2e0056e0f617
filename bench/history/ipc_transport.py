"""The copy-engine transport alone (transport/ipc.py): one all-to-all of 2^30 uint32 keys a rank,
as it runs and with its interprocess-event waits skipped (a rank's `ready` before its peers copy
into it, every peer's `done` at the end), into a buffer given or made anew each call. CUDA
events on the calling stream, the GPUs idle and the ranks at a barrier before each call; median
of 7 after one more, the slowest rank's.

    mpirun -n P python3 bench/history/ipc_transport.py [--log 30]

Why: on 4 H200s this transport moves 361-380 GB/s a rank alone, but 195-221 in a sort
(bench/RESULTS.md, runs 144-148), so what slows it is the sort around it, not its protocol.
"""

from __future__ import annotations

import argparse
import os
import sys

import cupy as cp
import numpy as np
from cupy.cuda import runtime
from mpi4py import MPI

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", ".."))  # the repo
from distsort.runtime import get_runtime  # noqa: E402
from distsort.transport import ipc  # noqa: E402

COMM = MPI.COMM_WORLD


class SkippingWaits:
    """The CUDA runtime, but for stream waits on the given interprocess events."""

    def __init__(self, skip: set):
        self.skip = skip

    def __getattr__(self, name):
        return getattr(runtime, name)

    def streamWaitEvent(self, stream: int, event: int, flags: int) -> None:
        if int(event) not in self.skip:
            runtime.streamWaitEvent(stream, event, flags)


def timed(fn, reps: int = 7) -> float:
    times = []
    for _ in range(reps + 1):
        COMM.Barrier()
        cp.cuda.Device().synchronize()
        COMM.Barrier()
        stream = cp.cuda.get_current_stream()
        start = stream.record()
        fn()
        end = stream.record()
        end.synchronize()
        times.append(cp.cuda.get_elapsed_time(start, end))
    return COMM.allreduce(float(np.median(times[1:])), op=MPI.MAX)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--log", type=int, default=30, help="2^log keys a rank")
    args = parser.parse_args()
    rt = get_runtime(COMM, "gpu")
    transport = rt.transport if rt.transport.name == "ipc" else ipc.connect(COMM, rt.transport)
    if transport.name != "ipc":
        raise SystemExit("CUDA IPC does not work between these ranks")
    p, n = COMM.Get_size(), 1 << args.log
    keys, out = cp.arange(n, dtype=cp.uint32), cp.empty(n, cp.uint32)
    counts = np.full(p, n // p, np.int64)
    ready = {int(e[0]) for e in transport.peer_events if e is not None}
    done = {int(e[1]) for e in transport.peer_events if e is not None}
    sent = (p - 1) * (n // p) * 4
    cases = [("as it runs", set(), [out]), ("no ready waits", ready, [out]),
             ("no done waits", done, [out]), ("no waits", ready | done, [out]),
             ("new buffers", set(), None)]
    for name, skip, outs in cases:
        transport.rt = SkippingWaits(skip)
        ms = timed(lambda outs=outs: transport.alltoallv([keys], counts, counts, outs=outs))
        if COMM.Get_rank() == 0:
            print(f"P={p} {name:15s} {ms:7.3f} ms {sent / ms / 1e6:6.1f} GB/s sent a rank",
                  flush=True)
    transport.rt = runtime


if __name__ == "__main__":
    main()
