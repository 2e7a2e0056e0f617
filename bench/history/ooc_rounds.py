"""Where the out-of-core file job's merge rounds spend their time, thread by thread.

Runs `distsort sort IN -o OUT --device-memory BUDGET` in this process (one rank) --runs times,
the last one timed: wrappers note when each step of a round begins and ends, on the main thread
(the staging of the next round's rows, the sort, the decode, the put that waits for a free
write slot) and on the writes' thread (the wait for a round's download, the write into the
file). Prints each step's total and count, and the main thread's time between the rounds'
first and last step.
`python bench/history/ooc_rounds.py IN.npy --budget 2GiB`.
"""

from __future__ import annotations

import argparse
import collections
import functools
import os
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, ROOT)
from distsort import cli  # noqa: E402
from distsort.io.writer import ShardWriter  # noqa: E402
from distsort.outofcore import files, merge, writes  # noqa: E402

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
    timed(merge, "stage", "stage next round (queue H2D)")
    timed(merge, "sort_round", "sort round")
    timed(merge, "exchange_round", "exchange round")
    timed(writes.WritesBehind, "put", "put (waits for a free slot)")
    timed(writes.WritesBehind, "_settle", "settle (wait for a write)")
    timed(writes.WritesBehind, "_download", "queue D2H")
    timed(writes.WritesBehind, "_write", "writer: whole write")
    timed(ShardWriter, "write", "writer: into the file")
    timed(files, "external_sort", "external_sort")
    out = os.path.join(tempfile.mkdtemp(dir=os.path.dirname(os.path.abspath(args.input))),
                       "out.npy")
    for _ in range(args.runs):
        spans.clear()
        os.sync()
        start = time.perf_counter()
        cli.main(["sort", args.input, "-o", out, "--device-memory", args.budget, "--quiet"])
        wall = time.perf_counter() - start
    totals, counts = collections.defaultdict(float), collections.Counter()
    for thread, label, lo, hi in spans:
        key = f"{label} [{'main' if thread == 'MainThread' else 'writer'}]"
        totals[key] += hi - lo
        counts[key] += 1
    print(f"run {args.runs}: {wall:.3f} s in cli.main")
    for key in sorted(totals, key=totals.get, reverse=True):
        print(f"{totals[key]:8.3f} s  {counts[key]:4d}x  {key}")
    rounds = [s for s in spans if s[1] == "sort round"]
    if rounds:
        print(f"rounds: first sort at {rounds[0][2] - start:.3f} s, last sort ends "
              f"{rounds[-1][3] - start:.3f} s")
    os.unlink(out)


if __name__ == "__main__":
    main()
