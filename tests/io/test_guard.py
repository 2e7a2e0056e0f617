"""The watcher that removes a temporary output when its writer dies (distsort/io/guard.py)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from distsort.io.guard import TempGuard

# A writer process: guards the file, then ends as told (the guard holds its stderr until done,
# so subprocess.run returns only after the watcher has acted).
WRITER = """
import os, signal, sys, time
from distsort.io.guard import TempGuard
guard = TempGuard(sys.argv[1])
assert guard.watching
if sys.argv[2] == "release":
    guard.release()
else:
    # Python's own SIGINT handler, whatever was inherited: a shell runs background jobs with
    # SIGINT ignored, and Python keeps an ignored SIGINT ignored
    signal.signal(signal.SIGINT, signal.default_int_handler)
    os.kill(os.getpid(), getattr(signal, sys.argv[2]))
    for _ in range(1000):  # its KeyboardInterrupt comes between bytecodes: wait for it
        time.sleep(0.01)
"""


def run_writer(path, how: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=os.getcwd())
    return subprocess.run([sys.executable, "-c", WRITER, str(path), how], env=env, timeout=30,
                          capture_output=True, text=True)


@pytest.mark.parametrize("how", ["SIGKILL", "SIGTERM", "SIGINT"])
def test_the_file_goes_when_its_writer_dies(tmp_path, how):
    temp = tmp_path / ".o.npy.distsort-tmp-0"
    temp.write_bytes(b"partial")
    run = run_writer(temp, how)
    assert run.returncode != 0, run.stderr
    assert not temp.exists()


def test_a_released_file_stays(tmp_path):
    temp = tmp_path / "published"
    temp.write_bytes(b"whole")
    run = run_writer(temp, "release")
    assert run.returncode == 0, run.stderr
    assert temp.read_bytes() == b"whole"


def test_release_waits_for_the_watcher_and_is_idempotent(tmp_path):
    guard = TempGuard(str(tmp_path / "never-made"))
    proc = guard._proc
    guard.release()
    guard.release()
    assert proc.returncode == 0 and not guard.watching


def test_without_an_interpreter_the_writer_still_works(tmp_path, monkeypatch):
    monkeypatch.setattr(sys, "executable", str(tmp_path / "no-python"))
    guard = TempGuard(str(tmp_path / "x"))
    assert not guard.watching
    guard.release()  # nothing to release, nothing raised
