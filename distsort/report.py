"""Phase timings and sizes of one distributed sort, for the summary line and --report JSON."""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

PHASES = ("sample", "partition", "exchange", "finish")


class Clock(Protocol):
    """Marks the start and end of a phase: HostClock, or a backend's stream clock (CUDA events
    on the current stream, where a phase is the device's time from one mark to the next)."""

    def mark(self): ...

    def seconds(self, start, end) -> float: ...


class HostClock:
    """Marks on the host, each after synchronize() (default: none) has waited for queued work."""

    def __init__(self, synchronize: Callable[[], None] = lambda: None):
        self.synchronize = synchronize

    def mark(self) -> float:
        self.synchronize()
        return time.perf_counter()

    def seconds(self, start: float, end: float) -> float:
        return end - start


@dataclass
class SortReport:
    """What one rank measured: seconds per phase, elements and bytes in and out."""

    rank: int = 0
    backend: str = ""
    engine: str = ""
    transport: str = ""
    path: str = "in memory"  # or "out of core" (outofcore/)
    wall: float | None = None  # the whole command's seconds, process start included (CLI)
    timed: dict[str, float] = field(default_factory=dict)  # seconds per phase, from marks
    marks: list = field(default_factory=list)  # (phase, clock, start, end) not yet read
    count_in: int = 0
    count_out: int = 0
    bytes_sent: int = 0
    bytes_received: int = 0
    global_count: int = 0
    ranks: int = 1
    transfers: list = field(default_factory=list)  # (start, end) CUDA events of GPU transfers
    timed_phases: bool = True  # False: nobody reads this report's phases (an API call given
    # none), so they are not timed: on GPUs two CUDA events a phase, much of a small call

    def ran_on(self, rt) -> SortReport:
        """Note the runtime the sort runs on (rank, backend, engine, transport); returns self."""
        self.rank, self.backend = rt.comm.Get_rank(), rt.backend.name
        self.engine, self.transport = rt.backend.engine.name, rt.transport.name
        self._sorts = rt.backend.engine.used
        self._sorts.clear()  # this job's sorts from now on
        return self

    @property
    def sorts(self) -> str:
        """The sorts that ran ('radix', 'cub+radix', ...; the engine's name if none noted)."""
        used = getattr(self, "_sorts", None)
        return "+".join(sorted(used)) if used else self.engine

    @property
    def phases(self) -> dict[str, float]:
        """Seconds per phase (a stream clock's marks are waited for here)."""
        for name, clock, start, end in self.marks:
            self.timed[name] = self.timed.get(name, 0.0) + clock.seconds(start, end)
        self.marks.clear()
        return self.timed

    @property
    def seconds(self) -> float:
        return sum(self.phases.values())

    def count_exchanged(self, row_bytes: int, sent, received, me: int) -> None:
        """Add the bytes of an exchange's rows to and from the other ranks: sent[j] rows went
        to rank j, received[j] came from rank j (rank me's own rows do not count)."""
        self.bytes_sent += int(sent.sum() - sent[me]) * row_bytes
        self.bytes_received += int(received.sum() - received[me]) * row_bytes

    def time_transfers(self, start, end) -> None:
        """Note CUDA events recorded before and after an exchange's device transfers (the
        chunked exchange's NCCL calls, beside the kernels that overlap them)."""
        self.transfers.append((start, end))

    @property
    def transfer_seconds(self) -> float | None:
        """Seconds between each noted pair of events, summed (None if none was noted). Waits
        for the end events."""
        if not self.transfers:
            return None
        import cupy

        return sum(cupy.cuda.get_elapsed_time(a, b) for a, b in self.transfers) / 1e3

    def as_dict(self) -> dict:
        return {
            "rank": self.rank, "backend": self.backend, "engine": self.sorts,
            "transport": self.transport, "path": self.path, "wall": self.wall,
            "phases": dict(self.phases), "seconds": self.seconds,
            "count_in": self.count_in, "count_out": self.count_out,
            "bytes_sent": self.bytes_sent, "bytes_received": self.bytes_received,
            "transfer_seconds": self.transfer_seconds,
            "peak_host_bytes": peak_host_bytes(),
        }


def summarize(reports: list[dict], global_count: int) -> dict:
    """Combine all ranks' reports: the slowest rank's phases (its whole command where the CLI
    timed it: then `other` is what no phase covers, and the phases add up to `seconds`),
    balance, throughput."""
    p = len(reports)
    slowest = max(reports, key=lambda r: r["wall"] or r["seconds"])
    phases = dict(slowest["phases"])
    seconds = slowest["wall"] or max(r["seconds"] for r in reports)
    if slowest["wall"]:
        phases["other"] = max(seconds - sum(phases.values()), 0.0)
    biggest = max(r["count_out"] for r in reports)
    return {
        "ranks": p,
        "keys": global_count,
        "seconds": seconds,
        "gkeys_per_s": global_count / seconds / 1e9 if seconds else 0.0,
        "phases": phases,
        "path": slowest["path"], "transport": slowest["transport"],
        "engine": "+".join(sorted({s for r in reports for s in r["engine"].split("+") if s})),
        "max_shard_over_mean": biggest * p / global_count if global_count else 1.0,
        "peak_host_bytes": max(r["peak_host_bytes"] for r in reports),
        "per_rank": reports,
    }


def peak_host_bytes() -> int:
    """This process's peak resident memory so far, in bytes (0 where the platform does not
    say): what a rank held at most, the pages of files it mapped (its output's) included."""
    try:
        import resource
    except ImportError:
        return 0
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak if sys.platform == "darwin" else peak * 1024  # bytes there, KiB elsewhere


def since_start() -> float:
    """Seconds since this process started (Linux: /proc), else 0: the launch, the imports and
    MPI's start-up before the command runs."""
    try:
        with open("/proc/self/stat") as f:
            started = int(f.read().rsplit(")", 1)[1].split()[19]) / os.sysconf("SC_CLK_TCK")
        with open("/proc/uptime") as f:
            return max(float(f.read().split()[0]) - started, 0.0)
    except (OSError, ValueError, IndexError):
        return 0.0


def duration(seconds: float) -> str:
    """'2.41 s', '87.3 ms'."""
    return f"{seconds:.2f} s" if seconds >= 1 else f"{seconds * 1e3:.1f} ms"


def rate(amount: float, seconds: float, unit: str) -> str:
    """'812 M keys/s', '4.31 GB/s': three significant digits, whatever the size."""
    return scaled(amount / seconds if seconds else 0.0, unit) + "/s"


def scaled(value: float, unit: str) -> str:
    """'812 M keys', '4.31 GB': three significant digits, whatever the size."""
    prefix = next(((p, f) for p, f in (("T", 1e12), ("G", 1e9), ("M", 1e6), ("k", 1e3))
                   if value >= f), ("", 1.0))
    name = f"{prefix[0]} {unit}" if unit == "keys" and prefix[0] else f"{prefix[0]}{unit}"
    return f"{value / prefix[1]:.3g} {name}"


