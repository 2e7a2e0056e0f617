"""Partition and exchange in chunks, overlapped: the GPU path from splitters to received rows.

The shard is cut into chunks of whole partition tiles. One count kernel per chunk gives each
chunk's rows per destination, and one Alltoall of those counts lets every rank place every block
it will receive before any key moves. Then, chunk by chunk, the scatter kernel groups chunk c by
destination on the compute stream while chunk c-1's blocks are in flight on the exchange stream
(NCCL send/recv): the exchange hides every scatter but the first chunk's.

Layouts, every block starting at a multiple of the transport's align_rows:
- sent: chunk-major, then destination (chunk c's block for rank j at send_starts[c, j]), so a
  chunk's blocks are complete as soon as its scatter is;
- received: source-major, then chunk (source s's chunk c at recv_starts[s, c]): the rows lie in
  global input order, which keeps the finish's stable sort stable across ranks.
The send buffer holds at least as many rows as the receive buffer, so the finish can take it as
its scratch. With ByDigit, the scatters of chunks 1 and up write the rank's own block straight
into its receive buffer, and the transfers skip it: at P=2 a copy of half of each chunk less in
memory beside the scatters. Chunk 0's scatter runs before the
receive layout is agreed, so its own block is still copied.

With a landing sort (plain keys on our radix engine, local/landing.py), the finish starts during
the exchange: once chunk c is in, the first radix pass of every block of chunk c runs on the
compute stream (beside chunk c+1's transfers) and writes into the send buffer, packed, chunk
after chunk: rows [landed[c], landed[c+1]), landed[c] being the rows received in chunks before
c. So chunk c's sent blocks start no lower than landed[c] (send_starts).

For plain keys and key-value pairs (partition.digit_bits) the partition is ByDigit instead: each
block leaves sorted by the low bits of key - low (low: its receiver's lowest key), the receiver's
first radix digit, so the landing sort only counts digits as blocks land and runs one pass fewer
in all (pairs: the values move in the same scatter, with no gather by destination after it).
Its count kernel takes a little longer than the plain one's (it writes every key's bucket byte
for the scatter), and with no landing pass beside the transfers a third chunk pays.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from mpi4py import MPI

from ..arrays import module_of, pooled_pinned
from ..local import digit_partition
from ..local import partition as gpu_partition
from ..transport import aligned_displacements

# Chunks of a large shard: two hide half the scatter; more, running beside the transfers, slow
# NCCL down more than they hide. With the senders' first digit (ByDigit: no landing pass beside
# the transfers), 3 chunks (bench/RESULTS.md).
CHUNKS, DIGIT_CHUNKS = 2, 3


MIN_CHUNK = 1 << 24  # rows: smaller chunks cost more in launches than the overlap saves


def chunk_bounds(n: int, chunks: int, min_chunk: int) -> list[tuple]:
    """(lo, hi) of each chunk: at most `chunks`, none under min_chunk rows but the only one,
    all cut at whole partition tiles."""
    count = max(1, min(chunks, n // max(min_chunk, 1)))
    tiles = -(-n // gpu_partition.TILE)
    cuts = [min(n, (tiles * c // count) * gpu_partition.TILE) for c in range(count + 1)]
    return [(lo, hi) for lo, hi in zip(cuts[:-1], cuts[1:]) if hi > lo] or [(0, n)]


def block_starts(counts: np.ndarray, align: int) -> np.ndarray:
    """Where each block of a 2-D count table starts when the blocks lie in row-major order,
    each at a multiple of align rows."""
    return aligned_displacements(counts.reshape(-1), align).reshape(counts.shape)


def send_starts(sent: np.ndarray, received: np.ndarray, align: int) -> np.ndarray:
    """Where each sent block (chunk, destination) starts: chunk-major, each at a multiple of
    align rows, and chunk c no lower than the rows received in the chunks before it (where
    the landing sort writes while chunk c is in flight)."""
    starts = np.zeros_like(sent)
    landed = landed_rows(received)
    end = 0
    for c in range(len(sent)):
        first = -(-max(end, int(landed[c])) // align) * align
        starts[c] = first + aligned_displacements(sent[c], align)
        end = int(starts[c, -1] + sent[c, -1])
    return starts


def landed_rows(received: np.ndarray) -> np.ndarray:
    """Rows received in the chunks before each chunk (and in all), packed: received is
    (source, chunk)."""
    return np.concatenate([[0], np.cumsum(received.sum(axis=0))])


class BlockRows:
    """The rows the send and receive buffers need, for a plan whose attributes sent,
    send_starts, received and recv_starts hold every block's rows and start."""

    @property
    def send_rows(self) -> int:
        return int(self.send_starts[-1, -1] + self.sent[-1, -1])

    @property
    def recv_rows(self) -> int:
        return int(self.recv_starts[-1, -1] + self.received[-1, -1])


class ByDestination:
    """One chunk's partition by destination rank (partition.cu): its count, then its scatter."""

    def __init__(self, keys, offset: int, splitters: np.ndarray):
        self.launch = gpu_partition.Launch(keys, offset, splitters)
        self.tile_counts = self.launch.tile_counts()

    def table(self):
        """Rows per destination (device, (ranks, 1))."""
        return self.tile_counts.reshape(self.launch.buckets, -1).sum(axis=1)[:, None]

    def scatter(self, table, starts, out, others: list, own=None) -> None:
        """Every row's key word into out, destination j's block from starts[j] (table and
        starts on the host or the device), and every other column (others: (column's rows,
        its send buffer)) where its key went (own: None, as this partition sends every block)."""
        dest = self.launch.scatter(self.tile_counts, table.sum(axis=1), starts, out, bool(others))
        for column, sent in others:
            sent[dest] = column


class ByDigit:
    """One chunk of keys (or key-value pairs) partitioned by (destination, first radix digit):
    each block leaves sorted by the low `bits` bits of key - low (low: its destination's lowest
    key), the receiver's first radix digit (digit_partition.cu), so the receiver runs one pass
    fewer."""

    def __init__(self, keys, offset: int, splitters: np.ndarray, lows: np.ndarray, bits: int):
        self.ranks, self.digits = len(lows), 1 << bits
        self.part = digit_partition.BucketPartition(keys, offset, splitters, lows, bits)
        self.counts = self.part.counts()

    def table(self):
        """Rows per destination and digit (device, (ranks, 2^bits))."""
        return self.counts[: self.ranks * self.digits].reshape(self.ranks, self.digits)

    def scatter(self, table, starts, out, others: list, own=None) -> None:
        """Every key into out, destination j's block from starts[j], in digit order (table and
        starts on the host or the device), and its value alike (others: [] or [(the values,
        their send buffer)], of 4 or 8 bytes). own: (rank j, its receive buffers): rank j's
        block goes there instead, from starts[j] (the sender's own block, with no copy)."""
        if len(others) > 1:
            raise ValueError("ByDigit moves one column of values at most")
        xp = module_of(table)
        bases = xp.zeros(digit_partition.BUCKETS, dtype=np.int64)
        bases[: table.size] = (starts[:, None] + table.cumsum(axis=1) - table).reshape(-1)
        if own is not None:
            rank, buffers = own
            own = (rank * self.digits, self.digits, buffers[0], buffers[1] if others else None)
        self.part.scatter(bases, out, others[0] if others else (), own)


@dataclass
class Plan(BlockRows):
    """Counts and places of every block: sent (chunk, destination), received (source, chunk);
    digits (source, chunk, 2^bits): the received rows per first digit, where the senders sorted
    each block by it (bits > 0); outgoing: the send buffers (the loose key words' first where
    they are not a column), chunk 0 scattered into them."""

    bounds: list
    parts: list
    tables: np.ndarray
    sent: np.ndarray
    send_starts: np.ndarray
    received: np.ndarray
    recv_starts: np.ndarray
    digits: np.ndarray
    bits: int = 0
    outgoing: list = field(default_factory=list)

    def blocks(self) -> tuple[np.ndarray, np.ndarray]:
        """(rows, start) of every received block, in buffer order."""
        return self.received.reshape(-1), self.recv_starts.reshape(-1)

    def landing_starts(self) -> np.ndarray:
        """Where the landing sort's first pass writes each received block (in buffer order) in
        the send buffer: packed, chunk after chunk, sources in order within a chunk."""
        before = np.cumsum(self.received, axis=0) - self.received  # earlier sources, same chunk
        return (landed_rows(self.received)[:-1][None, :] + before).reshape(-1)

    def fit_buffers(self, even_rows: int) -> None:
        """Grow the send buffers, chunk 0's rows kept, where they cannot hold both layouts (the
        send buffer is also the landing pass's destination and the finish's scratch)."""
        import cupy

        need = max(self.send_rows, self.recv_rows)
        if need <= len(self.outgoing[0]):
            return
        first, rows = int(self.send_starts[0, -1] + self.sent[0, -1]), buffer_rows(need, even_rows)
        for i, old in enumerate(self.outgoing):
            self.outgoing[i] = cupy.empty((rows,) + old.shape[1:], old.dtype)
            self.outgoing[i][:first] = old[:first]


def buffer_rows(need: int, even_rows: int) -> int:
    """Rows of an exchange buffer that must hold `need`: the same for every sort of about the
    same shards -- an even shard (even_rows) and 1/64 more, if that holds them -- so that a sort
    reuses the memory pool's blocks of the sort before rather than allocating anew (a large
    block is costly to allocate)."""
    quantum = max(1, even_rows // 64)
    return -(-max(need, even_rows + quantum) // quantum) * quantum


def plan(rt, columns: list, words: list, place: tuple[int, int], splitters: np.ndarray,
         lows: np.ndarray | None = None, bits: int = 0) -> Plan:
    """Count every chunk's rows per destination (and, with bits > 0, per first digit of key -
    lows[destination]: ByDigit), queue chunk 0's scatter, and agree with every rank on the
    layouts while it runs. place: (global position of the first row, rows on all ranks)."""
    import cupy

    (offset, total), keys, p = place, words[0], len(splitters) + 1
    # Ranks that share a GPU take one chunk: a chunk's transfers overlap the next one's
    # partition only where the kernels of the two can run at once, and the processes on one
    # GPU take turns on it.
    chunks = DIGIT_CHUNKS if bits else CHUNKS
    chunks = 1 if rt.shared_devices else chunks
    bounds = chunk_bounds(len(keys), chunks, MIN_CHUNK)
    if bits:
        parts = [ByDigit(keys[lo:hi], offset + lo, splitters, lows, bits) for lo, hi in bounds]
    else:
        parts = [ByDestination(keys[lo:hi], offset + lo, splitters) for lo, hi in bounds]
    counted = cupy.stack([part.table() for part in parts]).astype(np.int64)
    mine = pooled_pinned(counted.shape, np.int64)
    counted.get(out=mine, blocking=False)
    copied, align = cupy.cuda.get_current_stream().record(), rt.transport.align_rows
    even = -(-total // p)
    rows = buffer_rows(len(keys) + p * len(bounds) * align, even)  # chunk 0 packed from 0
    keyed = keys is columns[0]
    outgoing = [cupy.empty((rows,) + c.shape[1:], c.dtype)
                for c in ([] if keyed else [keys]) + columns]
    scatter_chunk(parts[0], bounds[0], counted[0],
                  aligned_displacements(counted[0].sum(axis=1), align), columns, outgoing, keyed)
    chunks = rt.comm.allreduce(len(bounds), op=MPI.MAX)  # ranks with fewer send empty ones
    copied.synchronize()
    tables = np.zeros((chunks, p, 1 << bits), dtype=np.int64)
    tables[: len(bounds)] = mine
    digits = np.empty((p, chunks, 1 << bits), dtype=np.int64)
    rt.comm.Alltoall(tables.transpose(1, 0, 2).copy(), digits)
    sent, received = tables.sum(axis=2), digits.sum(axis=2)
    layout = Plan(bounds, parts, tables, sent, send_starts(sent, received, align), received,
                  block_starts(received, align), digits, bits, outgoing)
    layout.fit_buffers(even)
    return layout


def scatter_chunk(part, bounds: tuple, table, starts, columns: list, outgoing: list,
             keyed: bool, own=None) -> None:
    """One chunk's key words into their blocks of the send buffers (outgoing: the loose key
    words' first where they are not a column), and the other columns alike; own: as for
    ByDigit.scatter."""
    lo, hi = bounds
    others = [(column[lo:hi], out) for column, out in zip(columns[int(keyed):], outgoing[1:])]
    part.scatter(table, starts, outgoing[0], others, own)
