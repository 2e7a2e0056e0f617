"""Where small sorts stop being replayed as graphs: the public API at 2^22-2^24 keys under each
of --settings (radix.GRAPH_MAX, or a radix.MIN_N entry, set to a power of two), alternated in
one process (the kept graphs let go between settings), ours against cupy.sort / cupy.argsort
as bench/local_sort.py --api times them. Session 44 (run 374) chose GRAPH_MAX = 2^25 with
`--settings GRAPH_MAX=23 GRAPH_MAX=25`; session 45 MIN_N's "coded" and "argsort" with
`--settings coded=24,argsort=24 coded=25,argsort=25`; session 46 GRAPH_MAX = 2^27 (graphs
above MIN_N too, for kinds seen before) with `--settings GRAPH_MAX=25 GRAPH_MAX=27 --logs
25,26` and the 64-bit cases.

    python3 bench/history/graph_max.py [--settings S ...] [--rounds 2] [--logs 22,23,24]
        [--cases uint32,int32,float32,argsort-u32]
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


def apply(setting: str) -> dict:
    """Set each NAME=LOG of a setting (GRAPH_MAX, or a MIN_N key); returns what it replaced."""
    saved = {}
    for item in setting.split(","):
        name, log = item.split("=")
        if name == "GRAPH_MAX":
            saved[name], radix.GRAPH_MAX = radix.GRAPH_MAX, 1 << int(log)
        else:
            saved[name], radix.MIN_N[name] = radix.MIN_N[name], 1 << int(log)
    return saved


def restore(saved: dict) -> None:
    for name, value in saved.items():
        if name == "GRAPH_MAX":
            radix.GRAPH_MAX = value
        else:
            radix.MIN_N[name] = value


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--settings", nargs="+", default=["GRAPH_MAX=23", "GRAPH_MAX=25"],
                    help="each NAME=LOG[,NAME=LOG...]: GRAPH_MAX or a MIN_N key, log2")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--logs", default="22,23,24", help="log2 of the sizes")
    ap.add_argument("--cases", default="uint32,int32,float32,argsort-u32",
                    help="bench/local_sort.py's cases")
    args = ap.parse_args()
    for rnd in range(args.rounds):
        for setting in args.settings:
            saved = apply(setting)
            for case in args.cases.split(","):
                for log in (int(x) for x in args.logs.split(",")):
                    r = local_sort.measure(cp, case, 1 << log, 7, 3, None)
                    print(f"round {rnd} {setting} {case} 2^{log}: ours "
                          f"{r['ms']['ours']:.3f} CUB {r['ms']['cub']:.3f} "
                          f"x{r['speedup']:.2f}", flush=True)
            restore(saved)
            distsort.release()  # no graph of one setting kept into the next
    return 0


if __name__ == "__main__":
    sys.exit(main())
