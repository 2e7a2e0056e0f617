"""The in-memory distributed sample sort: sample -> splitters -> partition -> exchange -> finish,
one module each under steps/.

The data travels as columns (columns.py). Each element is partitioned once and sorted once: the
partition is a stable grouping by destination rank, and the one local sort happens on what this
rank received (runs in source-rank order, so a stable sort keeps equal keys in global input
order).
"""

from __future__ import annotations

from .columns import KeyWords
from .phases import phase
from .report import SortReport
from .runtime import Runtime
from .steps.exchange import exchange
from .steps.finish import finish, local_sort
from .steps.partition import partition
from .steps.sample import local_sample, sample_sizes
from .steps.splitters import choose_splitters


def distributed_sort(rt: Runtime, columns: list, key_words: KeyWords, report: SortReport) -> list:
    """Sort the columns globally by key_words; return this rank's shard of every column."""
    comm, clock = rt.comm, rt.backend.clock()  # phase boundaries wait for nothing
    counts = comm.allgather(len(columns[0]))
    rank = comm.Get_rank()
    report.count_in, report.global_count, report.ranks = counts[rank], sum(counts), len(counts)
    if len(counts) == 1 or sum(counts) == 0:
        with phase(report, "finish", clock):
            columns = local_sort(rt, columns, key_words)
            rt.backend.synchronize()
        report.count_out = len(columns[0])
        return columns
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
