"""The in-memory distributed sample sort: sample -> splitters -> partition -> exchange -> finish,
one module each under steps/.

The data travels as columns (columns.py). Each element is partitioned once and sorted once: the
partition is a stable grouping by destination rank, and the one local sort happens on what this
rank received (runs in source-rank order, so a stable sort keeps equal keys in global input
order).
"""

from __future__ import annotations

import functools
from collections.abc import Callable

from .columns import KeyWords, coded
from .errors import agree
from .faults import inject_fault
from .gpu_safety import oom_as_error
from .local.engine import SortOptions
from .phases import phase
from .report import SortReport
from .runtime import Runtime
from .steps.exchange import exchange
from .steps.finish import finish, local_sort
from .steps.fold import folds, sort_folded
from .steps.partition import partition
from .steps.sample import local_sample, sample_sizes
from .steps.splitters import choose_splitters


def distributed_sort(rt: Runtime, columns: list, key_words: KeyWords, report: SortReport,
                     alone_options: SortOptions | None = None, codec=None) -> list:
    """Sort the columns globally by key_words; return this rank's shard of every column.
    alone_options: the engine's options where one rank sorts every row (sorts_as_one: raw
    numbers, a codec). codec: the first column holds raw numbers, coded on the way (by the
    partition: CPU ranks), whose codes come back."""
    comm, clock = rt.comm, rt.backend.clock()  # phase boundaries wait for nothing
    rank, counts = comm.Get_rank(), _counts(rt, columns)
    if len(counts) == 1 or sum(counts) == 0 or folds(rt):
        options, columns = alone_options or {}, coded(columns, codec, rt.xp)
        return sort_as_one(rt, report, columns,
                           lambda c, **more: local_sort(rt, c, key_words, **{**options, **more}),
                           counts)
    report.count_in, report.global_count, report.ranks = counts[rank], sum(counts), len(counts)
    with phase(report, "sample", clock):
        words = key_words(columns)  # made once for the sample and the partition
        sample = local_sample(words, counts, rank, rt.backend, codec=codec)
        splitters = choose_splitters(rt, sample, sample_sizes(counts))
    with phase(report, "partition", clock):
        place = (sum(counts[:rank]), sum(counts), max(counts))
        routed = partition(rt, columns, words, place, splitters, codec)
        del words, columns
    with phase(report, "exchange", clock):
        received = exchange(rt, routed, report)
        del routed  # received.sent holds the only reference to the sent rows: finish takes it
    with phase(report, "finish", clock):
        # no collective inside: a rank that runs out of memory here fails the job on every
        # rank alike, rather than leave them waiting in the next one (a service goes on)
        columns = agree(comm, oom_as_error(rank, functools.partial(
            _finished, rt, received, key_words, splitters)))
    report.count_out = len(columns[0])
    return columns


def _finished(rt: Runtime, received, key_words: KeyWords, splitters) -> list:
    inject_fault("sorting", rt.comm.Get_rank())
    columns = finish(rt, received, key_words, splitters)
    rt.backend.synchronize()  # done when it returns, under the finish's watchdog
    return columns


def sorts_as_one(rt: Runtime) -> bool:
    """Does one rank sort every row of a sort on this runtime in memory (one rank, or ranks
    that all share one GPU: steps/fold.py)? The same answer on every rank."""
    return rt.comm.Get_size() == 1 or folds(rt)


def sort_as_one(rt: Runtime, report: SortReport, columns: list, run: Callable[..., list],
                counts: list | None = None) -> list:
    """This rank's shard of run(columns) run on every row at once (sorts_as_one, or no rank
    holds a row); run(columns, overwrite=True) where it may overwrite them (engine.py:
    SortOptions); counts: every rank's rows, if known. Where each rank holds its own rows
    (one rank, or none holds any), timed as the finish and returned once the sort is queued:
    such a rank waits for nobody, and its caller's next work on the device follows it in
    stream order."""
    counts = _counts(rt, columns) if counts is None else counts
    if len(counts) > 1 and sum(counts) > 0:
        return sort_folded(rt, report, columns, counts, run)
    with phase(report, "finish", rt.backend.clock()):
        columns = run(columns)
    report.count_in = report.global_count = report.count_out = len(columns[0])
    report.ranks = rt.comm.Get_size()
    return columns


def _counts(rt: Runtime, columns: list) -> list:
    """Every rank's rows (no collective for a rank alone)."""
    rows = len(columns[0])
    return rt.comm.allgather(rows) if rt.comm.Get_size() > 1 else [rows]
