"""A watchdog for the phases that wait on other ranks.

When a rank stops answering without dying (a hung GPU, a stalled file system, a lost node whose
launcher does not notice), every collective on the other ranks would wait forever. Each phase
runs under a deadline instead, watched by one thread for the process; when it passes, the rank
says which phase it was in and aborts the whole job (MPI_Abort), so every rank exits non-zero.
DISTSORT_TIMEOUT sets the limit in seconds per phase (default 1800; 0 turns the watchdog off).

The ranks waiting on a stopped one would all reach the limit at once and each print why: so
rank r waits STAGGER seconds more per rank before it (up to STAGGER_RANKS of them), and the
first to abort (rank 0, where it is alive) ends the others before their turn: one message.
"""

from __future__ import annotations

import functools
import itertools
import threading
import time

from . import settings

STAGGER = 2.0  # seconds: more than an abort takes to end every rank (errors.ABORT_GRACE and MPI)
STAGGER_RANKS = 8  # ranks past this many wait no longer: a job of many ranks is not held up


def timeout_seconds() -> float:
    """The per-phase limit from DISTSORT_TIMEOUT (0: no limit)."""
    return settings.value("DISTSORT_TIMEOUT")


class watchdog:  # lower case: used as `with watchdog(phase, rank):`
    """Abort the job if the body runs longer than the limit. A class, not a generator: a
    phase of a small API call spent microseconds in contextlib's machinery."""

    __slots__ = ("phase", "rank", "token")

    def __init__(self, phase: str, rank: int):
        self.phase, self.rank, self.token = phase, rank, None

    def __enter__(self) -> None:
        limit = timeout_seconds()
        if limit > 0:
            wait = limit + STAGGER * min(self.rank, STAGGER_RANKS)
            self.token = _monitor().arm(time.monotonic() + wait, (self.phase, self.rank, limit))

    def __exit__(self, *exc) -> None:
        if self.token is not None:
            _monitor().disarm(self.token)


class _Monitor:
    """One thread for the whole process that watches the deadlines of the phases under way.

    A thread per phase (threading.Timer) is costly to start and stop: in an out-of-core sort
    with many short merge rounds of two phases each, that added up to a large share of the
    time."""

    def __init__(self):
        self.cond = threading.Condition()
        self.armed: dict[int, tuple[float, tuple]] = {}  # token -> (deadline, what expires)
        self.tokens = itertools.count()
        self.waking: float | None = None  # when the thread wakes next (None: when notified)
        threading.Thread(target=self._watch, name="distsort-watchdog", daemon=True).start()

    def arm(self, deadline: float, what: tuple) -> int:
        """Watch a deadline. The thread is woken only where it would otherwise wake too late:
        phases arm deadlines later than those it already waits for, so most arms wake nobody
        (a wake per phase cost small calls a good part of their time)."""
        with self.cond:
            token = next(self.tokens)
            self.armed[token] = (deadline, what)
            if self.waking is None or deadline < self.waking:
                self.cond.notify()
            return token

    def disarm(self, token: int) -> None:
        with self.cond:
            self.armed.pop(token, None)

    def _watch(self) -> None:
        with self.cond:
            while True:
                if not self.armed:
                    self.waking = None
                    self.cond.wait()
                    continue
                token = min(self.armed, key=lambda t: self.armed[t][0])
                self.waking = self.armed[token][0]
                left = self.waking - time.monotonic()
                if left <= 0:
                    _expire(*self.armed.pop(token)[1])
                else:  # a limit beyond the platform's longest wait: woken again after that
                    self.cond.wait(min(left, threading.TIMEOUT_MAX))


@functools.cache
def _monitor() -> _Monitor:
    return _Monitor()


def _expire(phase: str, rank: int, limit: float) -> None:
    from mpi4py import MPI

    from .errors import abort

    abort(MPI.COMM_WORLD, 3,
          f"distsort: error: rank {rank} spent more than {limit:g} s in the {phase} phase: "
          "another rank stopped answering (or the phase needs longer: raise DISTSORT_TIMEOUT); "
          "aborting the job")
