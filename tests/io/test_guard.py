"""The watcher that removes temporary outputs when their writer dies (distsort/io/guard.py)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest

from distsort.io import guard as guard_module
from distsort.io.guard import TempGuard

# A writer process: guards the files it is given (`+path`), releases some (`-path`), may kill
# its watcher (`restart`), then ends as told (the watcher holds its stderr until done, so
# subprocess.run returns only after the watcher has acted).
WRITER = """
import os, signal, sys, time
from distsort.io import guard as g
guards = {}
for step in sys.argv[2:]:
    if step == "restart":
        os.kill(g._watcher._proc.pid, signal.SIGKILL)
        g._watcher._proc.wait()
    elif step[0] == "+":
        guards[step[1:]] = g.TempGuard(step[1:])
        assert guards[step[1:]].watching
    else:
        guards[step[1:]].release()
if sys.argv[1] != "exit":
    # Python's own SIGINT handler, whatever was inherited: a shell runs background jobs with
    # SIGINT ignored, and Python keeps an ignored SIGINT ignored
    signal.signal(signal.SIGINT, signal.default_int_handler)
    os.kill(os.getpid(), getattr(signal, sys.argv[1]))
    for _ in range(1000):  # its KeyboardInterrupt comes between bytecodes: wait for it
        time.sleep(0.01)
"""


def run_writer(how: str, *steps) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=os.getcwd())
    return subprocess.run([sys.executable, "-c", WRITER, how, *map(str, steps)], env=env,
                          timeout=30, capture_output=True, text=True)


def made(folder, *names):
    paths = [folder / name for name in names]
    for path in paths:
        path.write_bytes(b"partial")
    return paths


@pytest.mark.parametrize("how", ["SIGKILL", "SIGTERM", "SIGINT"])
def test_the_file_goes_when_its_writer_dies(tmp_path, how):
    (temp,) = made(tmp_path, ".o.npy.distsort-tmp-0")
    run = run_writer(how, f"+{temp}")
    assert run.returncode != 0, run.stderr
    assert not temp.exists()


def test_a_released_file_stays(tmp_path):
    (temp,) = made(tmp_path, "published")
    run = run_writer("exit", f"+{temp}", f"-{temp}")
    assert run.returncode == 0, run.stderr
    assert temp.read_bytes() == b"partial"


def test_one_watcher_keeps_the_files_still_held(tmp_path):
    a, b, c = made(tmp_path, "a", "b c\nd", "e")  # any byte but NUL in a name
    run = run_writer("SIGKILL", f"+{a}", f"+{b}", f"-{a}", f"+{c}", f"-{c}", f"+{c}")
    assert run.returncode != 0
    assert a.exists() and not b.exists() and not c.exists()


def test_a_watcher_found_gone_is_started_again_with_every_held_file(tmp_path):
    a, b, c = made(tmp_path, "a", "b", "c")
    run = run_writer("SIGKILL", f"+{a}", f"+{c}", f"-{c}", "restart", f"+{b}")
    assert run.returncode != 0, run.stderr
    assert not a.exists() and not b.exists() and c.exists()


def test_a_process_starts_one_watcher_for_all_its_files(tmp_path, monkeypatch):
    watcher = guard_module._Watcher()
    monkeypatch.setattr(guard_module, "_watcher", watcher)
    first = TempGuard(str(tmp_path / "one"))
    proc = watcher._proc
    second = TempGuard(str(tmp_path / "two"))
    assert first.watching and second.watching and watcher._proc is proc
    first.release()
    first.release()  # idempotent
    second.release()
    assert not first.watching and not second.watching and proc.poll() is None
    proc.stdin.close()  # as the process's end would: the watcher exits, having nothing to do
    assert proc.wait(timeout=30) == 0


def test_without_a_watcher_the_writer_still_works(tmp_path, monkeypatch):
    monkeypatch.setattr(guard_module, "_watcher", guard_module._Watcher())
    monkeypatch.setattr(guard_module, "_watcher_command", lambda: [str(tmp_path / "none")])
    guard = TempGuard(str(tmp_path / "x"))
    assert not guard.watching
    guard.release()  # nothing to release, nothing raised


def test_sigkill_of_the_launcher_group_leaves_the_watcher(tmp_path):
    """The watcher runs in a session of its own: a signal to the writer's group misses it."""
    (temp,) = made(tmp_path, "t")
    env = dict(os.environ, PYTHONPATH=os.getcwd())
    writer = subprocess.Popen([sys.executable, "-c", WRITER, "SIGSTOP", f"+{temp}"], env=env,
                              start_new_session=True, stderr=subprocess.PIPE)
    # the writer stops itself once its watcher holds the file; then its whole group is killed
    os.waitpid(writer.pid, os.WUNTRACED)
    os.killpg(writer.pid, signal.SIGKILL)
    writer.stderr.read()  # the watcher's end: it holds the writer's stderr until done
    writer.wait(timeout=30)
    assert not temp.exists()


@pytest.mark.parametrize("kind", ["program", "python"])
def test_each_watcher_removes_what_is_still_held_when_its_pipe_closes(tmp_path, kind):
    """The C watcher (io/watch.c) and the Python one it stands in for read the same records:
    held and released paths, a record split across reads, a path held twice, one released
    that was never held."""
    from distsort.local import clib

    program = clib.watcher()
    if kind == "program" and program is None:
        pytest.skip("no C compiler here to build the watcher")
    command = [program] if kind == "program" else [sys.executable, "-I", "-S", "-c",
                                                   guard_module._WATCHER]
    a, b, c, d = made(tmp_path, "a", "b", "c", "d")
    records = b"".join(sign + os.fsencode(str(path)) + guard_module.END for sign, path in
                       [(b"+", a), (b"+", b), (b"+", a), (b"-", b), (b"-", d), (b"+", c)])
    watcher = subprocess.Popen(command, stdin=subprocess.PIPE, start_new_session=True)
    watcher.stdin.write(records[:7])
    watcher.stdin.flush()
    watcher.stdin.write(records[7:])
    watcher.stdin.close()
    assert watcher.wait(timeout=30) == 0
    assert not a.exists() and b.exists() and not c.exists() and d.exists()

