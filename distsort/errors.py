"""One error type for everything a user can get wrong, and agreement on failure across ranks.

A failure seen by one rank must stop every rank (no hang), be reported once (by the lowest rank
that saw it) and leave no partial output. `agree` is the collective that makes that happen: every
rank calls it after a step that can fail locally, and either all ranks go on or all raise.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable
from typing import NoReturn, TypeVar

T = TypeVar("T")
# Seconds between saying why and MPI_Abort: the abort kills every process of the job, and a line
# still in the pipe to the launcher dies with them (mpich's hydra lost the watchdog's message in
# about one run in seven on a loaded 2-core machine).
ABORT_GRACE = 0.5


class DistsortError(Exception):
    """A failure the user can act on: the message says which file or option and what to do.

    `agreed` is set once every rank knows of the failure (see agree), so none is left waiting.
    """

    agreed = False


class RemoteError(DistsortError):
    """Raised on ranks that did not fail themselves when another rank failed, with that rank's
    message (a program that logs on one rank logs the reason); the CLI does not print it."""


def agree(comm, fn: Callable[[], T], same: dict | None = None) -> T:
    """Run fn on every rank; if it raised on any rank, raise on all ranks.

    The failing rank with the lowest number keeps its own error (a DistsortError, or whatever
    else fn raised: a wrong argument's TypeError, a bug, with its traceback); the others get
    RemoteError with its message, which the CLI does not print, so the user sees exactly one
    message, and no rank is left waiting in a collective the failing one never reached.
    same (name -> this rank's value, compared with ==): what every rank must give alike; where
    fn raised nowhere, the first rank whose values differ from rank 0's says which differs, and
    every rank raises.
    """
    if comm.Get_size() == 1:  # nobody to agree with: the call's own error, or its result
        try:
            return fn()
        except DistsortError as exc:
            exc.agreed = True
            raise
    error: Exception | None = None
    result = None
    try:
        result = fn()
    except Exception as exc:
        error = exc
    gathered = comm.allgather((None if error is None else _said(error), same))
    failed = [m is not None for m, _ in gathered]
    if not any(failed) and same is not None:
        failed, error = _first_difference([s for _, s in gathered], comm.Get_rank())
        gathered = [(str(error), None)] * len(failed)  # the same message, made on every rank
    if any(failed):
        first = failed.index(True)
        if error is None or comm.Get_rank() != first:
            error = RemoteError(f"rank {first} failed: {gathered[first][0]}")
        if isinstance(error, DistsortError):
            error.agreed = True
        raise error
    return result  # type: ignore[return-value]


def _said(error: Exception) -> str:
    """What a failure says to the other ranks: a DistsortError's message; else with its type."""
    return str(error) if isinstance(error, DistsortError) else f"{type(error).__name__}: {error}"


def _first_difference(values: list[dict], rank: int) -> tuple[list, DistsortError | None]:
    """(which rank fails, this rank's error) for the first rank whose values differ from rank
    0's: nobody where all are alike."""
    for r, theirs in enumerate(values):
        name = next((k for k in values[0] if theirs.get(k) != values[0][k]), None)
        if name is not None:
            message = (f"every rank must call with the same {name}: rank 0 with "
                       f"{values[0][name]}, rank {r} with {theirs.get(name)}")
            return [q == r for q in range(len(values))], DistsortError(message)
    return [False] * len(values), None


#: What abort() runs before the job ends: io/guard.py's removal of the temporary outputs this
#: process holds (registered by guard as it is imported: guard imports what imports this module)
_WHEN_ABORTING: list[Callable[[], None]] = []


def when_aborting(step: Callable[[], None]) -> None:
    """Have abort() run step (on a thread, within its grace) before the job ends."""
    _WHEN_ABORTING.append(step)


def _steps_when_aborting() -> None:
    for step in _WHEN_ABORTING:
        step()


def abort(comm, code: int, message: str | None = None) -> NoReturn:
    """End the whole job with exit code `code` on every rank, after writing message (if any)
    to stderr and giving the launcher ABORT_GRACE seconds to pass on what stderr holds, while
    the temporary outputs this process holds are removed (at most another ABORT_GRACE: a file
    system that hangs does not hold the abort)."""
    # no partial output once the launcher returns: the killed ranks' watchers remove their
    # files too, but perhaps only after it has
    removal = threading.Thread(target=_steps_when_aborting, daemon=True)
    removal.start()
    if message is not None:
        sys.stderr.write(message + "\n")
    sys.stderr.flush()
    try:
        time.sleep(ABORT_GRACE)
        removal.join(ABORT_GRACE)
    except KeyboardInterrupt:  # a second Ctrl-C: abort at once
        pass
    comm.Abort(code)
    raise SystemExit(code)  # Abort does not return; this line keeps the type checker honest
