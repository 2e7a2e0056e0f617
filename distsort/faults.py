"""A test hook: faults the failure tests inject at named points of a job (DISTSORT_FAULT)."""

from __future__ import annotations

import os
import signal
import sys
import threading
import time

from . import settings


def inject_fault(point: str, rank: int) -> None:
    """DISTSORT_FAULT=POINT:RANK kills that rank there (SIGKILL), POINT:RANK:term sends it
    SIGTERM, POINT:RANK:hang makes it stop answering, POINT:RANK:oom has it run out of memory
    (MemoryError), POINT:RANK:wait=PATH holds it there until PATH exists (a test's job kept
    running); elsewhere nothing happens.

    The points are the phases (phases.py), plus "written": a rank has written its piece of a
    temporary output file (io/writer.py), and "sorting": a rank's finish begins, inside the
    part every rank agrees on (pipeline.py)."""
    fault = settings.value("DISTSORT_FAULT")
    how = fault.removeprefix(f"{point}:{rank}")
    if how.startswith(":wait="):
        while not os.path.exists(how.removeprefix(":wait=")):
            time.sleep(0.01)
        return
    if how == fault or how not in ("", ":term", ":hang", ":oom"):
        return
    if how == ":oom":
        raise MemoryError(f"injected fault {fault}")
    sys.stderr.write(f"distsort: injected fault {fault}\n")
    sys.stderr.flush()
    if how == ":hang":
        threading.Event().wait()
    os.kill(os.getpid(), signal.SIGTERM if how == ":term" else signal.SIGKILL)
