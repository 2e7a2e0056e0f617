"""The process's pool of worker threads, for work that scales with cores: file reads and
writes (io/parallel.py) and first touches of fresh host memory (memory.first_touch).

The ranks of a node share its cores: each takes its share of them (threads_for), and its
threads run on any core, whatever core the launcher bound the rank to.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable
from typing import TYPE_CHECKING, TypeVar

if TYPE_CHECKING:
    from concurrent.futures import ThreadPoolExecutor

MAX_THREADS = 16
_pool: dict[str, ThreadPoolExecutor | int] = {"threads": 8}
T = TypeVar("T")


def threads_for(ranks_on_node: int) -> int:
    """Threads for one rank's pool: its share of the node's cores, 1 to MAX_THREADS."""
    return max(1, min(MAX_THREADS, (os.cpu_count() or 1) // max(ranks_on_node, 1)))


def unbind() -> None:
    """Let this thread (a pool's, or another that works beside the rank's main thread) run on
    any of the node's cores: launchers bind a rank to one core (Open MPI does at 1 or 2
    ranks), where its threads would take turns with the main thread."""
    try:
        os.sched_setaffinity(0, range(os.cpu_count() or 1))  # this thread only; the cpuset
    except (AttributeError, OSError):  # still applies
        pass


def use_threads(threads: int) -> None:
    """Serve this process's pool work with `threads` threads from now on."""
    if threads != _pool["threads"]:
        old = _pool.pop("executor", None)
        if old is not None:
            old.shutdown()
        _pool["threads"] = threads


def _executor() -> ThreadPoolExecutor:
    from concurrent.futures import ThreadPoolExecutor  # here: a rank of one thread needs none

    if "executor" not in _pool:
        _pool["executor"] = ThreadPoolExecutor(_pool["threads"], thread_name_prefix="distsort",
                                               initializer=unbind)
    return _pool["executor"]


def threads() -> int:
    """The threads that serve this process's pool work."""
    return _pool["threads"]


def each(calls: list[Callable[[], T]]) -> list[T]:
    """[call() for call in calls], served by the pool's threads."""
    if len(calls) <= 1 or _pool["threads"] == 1:
        return [call() for call in calls]
    return list(_executor().map(lambda call: call(), calls))


def spread(work: Callable[[int, int], T], nbytes: int, piece: int) -> list[T]:
    """[work(lo, hi) for each piece [lo, hi) of range(nbytes)], served by the pool's threads."""
    return each([functools.partial(work, lo, min(lo + piece, nbytes))
                 for lo in range(0, nbytes, piece)])
