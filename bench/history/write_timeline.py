"""When do a file job's output steps happen on each rank: the pages-ahead threads' start and
end (how far they got), the first write, the mapping's close?

`mpirun -n P python3 bench/history/write_timeline.py sort IN.npy -o OUT.npy [options]`: the
job as `python -m distsort` runs it; each rank prints its events, seconds from its start.
PROBE_AHEAD_SHARE=k sets parallel.AHEAD_SHARE, PROBE_WRITERS=k parallel.NODE_MAPPED_WRITERS.
"""
import os
import sys
import threading
import time

T0 = time.time()
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
from distsort.io import ahead, parallel  # noqa: E402

log, lock = [], threading.Lock()


def note(what):
    with lock:
        log.append((time.time() - T0, what))


if os.environ.get("PROBE_AHEAD_SHARE"):
    parallel.AHEAD_SHARE = int(os.environ["PROBE_AHEAD_SHARE"])
if os.environ.get("PROBE_WRITERS"):
    parallel.NODE_MAPPED_WRITERS = int(os.environ["PROBE_WRITERS"])
run0, init0, write0, close0 = (ahead.PagesAhead._run, ahead.PagesAhead.__init__,
                               parallel.FileRange.write, parallel.FileRange.close)


def init(self, view, threads):
    note(f"ahead begins: {len(view) >> 20} MiB on {threads} threads")
    init0(self, view, threads)


def run(self, madvise):
    run0(self, madvise)
    note(f"an ahead thread ends, stopped={self._stopped}, next piece {next(self._pieces)}")


first = []


def write(self, data, at):
    if not first:
        first.append(1)
        note(f"first write ({self.writers} writers)")
    write0(self, data, at)


def close(self):
    note("close begins")
    close0(self)
    note("closed")


ahead.PagesAhead.__init__, ahead.PagesAhead._run = init, run
parallel.FileRange.write, parallel.FileRange.close = write, close
from mpi4py import MPI  # noqa: E402

from distsort.cli import main  # noqa: E402

try:
    code = main(sys.argv[1:])
finally:
    rank = MPI.COMM_WORLD.Get_rank()
    for t, what in log:
        print(f"rank {rank} {t:7.3f} {what}", flush=True)
sys.exit(code)
