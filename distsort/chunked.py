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
its scratch.

With a landing sort (plain keys on our radix engine, local/landing.py), the finish starts during
the exchange: once chunk c is in, the first radix pass of every block of chunk c runs on the
compute stream (beside chunk c+1's transfers) and writes into the send buffer, packed, chunk
after chunk: rows [landed[c], landed[c+1]), landed[c] being the rows received in chunks before
c. So chunk c's sent blocks start no lower than landed[c] (send_starts).
"""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass

import numpy as np
from mpi4py import MPI

from .exchange import aligned_displacements, row_bytes
from .local import partition as gpu_partition

# Chunks of a large shard. Run 22 (x4, 4x2^30 uint32, partition + exchange ms): 1 chunk 20.8,
# 2 chunks 18.5, 4 chunks 21.4, 8 chunks 21.5: two hide half the scatter; more, running beside
# the transfers, slow NCCL down more than they hide.
CHUNKS = int(os.environ.get("DISTSORT_CHUNKS", "2"))
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


@dataclass
class Plan(BlockRows):
    """Counts and places of every block: sent (chunk, destination), received (source, chunk)."""

    bounds: list
    launches: list
    tile_counts: list
    sent: np.ndarray
    send_starts: np.ndarray
    received: np.ndarray
    recv_starts: np.ndarray

    def blocks(self) -> tuple[np.ndarray, np.ndarray]:
        """(rows, start) of every received block, in buffer order."""
        return self.received.reshape(-1), self.recv_starts.reshape(-1)

    def landing_starts(self) -> np.ndarray:
        """Where the landing sort's first pass writes each received block (in buffer order) in
        the send buffer: packed, chunk after chunk, sources in order within a chunk."""
        before = np.cumsum(self.received, axis=0) - self.received  # earlier sources, same chunk
        return (landed_rows(self.received)[:-1][None, :] + before).reshape(-1)


def plan(rt, keys, offset: int, splitters: np.ndarray) -> Plan:
    """Count every chunk's rows per destination and agree with every rank on the layouts."""
    import cupy

    bounds = chunk_bounds(len(keys), CHUNKS, MIN_CHUNK)
    launches = [gpu_partition.Launch(keys[lo:hi], offset + lo, splitters) for lo, hi in bounds]
    tile_counts = [launch.tile_counts() for launch in launches]
    p = len(splitters) + 1
    chunks = rt.comm.allreduce(len(bounds), op=MPI.MAX)  # ranks with fewer send empty ones
    sent = np.zeros((chunks, p), dtype=np.int64)
    sent[: len(bounds)] = cupy.asnumpy(cupy.stack([t.reshape(p, -1).sum(axis=1)
                                                   for t in tile_counts]))
    received = np.empty((p, chunks), dtype=np.int64)
    rt.comm.Alltoall(sent.T.copy(), received)
    align = rt.transport.align_rows
    return Plan(bounds, launches, tile_counts, sent, send_starts(sent, received, align),
                received, block_starts(received, align))


def exchange(rt, columns: list, words: list, layout: Plan, report,
             landing=None) -> tuple[list, list]:
    """Scatter each chunk by destination and send it while the next one is scattered; with a
    landing sort, land each chunk's blocks once they are in. Returns the received columns and
    the send buffers (the finish's scratch)."""
    import cupy

    keyed = words[0] is columns[0]
    outgoing = [cupy.empty((max(layout.send_rows, layout.recv_rows),) + c.shape[1:], c.dtype)
                for c in ([] if keyed else [words[0]]) + columns]
    incoming = [cupy.empty((layout.recv_rows,) + c.shape[1:], c.dtype) for c in columns]
    sending = outgoing[1 - int(keyed):]  # the buffers of the columns (not of loose key words)

    def scatter(c: int) -> None:
        if c < len(layout.bounds):
            _scatter(layout, c, columns, outgoing[0], sending[int(keyed):], keyed)

    def send(c: int) -> None:
        rt.transport.alltoallv(sending, layout.sent[c], layout.received[:, c],
                               layout.send_starts[c], layout.recv_starts[:, c], incoming)

    def land(c: int) -> None:  # chunk c's block from every source (buffer order: source-major)
        for b in range(c, len(landing.counts), chunks):
            landing.land(b, incoming[0], sending[0])

    chunks = len(layout.sent)
    overlapped(chunks, scatter, send, land if landing is not None else None, report)
    if landing is not None:
        land(chunks - 1)
    report.count_exchanged(sum(row_bytes(c) for c in columns), layout.sent.sum(axis=0),
                           layout.received.sum(axis=1), rt.comm.Get_rank())
    return incoming, sending


def overlapped(chunks: int, prepare, send, land, report) -> None:
    """Chunk by chunk: prepare(c) on the compute (current) stream, then send(c) on the exchange
    stream once the compute stream's work so far is done; land(c - 1), where given, on the
    compute stream once chunk c - 1 is in, beside chunk c's transfers. The compute stream then
    waits for the last chunk (landing it is the caller's); the report gets the transfers' span."""
    import cupy

    compute, side = cupy.cuda.get_current_stream(), exchange_stream(cupy.cuda.Device().id)
    departed, arrived = [], []
    for c in range(chunks):
        prepare(c)
        side.wait_event(compute.record())
        departed.append(side.record())
        with side:
            send(c)
        arrived.append(side.record())
        if land is not None and c > 0:
            compute.wait_event(arrived[c - 1])
            land(c - 1)
    compute.wait_event(arrived[-1])
    report.time_transfers(departed[0], arrived[-1])


def _scatter(layout: Plan, c: int, columns: list, grouped_words, others: list, keyed: bool):
    """Chunk c's key words into their blocks of the send buffer, and the other columns alike."""
    lo, hi = layout.bounds[c]
    dest = layout.launches[c].scatter(layout.tile_counts[c], layout.sent[c],
                                      layout.send_starts[c], grouped_words, bool(others))
    for column, out in zip(columns[int(keyed):], others):
        out[dest] = column[lo:hi]


@functools.cache
def exchange_stream(device: int):
    import cupy

    return cupy.cuda.Stream(non_blocking=True)

