"""A phase of a job: timed in its report, watched by the watchdog (a rank that stops answering
ends the job), and a point where the failure tests inject faults. Every step runs in one."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from .faults import inject_fault
from .report import Clock, SortReport
from .watchdog import watchdog


@contextmanager
def phase(report: SortReport, name: str, clock: Clock) -> Iterator[None]:
    """Run the body as phase `name` of the report's job, timed between two of clock's marks."""
    with watchdog(name, report.rank), report.timing(name, clock):
        inject_fault(name, report.rank)
        yield
