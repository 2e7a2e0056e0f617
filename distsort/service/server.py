"""The service's ranks: rank 0 listens and queues the jobs, every rank runs them in order.

A job is the words of a `sort`, `gen` or `check` command line and the folder they are relative
to. Rank 0 refuses a job before it is queued where the words do not parse or name a path
outside the roots the service was started with (after `..` and symlinks are resolved), and
fails it unrun where a path is outside when its turn comes (a link changed meanwhile). A job
that fails as the command line would fail (a DistsortError every rank agreed on) fails alone:
its client gets the message and the next job runs. What would end a command line's job on every
rank (an error one rank saw alone, running out of memory where other ranks may wait for the one
that did, a rank that dies or hangs) ends the service the same way, every rank with it. A
service of one rank, ranks that share one GPU and fold onto rank 0 (steps/fold.py), and ranks
whose finish ran out of memory (pipeline.py: every rank agrees there) go on after the job: it
fails with the message, its memory back in the pools.

A cancelled job still queued never runs. The running one is stopped where every rank can stop
it alike: as its next phase starts (phases.checkpoints), rank 0 tells every rank whether the job
was cancelled, and each raises the same agreed error there, so it ends as a failed command line
ends (no output published, its memory back to the pools). A job without phases (gen) runs on.

SIGTERM (launchers pass it to every rank: mpirun, Slurm, a Kubernetes pod's end) stops the
service that way: the running job is cancelled at its next phase, the queued ones are answered
that the service stopped, and every rank exits 0. Where the job cannot reach its next phase (a
rank hangs), the service aborts after STOP_GRACE seconds, every rank non-zero.

By default rank 0 listens on a Unix socket only its owner may use; with --tcp on a TCP port
too reachable from elsewhere, where every request must carry the service's token (wire.py),
compared in constant time; a request without it is refused before it is read further.
"""

from __future__ import annotations

import contextlib
import functools
import hmac
import io
import itertools
import json
import os
import queue
import signal
import socket
import stat
import sys
import threading
import time
from dataclasses import dataclass, field

from .. import progress
from ..errors import DistsortError, RemoteError, abort, agree
from ..gpu_safety import oom_as_error
from ..phases import checkpoints
from .wire import default_socket, lines, read_token, send, tcp_address

JOB_TAG = 71  # the MPI tag of the jobs rank 0 hands the other ranks
IDLE_POLL = 0.002  # seconds between an idle rank's looks for its next job: no busy wait
KEPT = 100  # finished jobs that status still lists
STOP_GRACE = 10.0  # seconds the running job has to reach its next phase after SIGTERM
REQUEST_BYTES = 1 << 20  # the longest request line read (before its token is checked)
REQUEST_SECONDS = 30.0  # a connection that sends no whole request by then is closed
ACCEPT_RETRY = 0.1  # seconds before accepting again where the process ran out of descriptors
JOB_WORDS = 1000  # the most words a job may have (parsing takes the square of their number)
COMMANDS = ("sort", "gen", "check")
PATHS = ("input", "output", "values", "values_output", "report")  # the jobs' path arguments


@dataclass
class Job:
    id: int
    argv: list
    cwd: str
    state: str = "queued"
    exit: int | None = None
    error: str = ""
    output: str = ""
    seconds: float = 0.0
    phase: str = ""  # the running job's phase
    progress: dict | None = None  # its last step of known size: step, done, total, unit
    cancel: str = ""  # why the job was cancelled, once it was
    waiter: socket.socket | None = field(default=None, repr=False)

    def public(self) -> dict:
        return {"job": self.id, "argv": self.argv, "state": self.state, "phase": self.phase,
                "progress": self.progress, "exit": self.exit, "error": self.error,
                "output": self.output, "seconds": round(self.seconds, 4)}


def serve(args, comm) -> int:
    """`serve`: run jobs until a client asks for shutdown. args.parse_job parses a job's words
    as the command line does, raising DistsortError where they are wrong."""
    rank = comm.Get_rank()
    roots = [os.path.realpath(r) for r in (args.root or [os.getcwd()])]

    def listen() -> Listener:
        if args.tcp:
            return Listener(tcp_address(args.tcp), roots, args.parse_job,
                            read_token(args.token_file))
        return Listener(args.socket or default_socket(), roots, args.parse_job)

    listener = agree(comm, lambda: listen() if rank == 0 else None)
    _stop_on_sigterm(comm, listener)
    if rank == 0:
        print(f"distsort: serving {comm.Get_size()} rank(s) on {listener.where} (roots: "
              f"{', '.join(roots)})", flush=True)
    try:
        while (job := _next_job(comm, listener)) is not None:
            number, argv, cwd = job
            started = time.perf_counter()
            job_args = args.parse_job(argv)
            job_args.launched = 0.0  # the ranks were up: no launch to count
            watch = progress.watched(listener.progressed) if rank == 0 else contextlib.nullcontext()
            with checkpoints(functools.partial(_check_in, comm, listener, number)), watch:
                code, output, error = _run(comm, job_args, cwd)
            if rank == 0:
                listener.finished(code, output, error, time.perf_counter() - started)
    finally:
        if listener is not None:
            listener.close()
    return 0


def _stop_on_sigterm(comm, listener) -> None:
    """SIGTERM no longer ends a rank at once: rank 0 stops the service (Listener.stop), and
    aborts it if that takes longer than STOP_GRACE; the other ranks wait for rank 0's word.
    Rank 0 learns of the signal on a thread (the wakeup fd): its main thread may be inside a
    long call that Python's handlers would wait for."""
    signal.signal(signal.SIGTERM, lambda *_: None)
    if listener is None:
        return
    reader, writer = socket.socketpair()
    writer.setblocking(False)
    signal.set_wakeup_fd(writer.fileno(), warn_on_full_buffer=False)

    def watch(reader: socket.socket, writer: socket.socket) -> None:  # writer: kept open here
        while reader.recv(1) != bytes([signal.SIGTERM]):
            pass  # another signal with a Python handler (Ctrl-C): its handler acts
        listener.stop()
        time.sleep(STOP_GRACE)  # the service exits meanwhile, unless a rank cannot go on
        abort(comm, 3, f"distsort: the service did not stop within {STOP_GRACE:.0f} s of "
                       "SIGTERM (a rank does not answer): aborting every rank")

    threading.Thread(target=watch, args=(reader, writer), name="distsort-sigterm",
                     daemon=True).start()


def _next_job(comm, listener) -> tuple | None:
    """(words, folder) of the next job on every rank, None once the service stops. Rank 0
    waits on its queue; the others look for rank 0's message between short sleeps, as an MPI
    broadcast would keep them spinning on a core while the service is idle."""
    if comm.Get_rank() == 0:
        job = listener.next_job()
        message = None if job is None else (job.id, job.argv, job.cwd)
        for other in range(1, comm.Get_size()):
            comm.send(message, dest=other, tag=JOB_TAG)
        return message
    while not comm.Iprobe(source=0, tag=JOB_TAG):
        time.sleep(IDLE_POLL)
    return comm.recv(source=0, tag=JOB_TAG)


def _check_in(comm, listener, number: int, phase: str) -> None:
    """A running job's phase starts (every rank): rank 0 notes it, and every rank stops the job
    here, alike, if a client cancelled it."""
    why = comm.bcast(listener.reached(phase) if listener is not None else None, root=0)
    if why:
        stop = DistsortError(f"job {number} was cancelled {why} (before its {phase} phase)")
        stop.agreed = True
        raise stop


def _run(comm, args, cwd: str) -> tuple[int, str, str]:
    """Run one job on every rank: (exit status, what rank 0 printed, the error message)."""
    printed = io.StringIO()
    error = None
    with contextlib.ExitStack() as stack:
        if comm.Get_rank() == 0:
            stack.enter_context(contextlib.redirect_stdout(printed))
            stack.enter_context(contextlib.redirect_stderr(printed))
        here = os.getcwd()
        stack.callback(os.chdir, here)
        job = functools.partial(args.func, args, comm)
        if comm.Get_size() == 1:  # nobody waits for a lone rank: it goes on after an OOM too
            job = oom_as_error(0, job)
        try:
            agree(comm, functools.partial(_enter, cwd))
            code = job()
        except RemoteError:
            code = 2
        except DistsortError as exc:
            if not (exc.agreed or comm.Get_size() == 1):
                raise  # one rank alone knows: the command line's handler ends every rank
            code, error = 2, str(exc)
    errors = [e for e in comm.gather(error) or [] if e]
    return code, printed.getvalue(), errors[0] if errors else ""


def _enter(cwd: str) -> None:
    """Make the job's folder the working one; a DistsortError where it went away after the
    job was queued (the job fails alone)."""
    try:
        os.chdir(cwd)
    except OSError as exc:
        raise DistsortError(f"cannot enter the job's folder {cwd}: {exc.strerror or exc}") from None


class Listener:
    """Rank 0's socket, the queue of jobs and what became of the finished ones. address: a Unix
    socket's path, or (host, port) to listen on TCP, where requests carry `token`."""

    def __init__(self, address: str | tuple[str, int], roots: list[str], parse_job,
                 token: str | None = None):
        self.roots, self.parse_job, self.token = roots, parse_job, token
        # the log's stream, held now: while a job runs, sys.stdout is its output's buffer
        # (_run), and a job cancelled meanwhile is logged from the listener's thread
        self.log = sys.stdout
        self.queue: queue.Queue = queue.Queue()
        self.ids = itertools.count(1)
        self.lock = threading.Lock()
        self.running: Job | None = None
        self.stopping = False
        self.done: list[Job] = []
        if isinstance(address, tuple):
            self.sock = _bind_tcp(*address)
            host, port = self.sock.getsockname()[:2]
            self.where = f"{host}:{port} (TCP, token)"
        else:
            self.sock, self.where = _bind(address), address
        # the socket file made, to remove at the end only if it is still that one
        self.socket_file = None if isinstance(address, tuple) else _identity(address)
        threading.Thread(target=self._accept, name="distsort-listener", daemon=True).start()

    def next_job(self) -> Job | None:
        """The next job not cancelled while it waited (None: the service stops)."""
        while True:
            job = self.queue.get()
            if job is not None and job.state == "queued" and not self._still_inside(job):
                continue
            with self.lock:
                if self.stopping:
                    self._not_run(job)
                    return None
                if job is not None and job.state == "cancelled":
                    continue
                self.running = job
                if job is not None:
                    job.state = "running"
                return job

    def stop(self) -> None:
        """Stop: the running job cancelled, no job started after it, new ones refused."""
        with self.lock:
            self.stopping = True
            if self.running is not None:
                self.running.cancel = "as the service stopped (SIGTERM)"
        self.queue.put(None)

    def reached(self, phase: str) -> str:
        """The running job started `phase`; why it was cancelled, if it was ("" if not)."""
        with self.lock:
            self.running.phase = phase
            return self.running.cancel

    def progressed(self, state: dict) -> None:
        """The running job's step of known size started or advanced (progress.watched)."""
        with self.lock:
            if self.running is not None:
                self.running.progress = state

    def finished(self, code: int, output: str, error: str, seconds: float) -> None:
        with self.lock:
            job, self.running = self.running, None
            job.exit, job.output, job.error, job.seconds = code, output, error, seconds
            job.state = "done" if code == 0 else "cancelled" if job.cancel else "failed"
            job.phase, job.progress = "", None
            self.done = (self.done + [job])[-KEPT:]
        self._log(job)
        self._reply(job, job.public())

    def cancel(self, number: int) -> dict:
        """Cancel job `number`: a queued one at once (its waiting client told), the running
        one at its next phase (_check_in)."""
        with self.lock:
            if self.running is not None and self.running.id == number:
                self.running.cancel = "by a client"
                return {"job": number, "state": "cancelling"}
            with self.queue.mutex:
                queued = [job for job in self.queue.queue if job is not None and
                          job.id == number and job.state == "queued"]
            if not queued:
                return {"job": number, "state": "refused",
                        "error": f"job {number} is neither queued nor running"}
            job = queued[0]
            job.state, job.exit = "cancelled", 2
            job.error = f"job {number} was cancelled by a client"
            self.done = (self.done + [job])[-KEPT:]
        self._log(job)
        self._reply(job, job.public())
        return {"job": number, "state": "cancelled"}

    def _still_inside(self, job: Job) -> bool:
        """Are the job's paths inside the roots still (a link under a root may have been
        pointed elsewhere while the job waited)? Where not, the job fails unrun, its client
        told. (A folder gone meanwhile fails the job as it is entered: _enter says so.)"""
        try:
            if os.path.isdir(job.cwd):
                self._check(job.argv, job.cwd)
            return True
        except DistsortError as exc:
            with self.lock:
                if job.state != "queued":  # cancelled meanwhile: answered already
                    return False
                job.state, job.exit, job.error = "failed", 2, f"{exc} (when the job's turn came)"
                self.done = (self.done + [job])[-KEPT:]
        self._log(job)
        self._reply(job, job.public())
        return False

    def _log(self, job: Job) -> None:
        self.log.write(json.dumps(job.public()) + "\n")  # the service's log: a line a job
        self.log.flush()

    def close(self) -> None:
        """Stop listening; every job still queued is answered that the service stopped."""
        self.sock.close()
        if self.socket_file is not None and _identity(self.where) == self.socket_file:
            with contextlib.suppress(OSError):
                os.unlink(self.where)
        while not self.queue.empty():
            self._not_run(self.queue.get())

    def _not_run(self, job: Job | None) -> None:
        """Answer a queued job that the service stopped before (None: no job)."""
        if job is not None and job.state == "queued":
            job.state, job.error = "failed", "the service stopped before this job ran"
            job.exit = 2
            self._log(job)
            self._reply(job, job.public())

    def status(self) -> dict:
        with self.lock:
            running = self.running.public() if self.running else None
            with self.queue.mutex:  # the clients' threads put jobs meanwhile
                queued = list(self.queue.queue)
            waiting = [job.public() for job in queued  # a cancelled job waits only to be
                       if job is not None and job.state == "queued"]  # skipped: it is done
            return {"running": running, "queue": waiting,
                    "done": [job.public() for job in self.done]}

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                if self.sock.fileno() < 0:  # closed: the service stops
                    return
                time.sleep(ACCEPT_RETRY)  # out of descriptors for now: the open ones end
                continue
            conn.settimeout(REQUEST_SECONDS)
            try:
                threading.Thread(target=self._talk, args=(conn,), daemon=True).start()
            except RuntimeError:  # no thread to be had: this client is turned away
                conn.close()

    def _talk(self, conn: socket.socket) -> None:
        kept = False
        try:
            request = next(lines(conn, REQUEST_BYTES), None)
            if request is not None and not isinstance(request, dict):
                raise ValueError(f"a request is a JSON object, not {type(request).__name__}")
            kept = request is not None and self._answer(conn, request)
        except (OSError, ValueError, TypeError, RecursionError) as exc:  # TypeError: a field
            # of the wrong kind; RecursionError: JSON nested deeper than Python parses
            with contextlib.suppress(OSError):
                send(conn, {"state": "refused", "error": f"a bad request: {exc}"})
        finally:
            if not kept:
                conn.close()

    def _answer(self, conn: socket.socket, request: dict) -> bool:
        """Answer one request; True where a job keeps the connection to answer when done."""
        if self.token is not None and not hmac.compare_digest(
                str(request.get("token", "")).encode(), self.token.encode()):
            send(conn, {"state": "refused", "error": "a missing or wrong token", "token": False})
            return False
        op = request.get("op")
        if op == "status":
            send(conn, self.status())
        elif op == "shutdown":  # the running job finishes; the queued ones do not run
            with self.lock:
                self.stopping = True
            self.queue.put(None)
            send(conn, {"state": "stopping"})
        elif op == "cancel":
            job = request.get("job")
            if type(job) is not int:
                raise ValueError(f"cancel names a job by its number, not {job!r}")
            send(conn, self.cancel(job))
        elif op == "submit":
            argv, cwd = request.get("argv"), request.get("cwd") or "/"
            try:
                if self.stopping:
                    raise DistsortError("the service is stopping")
                self._check(argv, cwd)
            except DistsortError as exc:
                send(conn, {"state": "refused", "error": str(exc)})
                return False
            job = Job(next(self.ids), list(argv), cwd, waiter=conn if request.get("wait") else None)
            send(conn, job.public())
            self.queue.put(job)
            return job.waiter is not None
        else:
            send(conn, {"state": "refused", "error": f"unknown request {op!r}"})
        return False

    def _check(self, argv, cwd: str) -> None:
        """DistsortError where a job's words are not a sort, gen or check command line that
        the command line would take, or name a path outside the roots."""
        if not (isinstance(argv, list) and argv and all(isinstance(w, str) for w in argv)):
            raise DistsortError("a job is a list of words: a command line without `distsort`")
        if len(argv) > JOB_WORDS:
            raise DistsortError(f"a job of {len(argv)} words: give at most {JOB_WORDS}")
        if not (isinstance(cwd, str) and os.path.isabs(cwd) and os.path.isdir(cwd)):
            raise DistsortError(f"a job's folder is an absolute path to a folder: {cwd!r}")
        if argv[0] not in COMMANDS:
            raise DistsortError(f"a job is one of {', '.join(COMMANDS)}, not {argv[0]!r}")
        try:
            args = self.parse_job(argv)
        except SystemExit:  # --help and the like
            raise DistsortError(f"{' '.join(argv)}: not a job") from None
        for name in PATHS:
            given = getattr(args, name, None)
            for path in [given] if isinstance(given, str) else given or []:
                real = os.path.realpath(os.path.join(cwd, path))
                self._inside(real, path)
                if self.socket_file is not None and real == os.path.realpath(self.where):
                    raise DistsortError(f"{path} is this service's socket: choose another name")

    def _inside(self, real: str, path: str) -> None:
        if not any(os.path.commonpath([real, root]) == root for root in self.roots):
            raise DistsortError(f"{path}: outside the folders this service may use "
                                f"({', '.join(self.roots)}; serve --root adds one)")

    def _reply(self, job: Job, message: dict) -> None:
        if job.waiter is None:
            return
        with contextlib.suppress(OSError):  # a client that left: its job still ran
            send(job.waiter, message)
        job.waiter.close()


def _identity(path: str) -> tuple | None:
    """(device, inode) of the file at path, None where there is none."""
    try:
        found = os.lstat(path)
    except OSError:
        return None
    return found.st_dev, found.st_ino


def _bind_tcp(host: str, port: int) -> socket.socket:
    try:
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        return socket.create_server((host, port), family=family, backlog=64)
    except OSError as exc:
        raise DistsortError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None


def _bind(path: str) -> socket.socket:
    """A listening Unix socket at path that only this user may connect to; a socket left there
    by a service that ended is replaced, one that still answers is not."""
    if os.path.lexists(path):
        if not stat.S_ISSOCK(os.lstat(path).st_mode):  # a typo must not delete a file
            raise DistsortError(f"{path} exists and is not a socket: choose another --socket")
        probe = socket.socket(socket.AF_UNIX)
        try:
            probe.connect(path)
        except OSError:
            os.unlink(path)
        else:
            raise DistsortError(f"a service already listens on {path}: stop it (distsort "
                                "shutdown) or choose another --socket")
        finally:
            probe.close()
    sock = socket.socket(socket.AF_UNIX)
    old = os.umask(0o177)  # the socket file is made 0600: no window where others may connect
    try:
        sock.bind(path)
    except OSError as exc:
        raise DistsortError(f"cannot listen on {path}: {exc.strerror or exc}") from None
    finally:
        os.umask(old)
    sock.listen(64)
    return sock
