"""A watchdog for the phases that wait on other ranks.

When a rank stops answering without dying (a hung GPU, a stalled file system, a lost node whose
launcher does not notice), every collective on the other ranks would wait forever. Each phase
runs under a timer instead; when it expires, the rank says which phase it was in and aborts the
whole job (MPI_Abort), so every rank exits non-zero. DISTSORT_TIMEOUT sets the limit in seconds
per phase (default 1800; 0 turns the watchdog off).
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager

DEFAULT_TIMEOUT = 1800.0


def timeout_seconds() -> float:
    """The per-phase limit from DISTSORT_TIMEOUT (0: no limit)."""
    return float(os.environ.get("DISTSORT_TIMEOUT", DEFAULT_TIMEOUT))


@contextmanager
def watchdog(phase: str, rank: int) -> Iterator[None]:
    """Abort the job if the body runs longer than the limit."""
    limit = timeout_seconds()
    if limit <= 0:
        yield
        return
    timer = threading.Timer(limit, _expire, args=(phase, rank, limit))
    timer.daemon = True
    timer.start()
    try:
        yield
    finally:
        timer.cancel()


def _expire(phase: str, rank: int, limit: float) -> None:
    sys.stderr.write(
        f"distsort: error: rank {rank} spent more than {limit:g} s in the {phase} phase: "
        "another rank stopped answering (or the phase needs longer: raise DISTSORT_TIMEOUT); "
        "aborting the job\n"
    )
    sys.stderr.flush()
    from mpi4py import MPI

    MPI.COMM_WORLD.Abort(3)
