"""The sort service (distsort serve) on the CPU backend under mpiexec: jobs from several clients
at once, good and bad, each answered as the command line would answer it, the service still up
after the bad ones; paths outside the roots refused; one service a socket; shutdown ends every
rank."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
from helpers import Service

from distsort import Client
from distsort.errors import DistsortError
from distsort.service.client import job_line

RANKS = 2


@pytest.fixture
def service(tmp_path):
    running = Service(tmp_path, "--root", str(tmp_path))
    assert "serving 2 rank(s)" in running.started()
    yield running
    running.stop()


def test_jobs_from_several_clients_good_and_bad(service, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    made = service.client.submit(["gen", "in.npy", "--count", "100000", "--dtype", "float64",
                                  "--dist", "normal"])
    assert made["state"] == "done" and made["exit"] == 0, made
    data = np.load(tmp_path / "in.npy")
    jobs = [["sort", "in.npy", "-o", f"out{i}.npy", "--verify"] + (["--descending"] if i % 2
                                                                     else [])
            for i in range(4)]
    bad = [["sort", "missing.npy", "-o", "x.npy"], ["sort", "/etc/hostname", "-o", "y.npy"],
           ["sort", "in.npy", "--no-such-option", "-o", "z.npy"], ["info"], []]
    with ThreadPoolExecutor(4) as pool:
        replies = list(pool.map(service.client.submit, jobs + bad))
    for i, reply in enumerate(replies[: len(jobs)]):
        assert reply["state"] == "done" and reply["exit"] == 0, reply
        assert "(verified)" in reply["output"]
        want = np.sort(data)[::-1] if i % 2 else np.sort(data)
        np.testing.assert_array_equal(np.load(tmp_path / f"out{i}.npy"), want)
    missing, outside, option, info, empty = replies[len(jobs):]
    assert missing["state"] == "failed" and missing["exit"] == 2
    assert "missing.npy does not exist" in missing["error"]
    assert outside["state"] == "refused" and "outside the folders" in outside["error"]
    assert option["state"] == "refused" and "--no-such-option" in option["error"]
    assert info["state"] == "refused" and "not 'info'" in info["error"]
    assert empty["state"] == "refused"
    assert not (tmp_path / "x.npy").exists() and not (tmp_path / "y.npy").exists()
    status = service.client.status()  # still up, and it remembers what ran
    assert status["running"] is None and status["queue"] == []
    assert sorted(job["state"] for job in status["done"]) == ["done"] * 5 + ["failed"]
    again = service.client.submit(["check", "in.npy", "out0.npy"])
    assert again["exit"] == 0 and "OK" in again["output"]


def test_paths_out_of_the_roots_through_dots_or_links_are_refused(service, tmp_path,
                                                                 monkeypatch):
    monkeypatch.chdir(tmp_path)
    outside = tmp_path.parent / f"{tmp_path.name}-outside"
    outside.mkdir()
    (tmp_path / "link").symlink_to(outside)
    for words in (["gen", "../x.npy", "--count", "10"], ["gen", "link/x.npy", "--count", "10"],
                  ["gen", "in.npy", "--count", "10", "--quiet"]):
        reply = service.client.submit(words)
        if words[1] == "in.npy":
            assert reply["state"] == "done", reply  # the same service goes on
        else:
            assert reply["state"] == "refused" and "outside the folders" in reply["error"]
    assert not list(outside.iterdir())


@pytest.mark.parametrize("line", [b"[1, 2]", b"not json", b'{"op": "cancel", "job": [1]}',
                                  b'{"op": "cancel", "job": 3.7}', b"[" * 100_000,
                                  b'{"op": "status", "pad": "' + b"x" * (2 << 20) + b'"}'])
def test_a_request_that_is_not_one_is_answered_and_the_service_serves_on(service, line):
    """Not a JSON object, a field of the wrong kind, JSON nested past Python's parser, a line
    longer than the service reads (its memory was the sender's to fill)."""
    with socket.socket(socket.AF_UNIX) as conn:
        conn.connect(service.socket)
        try:
            conn.sendall(line + b"\n")
        except (BrokenPipeError, ConnectionResetError):  # answered, and closed, mid-line
            pass
        reply = json.loads(conn.makefile("rb").readline())
    assert reply["state"] == "refused" and "a bad request" in reply["error"], reply
    assert service.client.status()["running"] is None


def test_a_job_of_too_many_words_is_refused(service, tmp_path, monkeypatch):
    """Parsing takes the square of the words' number: 20,000 words held the listener 41 s."""
    monkeypatch.chdir(tmp_path)
    reply = service.client.submit(["gen", "g.npy", "--count", "10"] + ["--quiet"] * 1000)
    assert reply["state"] == "refused" and "give at most 1000" in reply["error"], reply


def test_a_link_pointed_outside_while_its_job_waits_fails_the_job(tmp_path, monkeypatch):
    """Job 2 names d/in.npy and d/o.npy; while it waits behind job 1, d (a folder under the
    root) becomes a link to a folder outside: job 2 fails when its turn comes, nothing is
    read or written outside, and job 3 runs. Help asked for in a job prints nowhere (it went
    into the running job's output)."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "d").mkdir()
    np.save(tmp_path / "d" / "in.npy", np.arange(10, dtype=np.int32))
    outside = tmp_path.parent / f"{tmp_path.name}-outside"
    outside.mkdir()
    np.save(outside / "in.npy", np.arange(10, dtype=np.int32))
    service, go = _held_at_read(tmp_path, np.arange(20_000, dtype=np.int64))
    try:
        first, got_first = _waiting_job(service.client, ["sort", "in.npy", "-o", "a.npy"])
        _running(service, first)
        assert service.client.submit(["gen", "--help"])["state"] == "refused"
        second, got_second = _waiting_job(service.client, ["sort", "d/in.npy", "-o", "d/o.npy"])
        while not service.client.status()["queue"]:  # wait for the event: job 2 queued
            assert second.is_alive()
        (tmp_path / "d").rename(tmp_path / "d_before")
        (tmp_path / "d").symlink_to(outside)
        go.touch()
        first.join(timeout=120)
        second.join(timeout=120)
        assert got_first[0]["state"] == "done" and "usage" not in got_first[0]["output"]
        failed = got_second[0]
        assert failed["state"] == "failed" and failed["exit"] == 2, failed
        assert "outside the folders" in failed["error"] and "turn came" in failed["error"]
        assert sorted(p.name for p in outside.iterdir()) == ["in.npy"]
        assert service.client.submit(["sort", "in.npy", "-o", "c.npy"])["state"] == "done"
    finally:
        assert service.stop() == 0
    assert "usage" not in service.proc.stdout.read()


def test_one_service_a_socket_and_shutdown_ends_every_rank(service, tmp_path):
    second = Service(tmp_path, "--root", str(tmp_path))
    assert "already listens" in second.started()
    assert second.proc.wait(timeout=60) == 2
    assert service.stop() == 0
    assert not os.path.exists(service.socket)
    with pytest.raises(DistsortError, match="no service answers"):
        service.client.status()


def test_the_command_line_client(service, tmp_path):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([os.getcwd(),
                                                       os.environ.get("PYTHONPATH", "")]))
    run = [sys.executable, "-m", "distsort", "submit", "--socket", service.socket]
    made = subprocess.run(run + ["gen", "in.npy", "--count", "1000"], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=120)
    assert made.returncode == 0 and "wrote 1000" in made.stdout, made.stderr
    failed = subprocess.run(run + ["sort", "nothing.npy", "-o", "o.npy"], cwd=tmp_path, env=env,
                            capture_output=True, text=True, timeout=120)
    assert failed.returncode == 2 and "nothing.npy does not exist" in failed.stderr
    listed = subprocess.run(run[:3] + ["jobs", "--socket", service.socket], env=env,
                            capture_output=True, text=True, timeout=120)
    lines = listed.stdout.splitlines()
    assert listed.returncode == 0 and len(lines) == 2, listed
    assert lines[0].split()[:3] == ["1", "done,", "exit"] and "gen in.npy" in lines[0]
    assert lines[1].split()[:4] == ["2", "failed,", "exit", "2,"]
    assert lines[1].endswith("sort nothing.npy -o o.npy")


def _waiting_job(client, words: list[str]) -> tuple[threading.Thread, list]:
    """A client thread that submits a job and waits for it: (the thread, what it got)."""
    got: list = []

    def submit() -> None:
        try:
            got.append(client.submit(words))
        except DistsortError as exc:
            got.append(exc)

    thread = threading.Thread(target=submit)
    thread.start()
    return thread, got


def _running(service: Service, thread: threading.Thread, phase: str = "",
             until=lambda job: True) -> dict:
    """The running job once it has started a phase (`phase`, if named) and `until` holds for
    its status, its client thread still waiting."""
    while True:
        running = service.client.status()["running"]
        if (running and running["phase"] and running["phase"] == (phase or running["phase"])
                and until(running)):
            return running
        assert thread.is_alive()


def _one_running_one_queued(service: Service) -> tuple:
    """Job 1 (sort in.npy -o a.npy) running, held at its read; job 2 (-o b.npy) queued behind
    it: (job 1's client thread, what it got, job 2's thread, what it got)."""
    first, got_first = _waiting_job(service.client, ["sort", "in.npy", "-o", "a.npy"])
    _running(service, first)
    second, got_second = _waiting_job(service.client, ["sort", "in.npy", "-o", "b.npy"])
    while not service.client.status()["queue"]:  # wait for the event: job 2 queued
        assert second.is_alive()
    return first, got_first, second, got_second


def _held_at_read(folder, data: np.ndarray) -> tuple[Service, object]:
    """A started service whose rank 0 holds each job at its read until the path `go` exists;
    data saved in the folder as in.npy."""
    np.save(folder / "in.npy", data)
    go = folder / "go"
    service = Service(folder, "--root", str(folder), fault=f"read:0:wait={go}")
    assert "serving" in service.started()
    return service, go


@pytest.mark.parametrize("how", ["killed", "sigterm"])
def test_a_rank_that_dies_ends_the_service_and_tells_the_waiting_clients(tmp_path, how):
    """A rank killed in a job's exchange, or the service told to stop (SIGTERM) while a rank
    hangs there (so the job never reaches its next phase: the service aborts after
    STOP_GRACE): every rank ends, non-zero, the waiting client gets a clear error, and no
    output or temporary file is left."""
    np.save(tmp_path / "in.npy", np.arange(100_000, dtype=np.uint32)[::-1])
    fault = "exchange:1" if how == "killed" else "exchange:1:hang"
    service = Service(tmp_path, "--root", str(tmp_path), fault=fault)
    try:
        assert "serving" in service.started()
        thread, got = _waiting_job(service.client, ["sort", str(tmp_path / "in.npy"), "-o",
                                                    str(tmp_path / "out.npy")])
        if how == "sigterm":  # once rank 0 is in the exchange that rank 1 never joins
            _running(service, thread, "exchange")
            service.proc.terminate()
        thread.join(timeout=120)
        assert not thread.is_alive()
        assert isinstance(got[0], DistsortError) and "ended before job 1" in str(got[0])
        assert service.proc.wait(timeout=60) != 0
    finally:
        if service.proc.poll() is None:
            service.proc.kill()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.npy"] + (
        ["s.sock"] if os.path.exists(service.socket) else [])


@pytest.mark.parametrize("ranks, fault", [(1, "finish:0:oom"), (2, "sorting:1:oom")])
def test_a_job_that_runs_out_of_memory_fails_alone_and_the_service_serves_on(
        tmp_path, monkeypatch, ranks, fault):
    """A job that runs out of memory (injected: on a lone rank at its finish; on one of two in
    its finish's sort, which every rank agrees on) gets the command line's message, leaves no
    output, and the next job runs."""
    monkeypatch.chdir(tmp_path)
    np.save(tmp_path / "in.npy", np.arange(10_000, dtype=np.uint32)[::-1])
    service = Service(tmp_path, "--root", str(tmp_path), ranks=ranks, fault=fault)
    try:
        assert "serving" in service.started()
        failed = service.client.submit(["sort", "in.npy", "-o", "out.npy"])
        done = service.client.submit(["gen", "g.npy", "--count", "1000", "--quiet"])
        rank = fault.split(":")[1]
        assert failed["exit"] == 2 and failed["error"].startswith(
            f"rank {rank} ran out of memory (injected fault {fault}); nothing was written"), failed
        assert done["exit"] == 0 and len(np.load("g.npy")) == 1000, done
        assert sorted(p.name for p in tmp_path.iterdir()) == ["g.npy", "in.npy", "s.sock"]
    finally:
        assert service.stop() == 0


def test_cancel_a_queued_job_and_the_running_one_at_its_next_phase(tmp_path, monkeypatch):
    """Job 1 is held at rank 0's read (until `go` exists); job 2 queued behind it is cancelled
    and never runs; job 1, cancelled meanwhile, stops at its read on every rank with no output;
    job 3 then runs and is right. Status shows the running job's phase."""
    monkeypatch.chdir(tmp_path)
    data = np.random.default_rng(3).integers(0, 1000, 50_000).astype(np.int64)
    service, go = _held_at_read(tmp_path, data)
    try:
        thread, got = _waiting_job(service.client, ["sort", "in.npy", "-o", "a.npy"])
        running = _running(service, thread)  # job 1 under way: init done, held at its read
        queued = service.client.submit(["sort", "in.npy", "-o", "b.npy"], wait=False)
        assert service.client.cancel(queued["job"])["state"] == "cancelled"
        assert service.client.cancel(queued["job"])["state"] == "refused"
        listed = service.client.status()  # done, and no longer in the queue
        assert [job["job"] for job in listed["done"]] == [queued["job"]], listed
        assert listed["queue"] == [], listed
        assert service.client.cancel(running["job"])["state"] == "cancelling"
        go.touch()
        thread.join(timeout=120)
        assert got[0]["state"] == "cancelled" and got[0]["exit"] == 2, got
        assert "cancelled by a client (before its read phase)" in got[0]["error"]
        after = service.client.submit(["sort", "in.npy", "-o", "c.npy", "--verify"])
        assert after["state"] == "done", after
        np.testing.assert_array_equal(np.load("c.npy"), np.sort(data))
        states = {job["job"]: job["state"] for job in service.client.status()["done"]}
        assert states == {running["job"]: "cancelled", queued["job"]: "cancelled",
                          after["job"]: "done"}
        assert sorted(p.name for p in tmp_path.iterdir()) == ["c.npy", "go", "in.npy", "s.sock"]
    finally:
        assert service.stop() == 0
    # the log has a line a job, job 2's too (logged by the listener while job 1 ran: never in
    # job 1's output, which rank 0's stdout held then)
    logged = [json.loads(line)["job"] for line in service.proc.stdout.read().splitlines()
              if line.startswith("{")]
    assert sorted(logged) == sorted([running["job"], queued["job"], after["job"]]), logged
    assert '"job"' not in got[0]["output"], got[0]["output"]


def test_status_shows_the_running_job_s_progress(tmp_path, monkeypatch):
    """While a job is held as rank 0's sample phase begins (its check-in not yet made: status
    shows the phase before), status shows the job's last step of known size, rank 0's read,
    done; `jobs` says so on its line; a finished job has none."""
    monkeypatch.chdir(tmp_path)
    data = np.random.default_rng(5).integers(0, 1000, 50_000).astype(np.int64)
    np.save(tmp_path / "in.npy", data)
    go = tmp_path / "go"
    service = Service(tmp_path, "--root", str(tmp_path), fault=f"sample:0:wait={go}")
    try:
        assert "serving" in service.started()
        thread, got = _waiting_job(service.client, ["sort", "in.npy", "-o", "out.npy"])
        share = 25_000 * data.itemsize  # rank 0's half of the keys
        running = _running(service, thread, until=lambda job: (job["progress"] or {}).get(
            "done") == share)
        assert running["progress"] == {"step": "read", "done": share, "total": share,
                                       "unit": "B"}, running
        assert f"running ({running['phase']}: read 0.2 of 0.2 MiB)" in job_line(running)
        go.touch()
        thread.join(timeout=120)
        assert got[0]["state"] == "done" and got[0]["progress"] is None, got
        np.testing.assert_array_equal(np.load("out.npy"), np.sort(data))
    finally:
        go.touch()
        assert service.stop() == 0


def test_sigterm_cancels_the_running_job_and_every_rank_exits_0(tmp_path, monkeypatch):
    """SIGTERM to the launcher (which passes it to every rank) while job 1 is held at rank 0's
    read and job 2 waits: job 1 stops there on every rank, job 2 is told the service stopped,
    no output is left, and the service exits 0."""
    monkeypatch.chdir(tmp_path)
    service, go = _held_at_read(tmp_path, np.arange(20_000, dtype=np.uint32)[::-1])
    try:
        first, got, second, got_second = _one_running_one_queued(service)
        service.proc.terminate()
        while service.client.submit(["gen", "x.npy", "--count", "9"], wait=False)["state"] \
                != "refused":
            pass  # until rank 0 has taken the signal: it refuses new jobs from then on
        go.touch()
        assert service.proc.wait(timeout=120) == 0
        first.join(timeout=60)
        second.join(timeout=60)
        assert got[0]["state"] == "cancelled" and "as the service stopped" in got[0]["error"]
        assert got_second[0]["state"] == "failed"
        assert "stopped before this job ran" in got_second[0]["error"]
    finally:
        if service.proc.poll() is None:
            service.proc.kill()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["go", "in.npy"]


TOKEN = "a-test-token-of-32-characters-00"


def test_on_tcp_only_requests_with_the_token_are_answered(tmp_path, monkeypatch):
    """A service on TCP: jobs with the token run; a missing, wrong or short token is refused
    (and the service stays up); the token never shows in `info` or on a command line."""
    running = Service(tmp_path, "--root", str(tmp_path), token=TOKEN)
    try:
        assert "(TCP, token)" in running.started()
        monkeypatch.chdir(tmp_path)
        done = running.client.submit(["gen", "in.npy", "--count", "1000"])
        assert done["state"] == "done" and done["exit"] == 0, done
        for wrong in ("", "b" * 32, TOKEN[:-1] + "1"):
            intruder = Client(tcp=running.tcp, token=TOKEN)
            intruder.token = wrong  # as a client that sends what it has
            with pytest.raises(DistsortError, match="a missing or wrong token"):
                intruder.submit(["gen", "evil.npy", "--count", "10"])
        with pytest.raises(DistsortError, match="16 characters or more"):
            Client(tcp=running.tcp, token="short")
        assert not (tmp_path / "evil.npy").exists()
        monkeypatch.setenv("DISTSORT_TOKEN", TOKEN)
        assert Client(tcp=running.tcp).status()["done"][0]["state"] == "done"  # the env's token
        shown = subprocess.run([sys.executable, "-m", "distsort", "info"], capture_output=True,
                               text=True, timeout=120)
        assert "DISTSORT_TOKEN=(set)" in shown.stdout and TOKEN not in shown.stdout
    finally:
        assert running.stop() == 0


def test_serving_on_tcp_without_a_token_is_refused(tmp_path, monkeypatch):
    monkeypatch.delenv("DISTSORT_TOKEN", raising=False)
    cmd = [sys.executable, "-m", "distsort", "serve", "--tcp", "127.0.0.1:0"]
    run = subprocess.run(cmd, capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert run.returncode == 2 and "needs a token of 16 characters" in run.stderr


def test_a_job_whose_folder_went_away_fails_alone(tmp_path, monkeypatch):
    """Job 2's folder is removed while job 1 runs: job 2 fails with the reason (it ended the
    service on every rank); job 3 runs and is right. A folder that is not absolute is refused
    when the job is submitted."""
    monkeypatch.chdir(tmp_path)
    data = np.random.default_rng(4).integers(0, 1000, 20_000).astype(np.int64)
    service, go = _held_at_read(tmp_path, data)
    try:
        first, got_first = _waiting_job(service.client, ["sort", "in.npy", "-o", "a.npy"])
        _running(service, first)
        gone = tmp_path / "gone"
        gone.mkdir()
        monkeypatch.chdir(gone)
        second, got_second = _waiting_job(service.client, ["sort", str(tmp_path / "in.npy"),
                                                           "-o", str(tmp_path / "b.npy")])
        while not service.client.status()["queue"]:  # wait for the event: job 2 queued
            assert second.is_alive()
        monkeypatch.chdir(tmp_path)
        gone.rmdir()
        go.touch()
        first.join(timeout=120)
        second.join(timeout=120)
        assert got_first[0]["state"] == "done", got_first
        assert got_second[0]["state"] == "failed" and got_second[0]["exit"] == 2, got_second
        assert "cannot enter the job's folder" in got_second[0]["error"]
        after = service.client.submit(["sort", "in.npy", "-o", "c.npy"])
        assert after["state"] == "done", after
        np.testing.assert_array_equal(np.load("c.npy"), np.sort(data))
        relative = service.client._ask({"op": "submit", "argv": ["sort", "in.npy", "-o", "d.npy"],
                                        "cwd": "relative/dir", "wait": True})[-1]
        assert relative["state"] == "refused" and "absolute path" in relative["error"]
    finally:
        assert service.stop() == 0


def test_shutdown_lets_the_running_job_finish_and_runs_none_queued(tmp_path, monkeypatch):
    """As documented: after shutdown the running job finishes, the queued one is answered that
    it never ran (exit 2, logged), new jobs are refused, every rank exits 0."""
    monkeypatch.chdir(tmp_path)
    service, go = _held_at_read(tmp_path, np.arange(20_000, dtype=np.int64)[::-1])
    try:
        first, got_first, second, got_second = _one_running_one_queued(service)
        assert service.client.shutdown()["state"] == "stopping"
        late = service.client.submit(["sort", "in.npy", "-o", "c.npy"], wait=False)
        assert late["state"] == "refused" and "stopping" in late["error"]
        go.touch()
        first.join(timeout=120)
        second.join(timeout=120)
        assert got_first[0]["state"] == "done", got_first
        assert got_second[0]["exit"] == 2, got_second
        assert "stopped before this job ran" in got_second[0]["error"]
    finally:
        go.touch()
        assert service.stop() == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.npy", "go", "in.npy"]
    logged = [json.loads(line)["job"] for line in service.proc.stdout.read().splitlines()
              if line.startswith("{")]
    assert len(logged) == 2, logged


def test_a_file_at_the_socket_path_is_kept_and_a_job_may_not_write_the_socket(service,
                                                                              tmp_path):
    from distsort.service.server import _bind

    precious = tmp_path / "precious.txt"
    precious.write_text("data")
    with pytest.raises(DistsortError, match="not a socket"):
        _bind(str(precious))
    assert precious.read_text() == "data"
    np.save(tmp_path / "in.npy", np.arange(10))
    reply = service.client.submit(["sort", str(tmp_path / "in.npy"), "-o", service.socket])
    assert reply["state"] == "refused" and "this service's socket" in reply["error"]


def test_where_the_service_listens_after_the_jobs_words_is_named(tmp_path):
    """--socket after the words went into the job, and the default service was asked."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([os.getcwd(),
                                                       os.environ.get("PYTHONPATH", "")]))
    words = [sys.executable, "-m", "distsort", "submit", "sort", "a.npy", "-o", "b.npy",
             "--socket", str(tmp_path / "s.sock")]
    run = subprocess.run(words, cwd=tmp_path, env=env, capture_output=True, text=True,
                         timeout=120)
    assert run.returncode == 2 and "before the job's words" in run.stderr, run.stderr


@pytest.mark.parametrize("command", ["serve", "submit", "jobs"])
@pytest.mark.parametrize("where, says", [(["--tcp", "127.0.0.1:0"], "not allowed with argument"),
                                         (["--token-file", "t"], "--token-file is for --tcp")])
def test_a_socket_and_a_tcp_address_or_token_together_are_refused(tmp_path, command, where,
                                                                    says):
    """One of them would have been dropped without a word (--tcp won; the token was unused)."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([os.getcwd(),
                                                       os.environ.get("PYTHONPATH", "")]))
    words = [sys.executable, "-m", "distsort", command, "--socket", str(tmp_path / "s.sock"),
             *where] + (["sort", "a.npy", "-o", "b.npy"] if command == "submit" else [])
    run = subprocess.run(words, cwd=tmp_path, env=env, capture_output=True, text=True,
                         timeout=120)
    assert run.returncode == 2 and says in run.stderr, run.stderr
    assert os.listdir(tmp_path) == []
