"""Helper processes that remove files: a watcher that removes a temporary output file when the
process that wrote it dies, and a remover that frees an old output in the background.

A rank cannot clean up after SIGKILL, and MPICH's launcher ends the other ranks of a failed job
with SIGKILL too (Open MPI's with SIGTERM, which Python does not catch while a rank waits inside
MPI). So each rank that holds a temporary output starts a small Python process, in a session of
its own (the launcher's signals do not reach it), that waits for the rank to close a pipe: if the
rank released it first (the file was published or already removed) it just exits, otherwise the
rank died and it removes the file.

The watcher keeps the rank's stderr open until it is done, so the launcher, which waits for the
ranks' output to end, returns only after the file is gone. Where no process can be started the
writer still removes the file itself on every failure it survives.
"""

from __future__ import annotations

import os
import subprocess
import sys

RELEASE = b"release"

_WATCHER = f"""
import os, signal, sys
for name in ("SIGTERM", "SIGINT", "SIGHUP"):
    signal.signal(getattr(signal, name), signal.SIG_IGN)
if sys.stdin.buffer.read() != {RELEASE!r}:
    try:
        os.unlink(sys.argv[1])
    except OSError:
        pass
"""

_REMOVER = "import os, sys; os.unlink(sys.argv[1])"


class TempGuard:
    """Removes `path` if this process ends (any way, SIGKILL included) before `release`."""

    def __init__(self, path: str):
        self.path = path
        self._proc: subprocess.Popen | None = None
        try:
            self._proc = subprocess.Popen(
                [sys.executable, "-I", "-S", "-c", _WATCHER, path],
                stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, start_new_session=True,
            )
        except (OSError, ValueError):
            self._proc = None  # no interpreter to start: the writer's own clean-up remains

    @property
    def watching(self) -> bool:
        """True while a watcher process guards the file."""
        return self._proc is not None

    def release(self) -> None:
        """Tell the watcher to leave the file alone and wait for it to exit (idempotent)."""
        proc, self._proc = self._proc, None
        if proc is None:
            return
        try:
            proc.stdin.write(RELEASE)
            proc.stdin.close()
        except OSError:
            pass  # the watcher is gone already
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass  # a watcher stuck on a hung file system must not stop the job


def remove_later(path: str) -> None:
    """Unlink path in a process of its own, which this one does not wait for: the kernel frees
    a large file's cached pages inside the unlink (slow for a large file), and nobody need wait for
    that. Where no process can be started, now."""
    try:
        subprocess.Popen([sys.executable, "-I", "-S", "-c", _REMOVER, path],
                         stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL, start_new_session=True)
    except (OSError, ValueError):
        os.unlink(path)
