"""Progress of a long command, on rank 0's stderr: the step, how much of it is done, the rate
and the time left (tqdm's bar), shown once a step has taken DELAY seconds.

Shown where stderr is a terminal, or where the launcher says its own is: MPICH's mpiexec and
Open MPI's mpirun pass the ranks' output through pipes, so launch/quickstart.sh sets
DISTSORT_PROGRESS=1 when it runs on a terminal. `--progress` shows it anyway, `--quiet` never.
Without tqdm installed there is no bar (the sort is the same). A service's jobs report their
bars' progress to the service (watched), which `status` shows.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from . import settings

DELAY = 2.0  # seconds a step runs before its bar shows: short commands stay quiet
_wanted: dict[str, bool | None] = {"on": None}  # None: decide from the terminal
_watcher: dict[str, Callable[[dict], None] | None] = {"on": None}


@contextmanager
def watched(callback: Callable[[dict], None]) -> Iterator[None]:
    """In the body, rank 0's bars, shown or not, also tell callback where their step is, as a
    dict (step, done, total, unit) when the step starts and as it advances: the service's
    status shows it."""
    _watcher["on"] = callback
    try:
        yield
    finally:
        _watcher["on"] = None


def configure(wanted: bool | None) -> None:
    """--progress (True), --quiet (False), or neither (None: where there is a terminal)."""
    _wanted["on"] = wanted


def shown(comm) -> bool:
    """Does this rank show progress? Only rank 0, and only where wanted (see the module doc)."""
    wanted = _wanted["on"]
    if wanted is None:
        wanted = sys.stderr.isatty() or settings.value("DISTSORT_PROGRESS")
    return bool(wanted) and comm.Get_rank() == 0


class Bar:
    """One step's bar: add(n) as work is done; a no-op where progress is not shown."""

    def __init__(self, comm, what: str, total: int, unit: str = "B"):
        self._bar = None
        self._state = {"step": what, "done": 0, "total": total, "unit": unit}
        self._watch = _watcher["on"] if comm.Get_rank() == 0 else None
        if self._watch is not None:
            self._watch(dict(self._state))
        if not shown(comm):
            return
        try:
            from tqdm import tqdm
        except ImportError:
            return
        scaled = unit == "B"
        self._bar = tqdm(total=total, desc=f"distsort: {what}", unit=unit, unit_scale=scaled,
                         unit_divisor=1024 if scaled else 1000, delay=DELAY, file=sys.stderr,
                         leave=False, dynamic_ncols=True)

    def add(self, done: int) -> None:
        if self._watch is not None:
            self._state["done"] += done
            self._watch(dict(self._state))
        if self._bar is not None:
            self._bar.update(done)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()

    def __enter__(self) -> Bar:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
