"""Talking to a running service: distsort.Client for programs, and the `submit`, `status`,
`jobs`, `cancel` and `shutdown` commands for people."""

from __future__ import annotations

import json
import os
import socket
import sys

from ..errors import DistsortError
from .wire import checked_token, default_socket, lines, read_token, send, tcp_address


class Client:
    """A service's client: Client(socket path) (default: where `serve` listens by default), or
    Client(tcp="HOST:PORT", token=...) for a service on TCP (token: default $DISTSORT_TOKEN).

        client = distsort.Client()
        done = client.submit(["sort", "in.npy", "-o", "out.npy", "--verify"])
        done["exit"], done["error"], done["output"]

    Relative paths in a job are taken from the client's working folder."""

    def __init__(self, path: str | None = None, *, tcp: str | None = None,
                 token: str | None = None):
        self.tcp = tcp_address(tcp) if tcp else None
        self.token = None if not tcp else checked_token(token) if token else read_token(None)
        self.path = tcp or path or default_socket()  # where, in messages

    def submit(self, argv: list[str], wait: bool = True) -> dict:
        """Queue a job (the words of a sort, gen or check command line); with wait, its
        outcome once it ran (state 'done', 'failed' or 'cancelled', exit, error, output), else
        its place in the queue. A job the service refuses comes back with state 'refused'."""
        reply = self._ask({"op": "submit", "argv": list(argv), "wait": wait,
                           "cwd": _folder()})[-1]
        if wait and reply["state"] not in ("done", "failed", "refused", "cancelled"):
            raise DistsortError(f"the service on {self.path} ended before job {reply['job']} "
                                "was done")
        return reply

    def status(self) -> dict:
        """The running job, the queue and the jobs finished lately."""
        return self._ask({"op": "status"})[-1]

    def cancel(self, job: int) -> dict:
        """Cancel a job: one still queued never runs; the running one stops at its next phase
        on every rank (its output is not written). State 'cancelled', 'cancelling', or
        'refused' for a job neither queued nor running."""
        return self._ask({"op": "cancel", "job": int(job)})[-1]

    def shutdown(self) -> dict:
        """Stop the service once the running job is done (jobs queued behind are refused)."""
        return self._ask({"op": "shutdown"})[-1]

    def _ask(self, request: dict) -> list[dict]:
        try:
            conn = self._connect()
        except OSError as exc:
            raise DistsortError(f"no service answers on {self.path} ({exc.strerror or exc}): "
                                "start one with `mpirun -n P python -m distsort serve`") from None
        try:
            with conn:
                send(conn, {**request, "token": self.token} if self.token else request)
                replies = list(lines(conn))
        except OSError:  # a service closing its socket as it stops: no answer, as below
            replies = []
        if not replies:
            raise DistsortError(f"the service on {self.path} ended without an answer")
        if replies[0].get("token") is False:
            raise DistsortError(f"the service on {self.path} refused: {replies[0]['error']}")
        return replies

    def _connect(self) -> socket.socket:
        if self.tcp:
            return socket.create_connection(self.tcp)
        conn = socket.socket(socket.AF_UNIX)
        try:
            conn.connect(self.path)
        except OSError:
            conn.close()
            raise
        return conn


WHERE_OPTIONS = ("--socket", "--tcp", "--token-file")  # the service's, not a job's


def client_of(args) -> Client:
    """The client the command line's --socket, or --tcp and --token-file, name."""
    if args.tcp:
        return Client(tcp=args.tcp, token=read_token(args.token_file))
    return Client(args.socket)


def submit(args, comm) -> int:
    """`submit`: one job; its output as the command would print it, its exit status."""
    misplaced = [w for w in args.job if w.split("=")[0] in WHERE_OPTIONS]
    if misplaced:  # the job's words would carry them, and the default service be asked
        raise DistsortError(f"{' '.join(misplaced)}: give where the service listens before the "
                            "job's words (distsort submit --socket PATH sort IN -o OUT)")
    reply = client_of(args).submit(args.job, wait=not args.no_wait)
    if reply["state"] == "refused":
        raise DistsortError(f"the service refused the job: {reply['error']}")
    if args.no_wait:
        print(f"distsort: job {reply['job']} queued")
        return 0
    sys.stdout.write(reply["output"])
    if reply["error"]:
        print(f"distsort: error: {reply['error']}", file=sys.stderr)
    return 2 if reply["exit"] is None else reply["exit"]  # None: it never ran


def status(args, comm) -> int:
    print(json.dumps(client_of(args).status(), indent=1))
    return 0


def jobs(args, comm) -> int:
    """`jobs`: a line a job, the finished ones first, then the running one and the queue."""
    now = client_of(args).status()
    for job in now["done"] + ([now["running"]] if now["running"] else []) + now["queue"]:
        print(job_line(job))
    return 0


def _folder() -> str:
    """The folder a job's relative paths start from: this process's."""
    try:
        return os.getcwd()
    except FileNotFoundError:
        raise DistsortError("the folder this client runs in was removed: change to one that "
                            "exists (the job's relative paths start from it)") from None


def job_line(job: dict) -> str:
    """'7  running (read: read in.npy 12.0 of 64.0 MiB)  sort in.npy -o out.npy'; finished
    jobs with exit and seconds."""
    where = [job["phase"]] if job.get("phase") else []
    if job.get("progress"):
        where.append(_progress(job["progress"]))
    state = job["state"] + (f" ({': '.join(where)})" if where else "")
    if job["exit"] is not None:
        state += f", exit {job['exit']}, {job['seconds']:.3f} s"
    return f"{job['job']:>5}  {state:<28}  {' '.join(job['argv'])}"


def _progress(step: dict) -> str:
    """'read in.npy 12.0 of 64.0 MiB', '3 of 8 run'."""
    done, total = step["done"], step["total"]
    if step["unit"] == "B":
        return f"{step['step']} {done / 2**20:.1f} of {total / 2**20:.1f} MiB"
    return f"{step['step']} {done} of {total} {step['unit']}"


def cancel(args, comm) -> int:
    reply = client_of(args).cancel(args.job)
    if reply["state"] == "refused":
        raise DistsortError(reply["error"])
    print(f"distsort: job {args.job} {reply['state']}")
    return 0


def shutdown(args, comm) -> int:
    client_of(args).shutdown()
    print("distsort: the service stops once its running job is done")
    return 0
