"""The summary's numbers: rates with three significant digits and one space before the unit."""

from __future__ import annotations

import pytest

from distsort.report import duration, rate, scaled


@pytest.mark.parametrize("amount, unit, want", [
    (43.4, "keys", "43.4 keys/s"), (8.12e8, "keys", "812 M keys/s"),
    (4.31e9, "B", "4.31 GB/s"), (347, "B", "347 B/s"), (1.5e4, "B", "15 kB/s"),
])
def test_rates_read_cleanly_at_every_size(amount, unit, want):
    assert rate(amount, 1.0, unit) == want


def test_amounts_read_as_rates_do():
    assert scaled(1.234e9, "B") == "1.23 GB" and scaled(512, "B") == "512 B"


def test_durations_in_seconds_or_milliseconds():
    assert duration(2.414) == "2.41 s" and duration(0.0873) == "87.3 ms"


def test_the_summary_names_every_sort_any_rank_ran():
    from distsort.report import SortReport, summarize

    reports = []
    for used in ({"radix"}, {"cub", "radix"}, set()):
        report = SortReport(engine="radix", count_out=1)
        report._sorts = used
        reports.append(report.as_dict())
    assert [r["engine"] for r in reports] == ["radix", "cub+radix", "radix"]
    assert summarize(reports, 3)["engine"] == "cub+radix"


@pytest.mark.parametrize("timed", [True, False])
def test_phases_are_timed_where_the_report_is_read(timed):
    """An API call given no report times no phase (on GPUs two CUDA events a phase); one given
    a report finds each phase in it."""
    import numpy as np

    import distsort
    from distsort.report import SortReport

    report = SortReport(timed_phases=timed)
    distsort.sort(np.arange(1000, dtype=np.int64)[::-1], backend="cpu", report=report)
    assert ("finish" in report.phases) is timed
    assert report.count_out == 1000


@pytest.mark.parametrize("where", ["checkpoint", "body"])
def test_a_failing_phase_is_timed_and_unwatched(where):
    """A phase that fails, at its checkpoint (a cancelled service job) or in its body, still
    has its time in the report, and the watchdog no longer watches it."""
    from distsort import phases
    from distsort.report import HostClock, SortReport
    from distsort.watchdog import _monitor

    def cancel(name: str) -> None:
        raise KeyboardInterrupt(name)

    report = SortReport()
    with phases.checkpoints(cancel if where == "checkpoint" else lambda name: None):
        with pytest.raises(KeyboardInterrupt):
            with phases.phase(report, "exchange", HostClock()):
                raise KeyboardInterrupt("body")
    assert "exchange" in report.phases and not _monitor().armed


@pytest.mark.gpu
def test_a_one_rank_gpu_sorts_phases_read_at_once():
    """A one-rank sort returns once its work is queued (pipeline.sort_as_one): its report's
    phases, read straight after, wait for their marks rather than fail (not ready)."""
    cp = pytest.importorskip("cupy")
    from mpi4py import MPI

    import distsort
    from distsort.report import SortReport

    keys = cp.random.randint(0, 2**31, 1 << 24, dtype=cp.int64).astype(cp.uint32)
    report = SortReport()
    distsort.sort(keys, MPI.COMM_SELF, report=report)
    assert report.phases["finish"] > 0
