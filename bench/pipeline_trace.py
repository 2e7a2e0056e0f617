"""A GPU timeline of one distributed sort: `mpirun -n P python bench/pipeline_trace.py`.

Wraps the pipeline's steps (sample, count, plan, scatter, send, land, the finish's passes) so
that each records CUDA events on the stream it runs on, sorts fresh random keys a few times and
prints, for the last sort, every step's start and end on the GPU (ms from the sort's first event)
with the host's time in the call, per rank. Where the GPU sits idle between steps (the host
waiting on MPI, launching, synchronizing), the gaps show it; what a step costs beside the
transfers shows against its time alone.
"""

from __future__ import annotations

import argparse
import cProfile
import json
import os
import pstats
import sys
import time

import cupy
from mpi4py import MPI

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
from dist_sort import CASES, random_keys  # noqa: E402

import distsort  # noqa: E402
from distsort import api, pipeline  # noqa: E402
from distsort.check import verify  # noqa: E402
from distsort.cli import parse_count  # noqa: E402
from distsort.local import digit_partition, landing  # noqa: E402
from distsort.outofcore import sort as outofcore  # noqa: E402
from distsort.report import SortReport  # noqa: E402
from distsort.steps import chunks, exchange, splitters  # noqa: E402
from distsort.transport.ipc import IpcTransport  # noqa: E402
from distsort.transport.nccl import NcclTransport  # noqa: E402

COMM = MPI.COMM_WORLD
STEPS = [  # (module or class, attribute, label)
    (api, "begin", "agree"), (outofcore, "plan", "budget"), (api, "_prepare", "prepare"),
    (pipeline, "local_sample", "sample"), (pipeline, "choose_splitters", "splitters"),
    (splitters, "stable_order", "order"),
    (pipeline, "partition", "route"), (chunks, "plan", "plan"),
    (digit_partition.BucketPartition, "__init__", "args"),
    (digit_partition.BucketPartition, "counts", "count"),
    (exchange, "scatter_chunk", "scatter"), (NcclTransport, "alltoallv", "send"),
    (IpcTransport, "alltoallv", "send"), (IpcTransport, "_agree", "agree"),
    (IpcTransport, "_targets", "targets"), (exchange, "exchange_chunks", "exchange"),
    (landing.LandingSort, "land", "land"), (landing.LandingSort, "finish", "finish"),
    (landing.LandingSort, "_run_tiles", "run_tiles"), (landing.LandingSort, "_pass", "pass"),
    (landing.LandingSort, "_sort_tail", "tail"),
]


class Trace:
    def __init__(self):
        self.spans: list[tuple] = []
        self.on, self.main = False, cupy.cuda.get_current_stream().ptr

    def wrap(self, owner, name: str, label: str) -> None:
        inner = getattr(owner, name)

        def traced(*args, **kwargs):
            if not self.on:
                return inner(*args, **kwargs)
            stream = cupy.cuda.get_current_stream()
            start, end = cupy.cuda.Event(), cupy.cuda.Event()
            called = time.perf_counter()
            start.record(stream)
            out = inner(*args, **kwargs)
            end.record(stream)
            side = stream.ptr != self.main
            self.spans.append((label, "side" if side else "main", start, end, called,
                               time.perf_counter()))
            return out

        setattr(owner, name, traced)

    def rows(self, ref, host0: float) -> list[dict]:
        return [{"step": label, "stream": stream,
                 "gpu_start": cupy.cuda.get_elapsed_time(ref, s),
                 "gpu_end": cupy.cuda.get_elapsed_time(ref, e),
                 "host_start": (h0 - host0) * 1e3, "host_end": (h1 - host0) * 1e3}
                for label, stream, s, e, h0, h1 in self.spans]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--case", default="u32-4x2^30")
    ap.add_argument("--per-rank", type=parse_count, help="keys per rank (weak scaling's shard)")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--out", default=None)
    ap.add_argument("--profile", action="store_true",
                    help="rank 0 profiles the host side of the last sort (cProfile)")
    args = ap.parse_args()
    total, dtype, _ = CASES[args.case]
    n = args.per_rank or total // COMM.Get_size()
    trace = Trace()
    for owner, name, label in STEPS:
        trace.wrap(owner, name, label)
    for rep in range(args.reps):
        keys = random_keys(n, dtype)
        cupy.cuda.get_current_stream().synchronize()
        COMM.Barrier()
        trace.spans.clear()
        trace.on = rep == args.reps - 1
        ref = cupy.cuda.Event()
        ref.record()
        host0, pool = time.perf_counter(), cupy.get_default_memory_pool().total_bytes()
        profile = cProfile.Profile() if args.profile and trace.on and COMM.Get_rank() == 0 \
            else None
        if profile:
            profile.enable()
        out = distsort.sort(keys, report=SortReport())
        if profile:
            profile.disable()
        done = cupy.cuda.Event()
        done.record()
        done.synchronize()
        wall = (time.perf_counter() - host0) * 1e3
        verdict = verify(COMM, keys, out, xp=cupy)
        assert verdict.ok, verdict.message
        grown = cupy.get_default_memory_pool().total_bytes() - pool
        if COMM.Get_rank() == 0:
            print(f"sort {rep}: {wall:.3f} ms on rank 0's host, pool grew {grown / 2**20:.0f} MiB")
    if profile:
        pstats.Stats(profile).sort_stats("cumulative").print_stats(45)
    rows = trace.rows(ref, host0) + [{"step": "end", "stream": "main",
                                      "gpu_start": cupy.cuda.get_elapsed_time(ref, done),
                                      "gpu_end": cupy.cuda.get_elapsed_time(ref, done),
                                      "host_start": wall, "host_end": wall}]
    every = COMM.gather(rows, root=0)
    if COMM.Get_rank() == 0:
        for rank, spans in enumerate(every):
            print(f"rank {rank} ({args.case}, P={COMM.Get_size()}): step stream gpu start-end "
                  "(ms) | host in call")
            for r in spans:
                print(f"  {r['step']:10s} {r['stream']:4s} {r['gpu_start']:7.3f} - "
                      f"{r['gpu_end']:7.3f} ({r['gpu_end'] - r['gpu_start']:6.3f}) | "
                      f"{r['host_start']:7.3f} - {r['host_end']:7.3f}")
        if args.out:
            os.makedirs(args.out, exist_ok=True)
            weak = f"_{n}a" if args.per_rank else ""
            name = f"trace_{args.case.replace('^', '_')}{weak}_p{COMM.Get_size()}.json"
            path = os.path.join(args.out, name)
            with open(path, "w") as f:
                json.dump(every, f, indent=1)


if __name__ == "__main__":
    main()
