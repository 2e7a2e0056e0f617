"""The in-memory distributed sample sort: sample -> splitters -> partition -> exchange -> finish,
one module each under steps/.

The data travels as columns (columns.py). Each element is partitioned once and sorted once: the
partition is a stable grouping by destination rank, and the one local sort happens on what this
rank received (runs in source-rank order, so a stable sort keeps equal keys in global input
order).
"""

from __future__ import annotations

from collections.abc import Callable

from .columns import KeyWords
from .local.engine import SortOptions
from .phases import phase
from .report import SortReport
from .runtime import Runtime
from .steps.exchange import exchange
from .steps.finish import finish, local_sort
from .steps.partition import partition
from .steps.sample import local_sample, sample_sizes
from .steps.splitters import choose_splitters


def distributed_sort(rt: Runtime, columns: list, key_words: KeyWords, report: SortReport,
                     alone_options: SortOptions | None = None) -> list:
    """Sort the columns globally by key_words; return this rank's shard of every column.
    alone_options: the engine's options where this rank sorts alone (raw numbers: a codec)."""
    comm, clock = rt.comm, rt.backend.clock()  # phase boundaries wait for nothing
    rank, rows = comm.Get_rank(), len(columns[0])
    counts = comm.allgather(rows) if comm.Get_size() > 1 else [rows]
    if len(counts) == 1 or sum(counts) == 0:
        options = alone_options or {}
        return sort_alone(rt, report, lambda: local_sort(rt, columns, key_words, **options))
    report.count_in, report.global_count, report.ranks = counts[rank], sum(counts), len(counts)
    with phase(report, "sample", clock):
        words = key_words(columns)  # made once for the sample and the partition
        sample = local_sample(words, counts, rank, rt.backend)
        splitters = choose_splitters(rt, sample, sample_sizes(counts))
    with phase(report, "partition", clock):
        place = (sum(counts[:rank]), sum(counts), max(counts))
        routed = partition(rt, columns, words, place, splitters)
        del words, columns
    with phase(report, "exchange", clock):
        received = exchange(rt, routed, report)
        del routed  # received.sent holds the only reference to the sent rows: finish takes it
    with phase(report, "finish", clock):
        columns = finish(rt, received, key_words, splitters)
        rt.backend.synchronize()  # done when it returns, under the finish's watchdog
    report.count_out = len(columns[0])
    return columns


def sort_alone(rt: Runtime, report: SortReport, run: Callable[[], list]) -> list:
    """The columns run() gives, the sort of a rank that holds every row there is (one rank, or
    none holds any), timed as the finish. It returns once the sort is queued: a rank alone
    waits for nobody, and its caller's next work on the device follows it in stream order."""
    with phase(report, "finish", rt.backend.clock()):
        columns = run()
    report.count_in = report.global_count = report.count_out = len(columns[0])
    report.ranks = rt.comm.Get_size()
    return columns
