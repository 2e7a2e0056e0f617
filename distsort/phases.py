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


class phase:  # lower case: used as `with phase(report, name, clock):`
    """Run the body as phase `name` of the report's job, timed between two of clock's marks
    (where the report's phases are read: SortReport.timed_phases). A class, not a generator:
    contextlib's machinery cost small API calls a good part of their host time."""

    __slots__ = ("report", "name", "clock", "watch", "start")

    def __init__(self, report: SortReport, name: str, clock: Clock):
        self.report, self.name, self.clock = report, name, clock
        self.watch = watchdog(name, report.rank)

    def __enter__(self) -> None:
        self.watch.__enter__()
        self.start = None
        try:
            self.start = self.clock.mark() if self.report.timed_phases else None
            inject_fault(self.name, self.report.rank)
            if _checkpoint is not None:
                _checkpoint(self.name)
        except BaseException:
            self.__exit__()  # timed up to the failure, as a failing body is
            raise

    def __exit__(self, *exc) -> None:
        try:
            if self.start is not None:
                self.report.marks.append((self.name, self.clock, self.start, self.clock.mark()))
        finally:
            self.watch.__exit__()


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
