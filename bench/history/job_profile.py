"""Where a one-rank file job's own time goes, function by function: `python -m distsort ARGS`
run in this process under cProfile, set up as the command line sets itself up (its Open MPI
defaults and the GPU's start beside the imports, which look at sys.orig_argv), the imports
profiled too.

    python3 bench/history/job_profile.py OUT.prof sort in.npy -o out.npy [options]

Prints the 40 functions with the most cumulative time and writes the stats to OUT.prof
(`python3 -m pstats OUT.prof` reads them on any machine).
"""

import cProfile
import pstats
import sys


def main() -> int:
    out, words = sys.argv[1], sys.argv[2:]
    sys.orig_argv = [sys.executable, "-m", "distsort", *words]  # read by distsort/__init__.py
    profile = cProfile.Profile()
    profile.enable()
    from distsort.cli import main as distsort_main

    rc = distsort_main(words)
    profile.disable()
    profile.dump_stats(out)
    pstats.Stats(out).sort_stats("cumulative").print_stats(40)
    return rc


if __name__ == "__main__":
    sys.exit(main())
