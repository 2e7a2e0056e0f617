"""Where the out-of-core file job spends its time, step by step and thread by thread.

Runs `distsort sort IN -o OUT --device-memory BUDGET` in this process (one rank) --runs times,
the last one timed: wrappers note when each step begins and ends. The runs (the partition
phase): on the main thread the reads of the pieces (from the page cache, or through the
staging ring, up to the device), the waits for a piece's upload, for a run's page-locked
store and for the last run's download, the sorts queued; on the pinning thread the store's
first touch and registration; on the pages-ahead threads the output's faults. The rounds: on
the main thread the staging of the next round's rows, the sort, the put that waits for a free
write slot; on the writes' thread the wait for a round's download and the write into the
file. Prints each step's total, count, thread and first start and last end (from cli.main's
start), and the main thread's time between the rounds' first and last step.
`python bench/history/ooc_rounds.py IN.npy --budget 2GiB`.
"""

from __future__ import annotations

import argparse
import collections
import functools
import json
import os
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, ROOT)
from distsort import backend, cli, memory  # noqa: E402
from distsort.io import ahead, parallel  # noqa: E402
from distsort.io.writer import ShardWriter  # noqa: E402
from distsort.outofcore import files, merge, runs, writes  # noqa: E402
from distsort.outofcore import sort as external  # noqa: E402

spans: list = []  # (thread name, step, start, end)


def timed(owner, name: str, label: str) -> None:
    inner = getattr(owner, name)

    @functools.wraps(inner)
    def wrapper(*args, **kwargs):
        start = time.perf_counter()
        try:
            return inner(*args, **kwargs)
        finally:
            spans.append((threading.current_thread().name, label, start, time.perf_counter()))

    setattr(owner, name, wrapper)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("input")
    parser.add_argument("--budget", default="2GiB")
    parser.add_argument("--runs", type=int, default=2)
    args = parser.parse_args()
    timed(files, "load", "runs: read a piece (file to device)")
    timed(runs, "local_sort", "runs: queue a run's sort")
    timed(runs.Loader, "take", "runs: wait for a piece's upload")
    timed(memory.HostColumns, "ready", "runs: wait for a run's store to be locked")
    timed(backend.GpuCopyLane, "wait", "copy lane wait (runs: the last run's download)")
    timed(memory.Registered, "pin", "store: first touch and register a part")
    timed(ahead.PagesAhead, "_run", "output: pages faulted ahead")
    timed(files, "external_sort", "external_sort")
    timed(external, "form_runs", "runs: all of them")
    timed(external, "merge_rounds", "merge rounds")
    timed(merge, "stage", "stage next round (queue H2D)")
    timed(merge, "sort_round", "sort round")
    timed(merge, "exchange_round", "exchange round")
    timed(writes.WritesBehind, "put", "put (waits for a free slot)")
    timed(writes.WritesBehind, "_settle", "settle (wait for a write)")
    timed(writes.WritesBehind, "_download", "queue D2H")
    timed(writes.WritesBehind, "_write", "writer: whole write")
    timed(ShardWriter, "write", "writer: into the file")
    timed(memory.Registered, "__del__", "store: unlock a part")
    timed(ShardWriter, "commit", "output: commit (unmap, close, rename)")
    timed(parallel.FileRange, "close", "output: unmap")
    out = os.path.join(tempfile.mkdtemp(dir=os.path.dirname(os.path.abspath(args.input))),
                       "out.npy")
    report = out + ".json"
    for _ in range(args.runs):
        spans.clear()
        os.sync()
        start = time.perf_counter()
        cli.main(["sort", args.input, "-o", out, "--device-memory", args.budget, "--quiet",
                  "--report", report])
        wall = time.perf_counter() - start
    with open(report) as f:
        phases = json.load(f)["per_rank"][0]["phases"]
    print("phases:", {name: round(seconds, 3) for name, seconds in phases.items()})
    totals, counts = collections.defaultdict(float), collections.Counter()
    first, last = {}, {}
    for thread, label, lo, hi in spans:
        key = f"{label} [{thread.rstrip('_0123456789')}]"
        totals[key] += hi - lo
        counts[key] += 1
        first[key], last[key] = min(first.get(key, lo), lo), max(last.get(key, hi), hi)
    print(f"run {args.runs}: {wall:.3f} s in cli.main")
    print("   total  count  from - to (s)  step [thread]")
    for key in sorted(totals, key=first.get):
        print(f"{totals[key]:8.3f} s {counts[key]:4d}x  {first[key] - start:5.2f} - "
              f"{last[key] - start:5.2f}  {key}")
    rounds = [s for s in spans if s[1] == "sort round"]
    if rounds:
        print(f"rounds: first sort at {rounds[0][2] - start:.3f} s, last sort ends "
              f"{rounds[-1][3] - start:.3f} s")
    os.unlink(out)
    os.unlink(report)


if __name__ == "__main__":
    main()
