"""A phase of a job: timed in its report, watched by the watchdog (a rank that stops answering
ends the job), a point where the failure tests inject faults, and where a service checks in
(checkpoints: the job's phase for status, a cancel agreed by every rank). Every step runs in
one, and every rank runs the same phases in the same order."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager

from .faults import inject_fault
from .report import Clock, SortReport
from .watchdog import watchdog


@contextmanager
def phase(report: SortReport, name: str, clock: Clock) -> Iterator[None]:
    """Run the body as phase `name` of the report's job, timed between two of clock's marks."""
    with watchdog(name, report.rank), report.timing(name, clock):
        inject_fault(name, report.rank)
        if _checkpoint is not None:
            _checkpoint(name)
        yield


_checkpoint: Callable[[str], None] | None = None


@contextmanager
def checkpoints(check: Callable[[str], None]) -> Iterator[None]:
    """Call check(phase name) as each phase of the body starts, on every rank (collectively,
    if check is: every rank starts the same phases); it may raise to end the job there."""
    global _checkpoint
    _checkpoint = check
    try:
        yield
    finally:
        _checkpoint = None
