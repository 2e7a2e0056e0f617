"""Where small sorts stop being replayed as graphs: the public API at 2^22-2^24 keys with
radix.GRAPH_MAX set to each of --maxes, alternated in one process (the kept graphs let go
between settings), ours against cupy.sort / cupy.argsort as bench/local_sort.py --api times
them. Session 44 (run 374) chose GRAPH_MAX = 2^25 with it.

    python3 bench/history/graph_max.py [--maxes 23,25] [--rounds 2]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path[:0] = [str(Path(__file__).resolve().parents[1]), str(Path(__file__).resolve().parents[2])]

import cupy as cp  # noqa: E402
import local_sort  # noqa: E402

import distsort  # noqa: E402
from distsort.local import radix  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--maxes", default="23,25", help="log2 of each GRAPH_MAX to try")
    ap.add_argument("--rounds", type=int, default=2)
    args = ap.parse_args()
    for rnd in range(args.rounds):
        for log_max in (int(x) for x in args.maxes.split(",")):
            saved, radix.GRAPH_MAX = radix.GRAPH_MAX, 1 << log_max
            for case in ("uint32", "int32", "float32", "argsort-u32"):
                for log in (22, 23, 24):
                    r = local_sort.measure(cp, case, 1 << log, 7, 3, None)
                    print(f"round {rnd} GRAPH_MAX 2^{log_max} {case} 2^{log}: ours "
                          f"{r['ms']['ours']:.3f} CUB {r['ms']['cub']:.3f} "
                          f"x{r['speedup']:.2f}", flush=True)
            radix.GRAPH_MAX = saved
            distsort.release()  # no graph of one setting kept into the next
    return 0


if __name__ == "__main__":
    sys.exit(main())
