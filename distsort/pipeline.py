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
from dataclasses import dataclass

import numpy as np

from . import chunked
from .local import digit_partition, landing
from .local import partition as gpu_partition
from .local.landing import LandingSort
from .local.order import stable_order
from .local.rows import take
from .phases import phase
from .report import SortReport
from .runtime import Runtime
from .splitters import choose_splitters, classify, local_sample, sample_sizes
from .transport import aligned_displacements, displacements, row_bytes

KeyWords = Callable[[list], list]
ALIGN_BYTES = 256  # where each column's receive buffer starts in their common allocation


def distributed_sort(rt: Runtime, columns: list, key_words: KeyWords, report: SortReport) -> list:
    """Sort the columns globally by key_words; return this rank's shard of every column."""
    comm, clock = rt.comm, rt.backend.clock()  # phase boundaries wait for nothing
    counts = comm.allgather(len(columns[0]))
    offset = sum(counts[: comm.Get_rank()])
    report.count_in, report.global_count = counts[comm.Get_rank()], sum(counts)
    report.ranks = len(counts)
    if comm.Get_size() == 1 or sum(counts) == 0:
        with phase(report, "finish", clock):
            columns = local_sort(rt, columns, key_words)
            rt.backend.synchronize()
    else:
        with phase(report, "sample", clock):
            words = key_words(columns)  # made once for the sample and the partition
            sample = local_sample(words, counts, comm.Get_rank(), rt.backend)
            splitters = choose_splitters(rt, sample, sample_sizes(counts))
        with phase(report, "partition", clock):
            place = (offset, sum(counts), max(counts))
            routed = partition(rt, columns, words, place, splitters)
            del words
        with phase(report, "exchange", clock):
            columns, blocks, spare, landed = routed.send(rt, report)
            del routed  # spare holds the only reference to the sent rows: finish takes it
        with phase(report, "finish", clock):
            if landed is not None:  # a sort begun as the blocks landed: its rest
                columns = landed.finish(columns, spare.pop())
            else:
                columns = finish(rt, columns, key_words, blocks, splitters, spare)
            rt.backend.synchronize()  # done when it returns, under the finish's watchdog
    report.count_out = len(columns[0])
    return columns


def partition(rt: Runtime, columns: list, words: list, place: tuple[int, int, int],
              splitters):
    """Route every row to its destination rank by its key words; place is (global position of
    this rank's first row, rows on all ranks, rows on the rank that has most). On GPUs, rows
    are counted per rank chunk by chunk, to be grouped while the exchange runs (chunked.py;
    plain keys and pairs also by their receiver's first radix digit: digit_bits); elsewhere all
    are grouped now, stably, by a sort of their destinations, and key words that are not a
    column (records) go with them, to be sent ahead of the rows (Grouped)."""
    p, (offset, total, largest) = len(splitters) + 1, place
    if rt.backend.name == "gpu" and len(words) == 1 and gpu_partition.supports(words[0], p):
        bits = digit_bits(rt, columns, words, total, largest)
        lows = None if not bits else np.array(  # uint64: NumPy picks float64 for ints past 2^63
            [key_range(splitters, j, words[0].dtype)[0] for j in range(p)], dtype=np.uint64)
        layout = chunked.plan(rt, columns, words, (offset, total), splitters, lows, bits)
        return Chunked(columns, words, layout, landing_sort(rt, columns, words, layout, splitters))
    if rt.backend.name == "cpu" and own_key(columns, words) and rt.transport.align_rows == 1:
        return sorted_first(rt, columns, offset, -(-total // p), splitters)
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
    low, top, _ = key_range(splitters, rt.comm.Get_rank(), words[0].dtype)
    return Grouped([take(c, placed) for c in columns], ahead, send_counts, send_displs,
                   -(-total // p), _outside_key(words[0].dtype, low, top))


def sorted_first(rt: Runtime, columns: list, offset: int, even_rows: int,
                 splitters: np.ndarray) -> Grouped:
    """Rows whose first column is their key, on CPUs: sorted first (plain keys by one pass of
    NumPy's SIMD sort, rows with more columns by a stable order and gathers), where a count and
    a scatter by destination take several passes, then cut where
    the splitters fall: each rank's rows are then contiguous and in order, and the receiver's
    sort meets sorted runs."""
    keys = columns[0]
    if len(columns) == 1:
        ordered = [rt.backend.engine.sort(keys)]
    else:
        order = rt.backend.engine.argsort(keys)
        ordered = [take(c, order) for c in columns]
    ends = np.array([_rows_before(ordered[0], keys, offset, s) for s in splitters]
                    + [len(keys)], dtype=np.int64)
    counts = np.diff(ends, prepend=0)
    low, top, _ = key_range(splitters, rt.comm.Get_rank(), keys.dtype)
    return Grouped(ordered, [], counts, displacements(counts), even_rows,
                   _outside_key(keys.dtype, low, top))


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
    shard ask for (chunked.buffer_rows), so the pool gives them the same memory. The rows
    between and after the blocks, never sent, are row 0."""
    xp, n = rt.xp, len(order)
    size = int(displs[-1] + counts[-1])
    if rt.backend.name == "gpu":
        size = chunked.buffer_rows(size, n)
    if size == n or n == 0:  # nothing to spread (and no row 0 to fill gaps with)
        return order
    placed = xp.zeros(size, dtype=order.dtype)
    for start, first, count in zip(displs, displacements(counts), counts):  # a copy a rank
        placed[start : start + count] = order[first : first + count]
    return placed


@dataclass
class Grouped:
    """Rows grouped by destination rank: send_counts[j] rows for rank j from send_displs[j];
    ahead: their key words alike where the words are not a column (else empty)."""

    columns: list
    ahead: list
    send_counts: np.ndarray
    send_displs: np.ndarray
    even_rows: int  # of a shard, were they even: the receive buffers' size follows it on GPUs
    outside: tuple | None  # _outside_key of the first key word's range on this rank

    def send(self, rt: Runtime, report: SortReport) -> tuple[list, tuple, list, Ordered | None]:
        """The exchange: (received columns, their blocks, [the sent columns], None); with key
        words ahead, (..., the order of the received rows), found while the rows travel."""
        sent = (self.send_counts, self.send_displs)
        if not self.ahead:
            received, blocks = exchange(rt, self.columns, *sent, report, even_rows=self.even_rows)
            return received, blocks, [self.columns], None
        blocks = receive_layout(rt, self.ahead + self.columns, self.send_counts, report)
        outs = receive_buffers(rt, self.ahead + self.columns, blocks, self.even_rows)
        words_out, rows_out = (None, None) if outs is None else (outs[:len(self.ahead)],
                                                                 outs[len(self.ahead):])
        lane = rt.backend.transfer_lane()
        lane.follow()
        with lane:
            departed = lane.mark()
            words = transfer(rt, self.ahead, sent, blocks, words_out)
        lane.join()  # the order waits for the words only
        with lane:
            received = transfer(rt, self.columns, sent, blocks, rows_out)
            arrived = lane.mark()
        if departed is not None:
            report.time_transfers(departed, arrived)
        order = received_order(rt, words, blocks, self.outside)
        return received, blocks, [self.columns], Ordered(order, lane)


@dataclass
class Ordered:
    """The received rows' order, found from their key words while the rows were in flight."""

    order: object
    lane: object  # the rows' transfers

    def finish(self, columns: list, sent: list) -> list:
        """The received rows (columns, with gaps) taken in order, once they are in; the sent
        rows (sent) are given up once the transfers that read them are done."""
        self.lane.join()
        sent.clear()
        return [take(c, self.order) for c in columns]


@dataclass
class Chunked:
    """Rows counted per destination, chunk by chunk, to be grouped while they are sent."""

    columns: list
    words: list
    layout: chunked.Plan
    landing: LandingSort | None

    def send(self, rt: Runtime, report: SortReport) -> tuple:
        """The overlapped partition + exchange: (received columns, their blocks, [sent], the
        landing sort whose first pass has run, or None)."""
        received, sent = chunked.exchange(rt, self.columns, self.words, self.layout, report,
                                          self.landing)
        return received, self.layout.blocks(), [sent], self.landing


def digit_bits(rt: Runtime, columns: list, words: list, total: int, largest: int) -> int:
    """Bits of the first radix digit by which the senders sort each block for its receiver's
    landing sort (chunked.ByDigit), or 0: keys of 4 or 8 bytes, alone or with one column of
    values that the passes move (radix_rows), that our radix engine will sort, on up to
    digit_partition.MAX_RANKS ranks, from landing.MIN_ROWS keys a rank and up to
    digit_partition.MAX_ROWS on the largest shard (the bucket scatter places rows by 32-bit
    offsets in buffers of about a shard's rows). The same on every rank: it depends on global
    facts only."""
    ranks, keys = rt.comm.Get_size(), words[0]
    # the senders sort each block by its receiver's first radix digit (chunked.ByDigit), so the
    # landing sort runs one pass fewer
    if not (radix_rows(columns, words)
            and rt.backend.engine.name == "radix" and keys.dtype.itemsize in (4, 8)
            and ranks <= digit_partition.MAX_RANKS and total // ranks >= landing.MIN_ROWS
            and largest <= digit_partition.MAX_ROWS):
        return 0
    return digit_partition.bucket_bits(ranks)


def landing_sort(rt: Runtime, columns: list, words: list, layout: chunked.Plan,
                 splitters) -> LandingSort | None:
    """A sort to start as the blocks land, for plain keys that our radix engine will sort, and
    for pairs (radix_rows) that the senders sorted by their first digit; else None (the finish
    sorts after the exchange)."""
    keys, rank = words[0], rt.comm.Get_rank()
    pairs = len(columns) > 1
    if (not radix_rows(columns, words) or rt.backend.engine.name != "radix"
            or (pairs and not layout.bits)):
        return None
    low, top, end_bit = key_range(splitters, rank, keys.dtype)
    counts, starts = layout.blocks()
    if not landing.usable(
            layout.recv_rows, keys.dtype.itemsize, end_bit, rt.transport.align_rows,
            layout.bits > 0):
        return None
    presorted = (layout.bits, layout.digits.reshape(len(counts), -1)) if layout.bits else None
    return LandingSort(keys.dtype, counts, starts, layout.landing_starts(), low, top - low,
                       presorted, columns[1].dtype if pairs else None)


def exchange(rt: Runtime, columns: list, send_counts, send_displs, report: SortReport,
             align: int | None = None, even_rows: int | None = None):
    """All-to-all-v of every column: counts first, then the rows. Returns the received columns
    and (rows, start) of each source's block in them; blocks start at multiples of align rows
    (default: the transport's preference; 1 packs them back to back); even_rows: as for
    receive_buffers."""
    blocks = receive_layout(rt, columns, send_counts, report, align)
    outs = receive_buffers(rt, columns, blocks, even_rows)
    return transfer(rt, columns, (send_counts, send_displs), blocks, outs), blocks


def receive_layout(rt: Runtime, columns: list, send_counts, report: SortReport,
                   align: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(rows, start) of each source's block in the receive buffers of these columns, from one
    Alltoall of the counts; the report counts the columns' bytes."""
    recv_counts = np.empty_like(send_counts)
    rt.comm.Alltoall(send_counts, recv_counts)
    report.count_exchanged(sum(row_bytes(c) for c in columns), send_counts, recv_counts,
                           rt.comm.Get_rank())
    return recv_counts, aligned_displacements(recv_counts, align or rt.transport.align_rows)


def transfer(rt: Runtime, columns: list, sent: tuple, blocks: tuple, outs: list | None) -> list:
    """The rows of every column, sent as sent (counts, starts) and received as blocks (counts,
    starts), into outs (None: new buffers, the transport's)."""
    return rt.transport.alltoallv(columns, sent[0], blocks[0], sent[1], blocks[1], outs)


def receive_buffers(rt: Runtime, columns: list, blocks: tuple, even_rows: int | None):
    """With even_rows (GPUs), receive buffers for the blocks (counts, starts) of these columns
    with rows for any shard of about that size (chunked.buffer_rows): the pool hands every such
    sort the same memory, which the copy engines' peers keep mapped (a new buffer costs a new
    allocation and new mappings, both costly); all cut from one allocation, so a
    peer maps one allocation however the columns are sent (words ahead of their rows, in
    calls of their own: two allocations would have each call close the other's mapping,
    transport/ipc.py: KEEP). Else None."""
    if even_rows is None or rt.backend.name != "gpu":
        return None
    rows = chunked.buffer_rows(int(blocks[1][-1] + blocks[0][-1]), even_rows)
    sizes = [-(-rows * row_bytes(c) // ALIGN_BYTES) * ALIGN_BYTES for c in columns]
    memory = rt.xp.empty(sum(sizes), dtype=np.uint8)
    starts = np.cumsum([0] + sizes)
    return [memory[a : a + rows * row_bytes(c)].view(c.dtype).reshape((rows,) + c.shape[1:])
            for a, c in zip(starts, columns)]


def finish(rt: Runtime, columns: list, key_words: KeyWords, blocks, splitters,
           spare: list) -> list:
    """Sort what this rank received, whose source blocks may have gaps between them.

    Plain keys are sorted in place, over only the bits of key - low that vary in this rank's key
    range, with the sent keys (spare: [sent columns], given up here) as the sort's scratch, so the
    sort takes no memory beyond the two exchange buffers; the gaps are filled with the range's
    largest key, and as many keys are dropped from the end of the result. Pairs (a key column
    and one more) are sorted in the receive buffers too, their gaps' keys just outside the range
    (_outside_key), so the gaps sort to one end and are cut off: a copy of both columns less.
    Other rows whose first column is their key (several columns) are ordered by the words of
    the received rows and taken from the receive buffers once, with no packing copy before;
    records, whose key words are no column, were ordered as they arrived (Grouped, Ordered).
    """
    counts, starts = blocks
    n, rank = int(counts.sum()), rt.comm.Get_rank()
    words = key_words(columns)
    low, top, end_bit = key_range(splitters, rank, words[0].dtype)
    if plain_keys(columns, words):
        _fill_gaps(columns[0], blocks, words[0].dtype.type(top))
        scratch = _fitting_scratch(spare.pop(), columns[0])
        out = rt.backend.engine.sort(columns[0], end_bit=end_bit, low=low, overwrite=True,
                                     scratch=scratch)
        return [out[:n]]
    spare.clear()
    if len(columns[0]) == n:  # no gaps
        return local_sort(rt, columns, key_words, end_bit=end_bit, low=low, overwrite=True)
    outside = _outside_key(words[0].dtype, low, top)
    if own_key(columns, words) and len(columns) == 2 and outside:
        fill, low, end_bit, last = outside  # pairs: sorted in the receive buffers, gaps and all
        _fill_gaps(columns[0], blocks, fill)
        out = local_sort(rt, columns, key_words, end_bit=end_bit, low=low, overwrite=True)
        first = 0 if last else len(columns[0]) - n
        return [c[first : first + n] for c in out]
    order = received_order(rt, words, blocks, outside)
    return [take(c, order) for c in columns]


def received_order(rt: Runtime, words: list, blocks, outside: tuple | None) -> object:
    """The stable order of the received rows by their key words (most significant first), as
    rows of the receive buffers: the blocks (rows, start), not the gaps between them. With
    outside (_outside_key of the first word's range: the words are this rank's to change), the
    gaps' first words are set to a key that sorts them to one end, where they are cut off: no
    gathers of the blocks' rows (those took a good part of the sort's time)."""
    counts, starts = blocks
    n = int(counts.sum())
    if n == len(words[0]):  # no gaps
        return stable_order(words, rt.backend.engine)
    if outside is not None:
        fill, _, _, last = outside
        _fill_gaps(words[0], blocks, fill)
        order = stable_order(words, rt.backend.engine)
        return order[:n] if last else order[len(order) - n :]
    rows = rt.xp.concatenate([rt.xp.arange(a, a + k) for a, k in zip(starts, counts)])
    return stable_order(words, rt.backend.engine, rows)


def _fill_gaps(keys, blocks, value) -> None:
    """Set the rows between and after the received blocks (aligned starts leave gaps) to value."""
    counts, starts = blocks
    for start, count, end in zip(starts, counts, list(starts[1:]) + [len(keys)]):
        keys[start + count : end] = value


def _outside_key(dtype, low: int, top: int) -> tuple | None:
    """A key just outside the rank's key range [low, top] for the gaps between received pairs,
    so that they sort after (top + 1) or before (low - 1) every received key, with the (low,
    end_bit) that cover it: (fill, low, end_bit, whether the gaps sort last), or None where
    the range holds every key of the dtype."""
    if top < np.iinfo(dtype).max:
        return dtype.type(top + 1), low, (top + 1 - low).bit_length(), True
    if low > 0:
        return dtype.type(low - 1), low - 1, (top - low + 1).bit_length(), False
    return None


def _fitting_scratch(sent: list, keys):
    """The sent keys' buffer, if it can hold these keys (else None: the engine allocates)."""
    buf = sent[0]
    fits = (buf.dtype == keys.dtype and buf.ndim == 1 and len(buf) >= len(keys)
            and buf.flags.c_contiguous)
    return buf if fits else None


def key_range(splitters: np.ndarray, rank: int, word) -> tuple[int, int, int]:
    """(low, top, end_bit): this rank's first key words after the exchange lie in [low, top],
    the first words of splitters rank-1 and rank (0 and the word's maximum at the ends), so key
    - low fits in end_bit bits."""
    low = int(splitters[rank - 1, 0]) if rank > 0 else 0
    top = int(splitters[rank, 0]) if rank < len(splitters) else int(np.iinfo(word).max)
    return low, top, (top - low).bit_length()


def plain_keys(columns: list, words: list) -> bool:
    """Are the data plain keys: one column that is its own and only key word (no payload)?"""
    return len(columns) == 1 and own_key(columns, words)


def radix_rows(columns: list, words: list) -> bool:
    """Are the rows plain keys, or keys with one column of 4- or 8-byte values beside them:
    rows that our radix passes move whole (no gather after)?"""
    if not own_key(columns, words) or len(columns) > 2:
        return False
    return len(columns) == 1 or (columns[1].ndim == 1 and columns[1].dtype.itemsize in (4, 8))


def own_key(columns: list, words: list) -> bool:
    """Is the first column its own and only key word (whatever columns follow it)?"""
    return len(words) == 1 and words[0] is columns[0]


def local_sort(rt: Runtime, columns: list, key_words: KeyWords, **options) -> list:
    """Sort this rank's rows by their key words, stably: plain keys directly; a key column with
    one more column (values, positions, the original floats) as pairs, which our radix engine
    moves with their keys in its passes (several times faster than an order and gathers);
    else by a stable order. options (SortOptions, end_bit)
    are for the engine where the first column is the only key word."""
    words, engine = key_words(columns), rt.backend.engine
    if own_key(columns, words) and len(columns) <= 2:
        if len(columns) == 1:
            return [engine.sort(words[0], **options)]
        return list(engine.sort_pairs(columns[0], columns[1], **options))
    order = stable_order(words, engine)
    return [take(c, order) for c in columns]
