"""Which of a job's calls imports a module it should not need: `python -m distsort ARGS` run in
this process, set up as the command line sets itself up, with an import hook that prints the
Python stack (import machinery left out) where each watched module is first imported (each rank
prints its own).

    mpirun -n 2 python3 bench/history/who_imports.py sort in.npy -o out.npy --verify

Watched: cupyx.scipy and scipy.sparse (run 438: a two-rank GPU job's start imported them, 0.59
s, from CuPy's first arithmetic with a Python number). At the end it says whether they were
imported. A frame of CuPy's compiled code does not show: the last Python frame is the caller.
"""

import sys
import traceback

WATCHED = ("cupyx.scipy", "cupyx.scipy.sparse", "scipy.sparse")


class Tell:
    """A finder that finds nothing: it only prints where a watched module's import began."""

    def find_spec(self, name, path=None, target=None):
        if name in WATCHED:
            frames = [f for f in traceback.extract_stack()[:-1] if "<frozen" not in f.filename]
            stack = "".join(traceback.format_list(frames[-14:]))
            print(f"=== import of {name}:\n{stack}", file=sys.stderr, flush=True)


def main() -> int:
    sys.meta_path.insert(0, Tell())
    words = sys.argv[1:]
    sys.orig_argv = [sys.executable, "-m", "distsort", *words]  # read by distsort/__init__.py
    from distsort.cli import main as distsort_main

    rc = distsort_main(words)
    print("after the job, imported:", [name for name in WATCHED if name in sys.modules],
          file=sys.stderr, flush=True)
    return rc


if __name__ == "__main__":
    sys.exit(main())
