"""The phase watchdog: one thread for the process, deadlines that expire or are met."""

from __future__ import annotations

import threading
import time

from distsort import watchdog


def test_a_phase_past_its_limit_expires_and_one_within_it_does_not(monkeypatch):
    expired = []
    monkeypatch.setattr(watchdog, "_expire", lambda *what: expired.append(what))
    monkeypatch.setenv("DISTSORT_TIMEOUT", "0.05")
    with watchdog.watchdog("exchange", 3):
        time.sleep(0.3)
    assert expired == [("exchange", 3, 0.05)]
    monkeypatch.setenv("DISTSORT_TIMEOUT", "5")
    with watchdog.watchdog("finish", 3):
        pass
    time.sleep(0.1)
    assert expired == [("exchange", 3, 0.05)]


def test_a_limit_beyond_the_longest_wait_keeps_the_watchdog_alive(monkeypatch):
    """1e10 s is more than threading's TIMEOUT_MAX: the thread waits that long at most, and
    still notices a later, shorter phase."""
    expired = []
    monkeypatch.setattr(watchdog, "_expire", lambda *what: expired.append(what))
    monkeypatch.setenv("DISTSORT_TIMEOUT", "1e10")
    with watchdog.watchdog("sample", 0):
        monkeypatch.setenv("DISTSORT_TIMEOUT", "0.01")
        with watchdog.watchdog("exchange", 0):
            deadline = time.monotonic() + 60
            while not expired and time.monotonic() < deadline:  # wait for the event
                time.sleep(0.01)
    assert expired == [("exchange", 0, 0.01)]


def test_phases_start_no_thread_each(monkeypatch):
    monkeypatch.setenv("DISTSORT_TIMEOUT", "60")
    with watchdog.watchdog("sample", 0):
        pass
    threads = threading.active_count()
    for _ in range(200):
        with watchdog.watchdog("sample", 0):
            pass
    assert threading.active_count() == threads


def test_an_abort_says_why_and_waits_for_the_launcher_before_ending_the_job(monkeypatch, capsys):
    """MPI_Abort kills every process of the job: the message must be out of this process and
    the launcher given time to pass it on first (hydra lost it in ~1 of 7 loaded runs)."""
    import pytest

    from distsort import errors

    events = []
    monkeypatch.setattr(errors, "ABORT_GRACE", 0.2)
    monkeypatch.setattr(errors.time, "sleep", lambda s: events.append(("sleep", s)))

    class Comm:
        def Abort(self, code):
            events.append(("abort", code, capsys.readouterr().err))

    with pytest.raises(SystemExit):
        errors.abort(Comm(), 3, "distsort: error: rank 1 spent more than 4 s in the exchange phase")
    assert events == [("sleep", 0.2),
                      ("abort", 3, "distsort: error: rank 1 spent more than 4 s in the exchange "
                                   "phase\n")]
