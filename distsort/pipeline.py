"""The in-memory distributed sample sort: sample -> splitters -> partition -> exchange -> finish.

The data travels as *columns*: arrays whose first axis is the element (encoded keys, records,
values, original positions). `key_words(columns)` derives the unsigned key words from them, so
records carry their keys inside and nothing is sent twice. Each element is partitioned once and
sorted once: the partition is a stable counting sort by destination rank, and the one local sort
happens after the exchange, on what this rank received (runs in source-rank order, so a stable
sort keeps equal keys in global input order).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from .local import partition as gpu_partition
from .local.order import stable_order
from .report import SortReport
from .runtime import Runtime
from .splitters import choose_splitters, classify, local_sample

KeyWords = Callable[[list], list]


def distributed_sort(rt: Runtime, columns: list, key_words: KeyWords, report: SortReport) -> list:
    """Sort the columns globally by key_words; return this rank's shard of every column."""
    comm, sync = rt.comm, rt.backend.synchronize
    counts = comm.allgather(len(columns[0]))
    offset = sum(counts[: comm.Get_rank()])
    report.count_in, report.global_count = counts[comm.Get_rank()], sum(counts)
    report.ranks = len(counts)
    end_bit = None
    if comm.Get_size() > 1 and sum(counts) > 0:
        with report.phase("sample", sync):
            sample = local_sample(key_words(columns), counts, comm.Get_rank(), rt.xp)
            splitters = choose_splitters(comm, sample, lambda cols: _host_order(rt, cols))
        with report.phase("partition", sync):
            columns, send_counts = partition(rt, columns, key_words, offset, splitters)
        with report.phase("exchange", sync):
            columns = exchange(rt, columns, send_counts, report)
        end_bit = varying_bits(splitters, comm.Get_rank(), key_words(columns)[0].dtype)
    with report.phase("finish", sync):
        columns = local_sort(rt, columns, key_words, end_bit)
    report.count_out = len(columns[0])
    return columns


def partition(rt: Runtime, columns: list, key_words: KeyWords, offset: int, splitters):
    """Group the rows by destination rank, stably; return the columns and rows per rank."""
    words, p = key_words(columns), len(splitters) + 1
    if rt.backend.name == "gpu" and len(words) == 1 and gpu_partition.supports(words[0], p):
        keyed = words[0] is columns[0]
        grouped, dest, send_counts = gpu_partition.partition_keys(
            words[0], offset, splitters, want_dest=len(columns) > int(keyed))
        rest = [_scatter(c, dest, rt.xp) for c in columns[int(keyed):]]
        return ([grouped] if keyed else []) + rest, send_counts
    buckets = classify(words, offset, splitters, rt.xp)
    small = buckets.astype(np.uint16 if p <= 2**16 else np.uint32)
    order = rt.backend.engine.argsort(small)
    send_counts = rt.backend.to_host(rt.xp.bincount(buckets, minlength=p)).astype(np.int64)
    return [c[order] for c in columns], send_counts


def _scatter(column, dest, xp):
    out = xp.empty_like(column)
    out[dest] = column
    return out


def exchange(rt: Runtime, columns: list, send_counts: np.ndarray, report: SortReport) -> list:
    """All-to-all-v of every column: counts first, then the rows."""
    recv_counts = np.empty_like(send_counts)
    rt.comm.Alltoall(send_counts, recv_counts)
    widths = sum(c.nbytes // max(len(c), 1) for c in columns)
    me = rt.comm.Get_rank()
    report.bytes_sent += int(send_counts.sum() - send_counts[me]) * widths  # to other ranks
    report.bytes_received += int(recv_counts.sum() - recv_counts[me]) * widths
    return rt.transport.alltoallv(columns, send_counts, recv_counts)


def varying_bits(splitters: np.ndarray, rank: int, word) -> int:
    """How many low bits of the first key word can differ on this rank after the exchange.

    Its keys lie between the first words of splitters rank-1 and rank, so every bit above the
    highest bit where those two bounds differ is the same for all of them.
    """
    bits = 8 * np.dtype(word).itemsize
    low = int(splitters[rank - 1, 0]) if rank > 0 else 0
    high = int(splitters[rank, 0]) if rank < len(splitters) else (1 << bits) - 1
    return (low ^ high).bit_length()


def local_sort(rt: Runtime, columns: list, key_words: KeyWords, end_bit: int | None = None):
    """Sort this rank's rows by their key words: plain keys directly, else by a stable order.

    end_bit (from varying_bits) lets an engine skip the first word's bits that cannot differ.
    """
    words = key_words(columns)
    if len(columns) == 1 and len(words) == 1 and words[0] is columns[0]:
        return [rt.backend.engine.sort(words[0], end_bit=end_bit)]
    order = stable_order(words, rt.backend.engine)
    return [c[order] for c in columns]


def _host_order(rt: Runtime, host_columns: list) -> np.ndarray:
    """Stable order of host rows by their columns, computed on the backend's device."""
    words = [rt.backend.from_host(c) for c in host_columns]
    return rt.backend.to_host(stable_order(words, rt.backend.engine))
