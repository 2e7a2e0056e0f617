"""What each layer of a small call of the public API costs the host, one rank: each step that
distsort.sort takes before and after its engine, timed alone, beside the whole call and the
array module's own sort. Each call is timed on the host by itself, the device idle before it
(synchronized, not timed), so a step that queues device work is not held up by earlier calls';
the median of --number calls.

    python3 bench/history/api_layers.py [--backend gpu] [--log 20] [--profile 30]

--profile N: then the whole call under cProfile, the N functions of most time of their own.
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import distsort  # noqa: E402
from distsort import api  # noqa: E402
from distsort.inputs import Call, as_array, begin, keys_check  # noqa: E402
from distsort.keys import NumericCodec  # noqa: E402
from distsort.outofcore import sort as outofcore  # noqa: E402
from distsort.phases import phase  # noqa: E402
from distsort.pipeline import distributed_sort, sort_as_one  # noqa: E402
from distsort.report import SortReport  # noqa: E402
from distsort.runtime import get_runtime  # noqa: E402
from distsort.steps.finish import local_sort  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--backend", choices=("gpu", "cpu"), default="gpu")
    ap.add_argument("--log", type=int, default=20)
    ap.add_argument("--dtype", default="uint32")
    ap.add_argument("--number", type=int, default=1000)
    ap.add_argument("--profile", type=int, default=0, metavar="N")
    args = ap.parse_args()
    if args.backend == "gpu":
        import cupy as xp

        sync = xp.cuda.Device().synchronize
    else:
        import numpy as xp

        sync = lambda: None  # noqa: E731
    x = xp.random.randint(0, 2**31, 1 << args.log).astype(args.dtype)
    for _ in range(3):
        distsort.sort(x)
    rt = get_runtime(None, args.backend)
    report = SortReport(timed_phases=False).ran_on(rt)
    codec = NumericCodec(x.dtype, False, canonical=False)
    call = Call({"keys": x}, {"descending": False, "stable": False, "order": None},
                [keys_check(x, None)], None, [(x.dtype, ())], None, None)

    def in_phase():
        with phase(report, "finish", rt.backend.clock()):
            pass

    steps = {
        "distsort.sort (whole)": lambda: distsort.sort(x),
        f"{xp.__name__}.sort": lambda: xp.sort(x),
        "engine.sort (codec)": lambda: rt.backend.engine.sort(x, codec=codec),
        "local_sort": lambda: local_sort(rt, [x], api._first, codec=codec),
        "sort_as_one": lambda: sort_as_one(
            rt, report, [x], lambda c, **more: local_sort(rt, c, api._first, codec=codec)),
        "as_array": lambda: as_array(x, "keys"),
        "begin": lambda: begin(None, None, call),
        "outofcore.plan": lambda: outofcore.plan(rt, x, None, None),
        "get_runtime": lambda: get_runtime(None, args.backend),
        "_prepare": lambda: api._prepare(rt, x),
        "NumericCodec": lambda: NumericCodec(x.dtype, False, canonical=False),
        "SortReport.ran_on": lambda: SortReport(timed_phases=False).ran_on(rt),
        "a phase": in_phase,
        "distributed_sort": lambda: distributed_sort(rt, [x], api._first, report,
                                                     {"codec": codec}),
    }
    for name, step in steps.items():
        took = []
        for _ in range(args.number):
            sync()
            start = time.perf_counter()
            step()
            took.append(time.perf_counter() - start)
        print(f"{name:24s} {statistics.median(took) * 1e6:8.2f} us", flush=True)
    if args.profile:
        profiled(lambda: distsort.sort(x), sync, args.number, args.profile)
    return 0


def profiled(call, sync, number: int, top: int) -> None:
    """call's functions under cProfile (number calls, each after the device is idle)."""
    profile = cProfile.Profile()
    for _ in range(number):
        sync()
        profile.runcall(call)
    pstats.Stats(profile).sort_stats("tottime").print_stats(top)


if __name__ == "__main__":
    sys.exit(main())
