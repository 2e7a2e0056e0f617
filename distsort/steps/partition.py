"""The partition: every row routed to its destination rank by its key words.

Each element is partitioned once: on GPUs, rows are counted per destination chunk by chunk and
grouped while the exchange runs (ChunkedRows, chunks.py); elsewhere they are grouped now, stably
(GroupedRows): on CPUs, plain keys of 4 or 8 bytes (and their values) by two passes of a C
scatter, other rows whose first column is their key sorted first and cut where the splitters
fall; other rows by a sort of their destinations.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from mpi4py import MPI

from ..columns import coded, own_key, radix_rows
from ..errors import DistsortError, agree
from ..local import digit_partition, landing, scatter
from ..local import partition as gpu_partition
from ..local.landing import LandingSort
from ..local.rows import take
from ..runtime import Runtime
from ..transport import aligned_displacements, counts_received, displacements
from ..transport.choice import CMA
from . import chunks
from .finish import landing_sort
from .splitters import classify, key_range, outside_key


def partition(rt: Runtime, columns: list, words: list, place: tuple[int, int, int],
              splitters, codec=None):
    """Route every row to its destination rank by its key words; place is (global position of
    this rank's first row, rows on all ranks, rows on the rank that has most). On GPUs, rows
    are counted per rank chunk by chunk, to be grouped while the exchange runs (chunks.py;
    plain keys and pairs also by their receiver's first radix digit: digit_bits); elsewhere all
    are grouped now, stably, by a sort of their destinations, and key words that are not a
    column (records) go with them, to be sent ahead of the rows (GroupedRows). codec: the keys
    are raw numbers (where codes_raw_numbers), coded as they are grouped; the grouped rows
    hold their codes."""
    p, (offset, total, largest) = len(splitters) + 1, place
    if rt.backend.name == "gpu" and len(words) == 1 and gpu_partition.supports(words[0], p):
        bits = digit_bits(rt, columns, words, total, largest)
        lows = None if not bits else np.array(  # uint64: NumPy picks float64 for ints past 2^63
            [key_range(splitters, j, words[0].dtype)[0] for j in range(p)], dtype=np.uint64)
        layout = chunks.plan(rt, columns, words, (offset, total), splitters, lows, bits)
        return ChunkedRows(columns, words, layout,
                           landing_sort(rt, columns, words, layout, splitters))
    if _grouped_on_cpu(rt) and own_key(columns, words):
        mine = codec is not None or (len(columns) <= 2  # codec: codes_raw_numbers said so
                                     and scatter.available(columns[0], p, *columns[1:]))
        if _everywhere(rt, mine):
            return scattered(rt, columns, offset, -(-total // p), splitters, codec)
        return sorted_first(rt, coded(columns, codec, rt.xp), offset, -(-total // p), splitters)
    xp = rt.xp
    small = classify(words, offset, splitters, xp).astype(np.uint16 if p < 2**16 else np.uint32)
    order = rt.backend.engine.argsort(small)
    # the counts from the grouped buckets (bincount's atomics on a few bins are slow: every
    # row contends for the same counters)
    ends = rt.backend.to_host(xp.searchsorted(small[order], xp.arange(1, p + 1, dtype=small.dtype)))
    send_counts = np.diff(ends.astype(np.int64), prepend=0)
    send_displs = aligned_displacements(send_counts, rt.transport.align_rows)
    placed = _placed(order, send_counts, send_displs, rt)
    ahead = [] if own_key(columns, words) else [take(w, placed) for w in words]
    return GroupedRows([take(c, placed) for c in columns], ahead, send_counts, send_displs,
                   -(-total // p), _outside(splitters, rt.comm.Get_rank(), words[0].dtype))


def codes_raw_numbers(rt: Runtime, columns: list, codec) -> bool:
    """Whether the partition can take these raw numbers (keys.NumericCodec codec; alone, or
    with a column of values) and code them as it groups them (scatter.codes_as_grouped), so
    that they need no encode pass before the sort (api.py asks)."""
    return _grouped_on_cpu(rt) and scatter.codes_as_grouped(columns, rt.comm.Get_size(), codec)


def _grouped_on_cpu(rt: Runtime) -> bool:
    """Are rows grouped by scatter.c or sorted first (CPU ranks whose transport takes the
    blocks back to back)?"""
    return rt.backend.name == "cpu" and rt.transport.align_rows == 1


def _everywhere(rt: Runtime, mine: bool) -> bool:
    """Whether every rank can (a collective): a receiver takes its blocks for sorted runs where
    it sent its own sorted (GroupedRows.runs), so all ranks must partition alike."""
    return rt.comm.allreduce(mine, op=MPI.LAND)


def scattered(rt: Runtime, columns: list, offset: int, even_rows: int, splitters: np.ndarray,
              codec=None) -> GroupedRows:
    """Plain keys, or keys and their values, on CPUs: grouped by destination in two passes
    (local/scatter.py), each group in input order, so that a key is sorted once, by its
    receiver (sorting first and merging what arrives sorts it twice, in effect). Grouped where
    they land: the columns' head is the area this rank receives into (a block from each rank,
    in rank order), this rank's own rows already at their place in it, the rows for the other
    ranks after it (GroupedRows.placed): the exchange moves only those, and no rank copies
    its own rows or fills a new receive buffer's pages. Plain keys' buffer has the area's
    size again behind it: the finish's radix sort's second buffer (pages that cost no memory
    where NumPy sorts). codec: the keys are raw numbers, grouped as their codes
    (scatter.codes_as_grouped)."""
    pushed = codec is None and _pushes(rt, columns)
    grouping = scatter.Grouping(columns[0], offset, splitters, *columns[1:], codec=codec,
                                pushed=pushed)
    rank, send = rt.comm.Get_rank(), grouping.total
    recv = counts_received(rt.comm, send)
    area, landing = int(recv.sum()), displacements(recv)
    if pushed:
        return _pushed(rt, grouping, send, (recv, landing), even_rows, splitters)
    away = send.copy()
    away[rank] = 0
    starts = area + displacements(away)
    starts[rank] = landing[rank]
    rows = area + int(away.sum())
    grouped = grouping.place(starts, rows, max(rows, 2 * area) if len(columns) == 1 else rows)
    return GroupedRows(grouped, [], send, starts, even_rows,
                       _outside(splitters, rank, grouping.word), placed=(recv, landing))


def _pushes(rt: Runtime, columns: list) -> bool:
    """Do the partition's second pass write plain keys straight into their receivers' areas
    (ranks that read each other's memory write it too: push.c)? The same on every rank."""
    return (rt.transport.name == CMA and rt.transport.writes and len(columns) == 1
            and scatter.pushes(columns[0], rt.comm.Get_size()))


def _pushed(rt: Runtime, grouping, send: np.ndarray, placed: tuple, even_rows: int,
            splitters: np.ndarray) -> GroupedRows:
    """Plain keys written by every rank into its receivers' areas (Grouping.push): this rank's
    area (the size again behind it: the finish's radix sort's second buffer) holds every
    block once all have written; nothing is left for the exchange to move."""
    (recv, landing), rank = placed, rt.comm.Get_rank()
    area = int(recv.sum())
    keys = np.empty(2 * area, grouping.word)
    mine = (keys.ctypes.data + landing * keys.itemsize).astype(np.uint64)  # block q's, here
    pids, theirs = rt.transport.receivers(mine)
    agree(rt.comm, lambda: _push(grouping, pids, theirs))  # returns once every rank has written
    return GroupedRows([keys], [], send, displacements(send), even_rows,
                       _outside(splitters, rank, grouping.word), placed=placed, pushed=True)


def _push(grouping, pids: list[int], addresses: np.ndarray) -> None:
    try:
        grouping.push(pids, addresses)
    except OSError as exc:
        raise DistsortError(f"the partition could not write a peer rank's memory ({exc})") from exc


def sorted_first(rt: Runtime, columns: list, offset: int, even_rows: int,
                 splitters: np.ndarray) -> GroupedRows:
    """Rows whose first column is their key that the C scatter does not take (keys of 1 or 2
    bytes, values of other sizes, more columns; no C compiler), on CPUs: sorted first (by the
    engine: plain keys and pairs in one sort, rows with more columns by a stable order and
    gathers), then cut where the splitters fall: each rank's rows are then contiguous and in
    order, and the receiver merges the sorted runs (finish.merged)."""
    keys = columns[0]
    if len(columns) == 1:
        ordered = [rt.backend.engine.sort(keys)]
    elif len(columns) == 2:  # pairs: the values move with their keys, not gathered after
        ordered = list(rt.backend.engine.sort_pairs(keys, columns[1]))
    else:
        order = rt.backend.engine.argsort(keys)
        ordered = [take(c, order) for c in columns]
    ends = np.array([_rows_before(ordered[0], keys, offset, s) for s in splitters]
                    + [len(keys)], dtype=np.int64)
    counts = np.diff(ends, prepend=0)
    return GroupedRows(ordered, [], counts, displacements(counts), even_rows,
                       _outside(splitters, rt.comm.Get_rank(), keys.dtype), runs=True)


def _outside(splitters: np.ndarray, rank: int, dtype) -> tuple | None:
    """outside_key of rank's key range (GroupedRows.outside)."""
    low, top, _ = key_range(splitters, rank, dtype)
    return outside_key(dtype, low, top)


def _rows_before(ordered: np.ndarray, keys: np.ndarray, offset: int, splitter) -> int:
    """Rows of this rank before a splitter (key, global position) in the (key, position) order,
    as classify counts them: those of smaller keys, and of its key those whose place in the
    rank's input (from global position offset) comes before the splitter's position."""
    key = keys.dtype.type(splitter[0])
    smaller = int(np.searchsorted(ordered, key, "left"))
    if smaller == len(ordered) or ordered[smaller] != key:
        return smaller
    before = min(max(int(splitter[-1]) - offset, 0), len(keys))
    return smaller + int(np.count_nonzero(keys[:before] == key))


def _placed(order, counts: np.ndarray, displs: np.ndarray, rt: Runtime):
    """order (rows grouped by destination, counts[j] for rank j), spread out so that rank j's
    rows start at displs[j], where the transport moves them fastest (NCCL moves aligned blocks
    much faster than unaligned ones); on GPUs as many rows as sorts of about the same
    shard ask for (chunks.buffer_rows), so the pool gives them the same memory. The rows
    between and after the blocks, never sent, are row 0."""
    xp, n = rt.xp, len(order)
    size = int(displs[-1] + counts[-1])
    if rt.backend.name == "gpu":
        size = chunks.buffer_rows(size, n)
    if size == n or n == 0:  # nothing to spread (and no row 0 to fill gaps with)
        return order
    placed = xp.zeros(size, dtype=order.dtype)
    for start, first, count in zip(displs, displacements(counts), counts):  # a copy a rank
        placed[start : start + count] = order[first : first + count]
    return placed


@dataclass
class GroupedRows:
    """Rows grouped by destination rank now: send_counts[j] rows for rank j from
    send_displs[j] (a column may be longer: room for the finish, scattered); ahead: their key
    words alike where the words are not a column (else empty), sent ahead of the rows."""

    columns: list
    ahead: list
    send_counts: np.ndarray
    send_displs: np.ndarray
    even_rows: int  # of a shard, were they even: the receive buffers' size follows it on GPUs
    outside: tuple | None  # outside_key of the first key word's range on this rank
    runs: bool = False  # each rank's rows are sorted (sorted_first): the receiver merges them
    # (rows received from each rank, their starts): the columns' head is the receive area,
    # this rank's own block already in it (scattered)
    placed: tuple | None = None
    pushed: bool = False  # every rank's block already in the receive area (_pushed)


@dataclass
class ChunkedRows:
    """Rows counted per destination, chunk by chunk (layout), to be grouped while they are
    sent; landing: the sort to begin as the chunks land, or None."""

    columns: list
    words: list
    layout: chunks.Plan
    landing: LandingSort | None


def digit_bits(rt: Runtime, columns: list, words: list, total: int, largest: int) -> int:
    """Bits of the first radix digit by which the senders sort each block for its receiver's
    landing sort (chunks.ByDigit), or 0: keys of 4 or 8 bytes, alone or with one column of
    values that the passes move (radix_rows), that our radix engine will sort, on up to
    digit_partition.MAX_RANKS ranks, from landing.MIN_ROWS keys a rank and up to
    digit_partition.MAX_ROWS on the largest shard (the bucket scatter places rows by 32-bit
    offsets in buffers of about a shard's rows). The same on every rank: it depends on global
    facts only."""
    ranks, keys = rt.comm.Get_size(), words[0]
    # the senders sort each block by its receiver's first radix digit (chunks.ByDigit), so the
    # landing sort runs one pass fewer
    if not (radix_rows(columns, words)
            and rt.backend.engine.name == "radix" and keys.dtype.itemsize in (4, 8)
            and ranks <= digit_partition.MAX_RANKS and total // ranks >= landing.MIN_ROWS
            and largest <= digit_partition.MAX_ROWS):
        return 0
    return digit_partition.bucket_bits(ranks)
