"""Helper processes that remove files: a watcher that removes temporary output files when the
process that wrote them dies, and a remover (a watcher told to hold one file, its pipe then
closed) that frees an old output in the background.

A rank cannot clean up after SIGKILL, and MPICH's launcher ends the other ranks of a failed job
with SIGKILL too (Open MPI's with SIGTERM, which Python does not catch while a rank waits inside
MPI). So each rank starts one small process (io/watch.c, or where no C compiler works the same
loop in Python: _WATCHER), in a session of its own (the launcher's
signals do not reach it), the first time it guards a file, and keeps it for its life: the rank
tells it over a pipe which files it holds and which it released (published or removed), and
when the pipe closes (the rank exited, however) it removes the ones still held. One watcher a
process, not one a file: a service's rank runs many jobs, and starting an interpreter for each
would cost each job ~20 ms. A record written to the pipe survives the rank's death, so nothing
waits for the watcher's answer.

The watcher keeps the rank's stderr open until it is done, so the launcher, which waits for the
ranks' output to end, returns only after the files are gone. Where no process can be started the
writer still removes the file itself on every failure it survives.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading

from ..errors import when_aborting

# Records on the watcher's pipe: HELD or RELEASED, the path, END (no path holds a NUL byte).
# One record is one write of fewer than PIPE_BUF bytes, whole or not at all if the rank dies.
HELD, RELEASED, END = b"+", b"-", b"\0"

_WATCHER = f"""
import os, signal
for name in ("SIGTERM", "SIGINT", "SIGHUP"):
    signal.signal(getattr(signal, name), signal.SIG_IGN)
held, rest = set(), b""
while chunk := os.read(0, 1 << 16):
    *records, rest = (rest + chunk).split({END!r})
    for record in records:
        (held.add if record[:1] == {HELD!r} else held.discard)(record[1:])
for path in held:
    try:
        os.unlink(path)
    except OSError:
        pass
"""


class _Watcher:
    """This process's watcher, started on first use and again if it is found gone."""

    def __init__(self):
        self._lock = threading.Lock()
        self._proc: subprocess.Popen | None = None
        self._held: set[bytes] = set()

    def tell(self, sign: bytes, path: str) -> bool:
        """Record that path is held (HELD) or released; False where no watcher can run."""
        name = os.fsencode(path)
        with self._lock:
            (self._held.add if sign == HELD else self._held.discard)(name)
            for _ in range(2):  # a watcher found gone is started again, told all that is held
                if self._proc is None and not self._start():
                    return False
                try:
                    os.write(self._proc.stdin.fileno(), sign + name + END)
                    return True
                except OSError:
                    self._proc = None
            return False

    def _start(self) -> bool:
        try:
            self._proc = subprocess.Popen(
                _watcher_command(),
                stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, start_new_session=True,
            )
        except (OSError, ValueError):
            return False  # no interpreter to start: the writer's own clean-up remains
        try:
            os.write(self._proc.stdin.fileno(), b"".join(HELD + p + END for p in self._held))
        except OSError:
            self._proc = None
        return self._proc is not None

    def remove_held(self) -> None:
        """Remove every file held now (the job is being aborted: the watcher would, but after
        the launcher may have returned)."""
        with self._lock:
            held = list(self._held)
        for name in held:
            try:
                os.unlink(name)
            except OSError:
                pass


def _watcher_command() -> list[str]:
    """The watcher to start: the C program (io/watch.c, built with the CPU kernels: it starts in
    a millisecond), else this interpreter running _WATCHER."""
    from ..local import clib

    program = clib.watcher()
    return [program] if program else [sys.executable, "-I", "-S", "-c", _WATCHER]


_watcher = _Watcher()


def remove_held() -> None:
    """Remove the temporary files this process holds, now (errors.abort, before the job ends)."""
    _watcher.remove_held()


when_aborting(remove_held)


class TempGuard:
    """Removes `path` if this process ends (any way, SIGKILL included) before `release`."""

    def __init__(self, path: str):
        self.path = path
        self.watching = _watcher.tell(HELD, path)

    def release(self) -> None:
        """Tell the watcher to leave the file alone (idempotent)."""
        if self.watching:
            self.watching = False
            _watcher.tell(RELEASED, self.path)


def remove_later(path: str) -> None:
    """Unlink path in a process of its own, which this one does not wait for: the kernel frees
    a large file's cached pages inside the unlink (slow for a large file), and nobody need wait for
    that. The process is a watcher told to hold path, its pipe then closed. Where no process
    can be started, now."""
    try:
        remover = subprocess.Popen(_watcher_command(), stdin=subprocess.PIPE,
                                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                   start_new_session=True)
        with remover.stdin as pipe:
            pipe.write(HELD + os.fsencode(path) + END)
    except (OSError, ValueError):
        os.unlink(path)
