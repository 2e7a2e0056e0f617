"""Ranks that all run on one GPU sort as one: every rank's rows go to rank 0 by device copies,
rank 0 sorts them as a rank alone would, and each rank gets back an even slice of the result.

Why: without MPS the ranks' kernels take turns on the GPU, so the sample sort's sample,
partition, exchange and P local sorts cost the GPU more than one sort of every row plus two
copies of them, and the ranks wait for each other between the steps (bench/RESULTS.md, issue
35). The rows reach rank 0 in rank order and the local sort is stable, so the result holds the
rows the split sort would give, in the same order; only where the shards end differs (here they
are even). The ranks' budgets share one device's memory: plan.py counts each rank's rows four
times over (three, and the local sort's second buffer), which covers what the fold holds at its
peak: every rank's input, the gathered rows on rank 0 and the sort's second buffer.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import numpy as np

from .. import settings
from ..errors import agree
from ..gpu_safety import oom_as_error
from ..phases import phase
from ..report import SortReport
from ..runtime import Runtime
from ..transport import choice

PATH = "in memory, folded onto rank 0"  # the report's path


def folds(rt: Runtime) -> bool:
    """Does this runtime's in-memory sort fold? The same answer on every rank (their settings
    alike)."""
    return rt.placement is not None and choice.folds(settings.value("DISTSORT_SHARED_GPU"),
                                                      rt.placement)


def sort_folded(rt: Runtime, report: SortReport, columns: list, counts: list,
                run: Callable[..., list]) -> list:
    """This rank's shard of run(every rank's columns, in rank order), run on rank 0, where it
    may overwrite them (run(columns, overwrite=True))."""
    rank, ranks, clock = rt.comm.Get_rank(), len(counts), rt.backend.clock()
    report.count_in, report.global_count, report.ranks = counts[rank], sum(counts), ranks
    report.path = PATH
    nothing = np.zeros(ranks, dtype=np.int64)
    with phase(report, "exchange", clock):
        gathered = rt.transport.alltoallv(columns, _only(counts[rank], ranks),
                                          np.asarray(counts) if rank == 0 else nothing)
    with phase(report, "finish", clock):
        # rank 0 alone holds the rows, so it alone can run out of memory: every rank fails
        # alike (agree) rather than wait, and a service's ranks go on to the next job
        ordered = agree(rt.comm, oom_as_error(rank, functools.partial(
            _sorted_on_rank_0, rank, run, gathered)))
        like = rt.comm.bcast(ordered and [(c.dtype, c.shape[1:]) for c in ordered])
        ordered = ordered or [rt.xp.empty((0,) + shape, dtype) for dtype, shape in like]
        del gathered
    with phase(report, "exchange", clock):
        shards = even_shards(sum(counts), ranks)
        columns = rt.transport.alltoallv(ordered, shards if rank == 0 else nothing,
                                         _only(shards[rank], ranks))
    report.count_out = len(columns[0])
    return columns


def _sorted_on_rank_0(rank: int, run: Callable[..., list], gathered: list) -> list | None:
    return run(gathered, overwrite=True) if rank == 0 else None


def even_shards(total: int, ranks: int) -> np.ndarray:
    """Rows of each rank's shard: total split as evenly as rows allow, the larger first."""
    return total // ranks + (np.arange(ranks) < total % ranks).astype(np.int64)


def _only(rows: int, ranks: int) -> np.ndarray:
    """Counts of an all-to-all-v where `rows` go to (or come from) rank 0 only."""
    counts = np.zeros(ranks, dtype=np.int64)
    counts[0] = rows
    return counts
