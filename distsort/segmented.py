"""The segmented exchange: plain keys on GPUs, from splitters to this rank's sorted keys.
Opt-in (DISTSORT_SEGMENTS=1): level with the default path on 2 GPUs (-3% to +3%, bench/RESULTS.md
runs 71, 75) and not faster on 4 (runs 80-81, u32 4x2^30: 37.1-39.6 ms with 3-6 chunks against
37.2-37.9): its scatter, which no transfer hides, costs what its shorter finish saves.

Why (bench/RESULTS.md, session 7): after the chunked exchange (chunked.py) a rank sorts all the
varying bits of its key range, and no key can be sorted before the last block is in. Here the
partition also cuts each destination's range into 2^sbits sub-ranges by value (segments): a count
kernel finds and counts every key's bucket, then one onesweep pass over those buckets moves the
keys (local/segments.cu). Segments are independent sorts of fewer bits (24 for uniform uint32
keys: 3 passes where 4 were), and the exchange sends them in chunks of whole segments: once
chunk c is in, its segments are sorted into their final places while chunk c+1 is in flight, so
only the last chunk's sort follows the exchange.

Steps: count every bucket (one read of the keys); one Alltoall of the counts, so every rank
knows every block; each receiver cuts its segments into CHUNKS runs of about equal rows and
tells the senders (allgather); every key moves once into the send buffer, chunk-major, then
destination, then segment; chunk by chunk, NCCL moves the blocks and the receiver sorts the
chunk's segments (local/segments.py) into rows [landed[c], landed[c+1]) of the receive buffer
(even number of passes) or of the send buffer (odd), packed: the rank's sorted keys.
The send buffer's chunk c starts no lower than landed[c] (chunked.send_starts), so the sort of
chunk c-1 never writes over keys still to be sent.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from . import settings
from .chunked import (
    BlockRows,
    block_starts,
    buffer_rows,
    landed_rows,
    overlapped,
    send_starts,
)
from .local import segments
from .local.segments import BucketPartition, SegmentSort

MIN_ROWS = 1 << 25  # mean rows per rank from which this path runs (where our engine would)
MAX_ROWS = 1 << 31  # mean rows per rank up to which it runs: buffer rows stay below 2^32


def usable(rt, keys, global_count: int) -> bool:
    """Whether every rank takes this path: the same answer on all (it depends on global facts
    and on the dtype and backend, which all ranks share)."""
    ranks = rt.comm.Get_size()
    return (settings.value("DISTSORT_SEGMENTS") and rt.backend.name == "gpu"
            and rt.backend.engine.name == "radix"
            and keys.dtype.kind == "u" and keys.dtype.itemsize in (4, 8)
            and 1 < ranks <= segments.MAX_RANKS and MIN_ROWS <= global_count // ranks <= MAX_ROWS)


def ranges(splitters: np.ndarray, dtype, sbits: int) -> np.ndarray:
    """(base, shift, extra) of every destination (rows): its keys lie in [low, high] (its
    splitters' keys, or the type's limits); a = (key - base) >> shift, base being low rounded
    down to a multiple of 2^shift, takes at most 2^sbits + extra values (segments.cu)."""
    top, segs = np.iinfo(dtype).max, 1 << sbits
    keys = [int(k) for k in splitters[:, 0]]
    out = []
    for low, high in zip([0] + keys, keys + [top]):
        shift = 0
        while (high >> shift) - (low >> shift) + 1 > segs + 1:
            shift += 1
        extra = max(0, (high >> shift) - (low >> shift) + 1 - segs)
        out.append((low >> shift << shift, shift, extra))
    return np.array(out, dtype=np.uint64)


def chunk_cuts(rows: np.ndarray, chunks: int) -> np.ndarray:
    """chunks + 1 segment numbers: chunk c holds segments [cuts[c], cuts[c+1]), each cut where
    the rows before it come nearest to c / chunks of all."""
    ends = np.concatenate([[0], np.cumsum(rows)])
    targets = ends[-1] * np.arange(1, chunks) / chunks
    inner = np.abs(ends[None, :] - targets[:, None]).argmin(axis=1)
    return np.concatenate([[0], np.maximum.accumulate(inner), [len(rows)]]).astype(np.int64)


def _within(rows: np.ndarray, cuts: np.ndarray) -> np.ndarray:
    """Each segment's rows before it in its chunk (rows: (..., segments))."""
    before = np.cumsum(rows, axis=-1) - rows
    first = np.repeat(cuts[:-1], np.diff(cuts))
    return before - np.take(before, first, axis=-1)


def _per_chunk(rows: np.ndarray, cuts: np.ndarray) -> np.ndarray:
    """rows (..., segments) summed over each chunk's segments: (..., chunks)."""
    ends = np.concatenate([np.zeros(rows.shape[:-1] + (1,), np.int64), np.cumsum(rows, -1)], -1)
    return ends[..., cuts[1:]] - ends[..., cuts[:-1]]


@dataclass
class Plan(BlockRows):
    """Where every key goes: sent (chunk, destination) blocks, received (source, chunk) blocks
    (which lie chunk-major: recv_starts is (chunk, source)), and this rank's sort of each
    chunk."""

    sent: np.ndarray
    send_starts: np.ndarray
    received: np.ndarray
    recv_starts: np.ndarray
    sorts: list

    @property
    def rows(self) -> int:
        return int(self.received.sum())


def partition(rt, keys, offset: int, splitters: np.ndarray, even_rows: int
              ) -> tuple[Plan, object]:
    """Count the buckets, agree with every rank on the blocks, queue the scatter of every key
    into the send buffer, then plan this rank's sorts (host work, while the scatter runs).
    Returns the plan and the send buffer (which holds the receive buffer's rows too, for the
    sorts; sized by chunked.buffer_rows for an even shard of even_rows rows)."""
    import cupy

    comm, ranks, rank = rt.comm, rt.comm.Get_size(), rt.comm.Get_rank()
    sbits = segments.bucket_bits(ranks)
    segs = 1 << sbits
    dests = ranges(splitters, keys.dtype, sbits)
    buckets = BucketPartition(keys, offset, splitters, dests, sbits)
    table = cupy.asnumpy(buckets.counts())[: ranks * segs].astype(np.int64).reshape(ranks, segs)
    mine = np.empty_like(table)  # mine[s, g]: rows from source s in my segment g
    comm.Alltoall(table, mine)
    chunks = settings.value("DISTSORT_SEGMENT_CHUNKS")
    cuts = np.array(comm.allgather(chunk_cuts(mine.sum(axis=0), chunks)))  # (ranks, chunks+1)
    sent = np.stack([_per_chunk(table[d], cuts[d]) for d in range(ranks)], axis=1)
    received = _per_chunk(mine, cuts[rank])
    align = rt.transport.align_rows
    starts = send_starts(sent, received, align)
    recv_starts = block_starts(received.T.copy(), align)  # (chunk, source): chunk-major
    layout = Plan(sent, starts, received, recv_starts, [])
    bases = np.zeros(segments.BUCKETS, dtype=np.int64)
    for d in range(ranks):
        chunk = np.repeat(np.arange(chunks), np.diff(cuts[d]))
        bases[d * segs : (d + 1) * segs] = starts[chunk, d] + _within(table[d], cuts[d])
    rows = buffer_rows(max(layout.send_rows, layout.recv_rows), even_rows)
    outgoing = cupy.empty(rows, dtype=keys.dtype)
    buckets.scatter(bases, outgoing)
    layout.sorts.extend(_sorts(keys.dtype, mine, cuts[rank], recv_starts, received, dests[rank]))
    return layout, outgoing


def _sorts(dtype, mine: np.ndarray, cuts: np.ndarray, recv_starts: np.ndarray, received,
           dest: np.ndarray) -> list:
    """This rank's sort of each chunk: pieces (source s's run of segment g) in segment order;
    dest is this rank's (base, shift, extra): segment 0 (in chunk 0) has extra bits more."""
    base, shift, extra = (int(v) for v in dest)
    landed = landed_rows(received)
    inside = _within(mine, cuts)  # rows before segment g in source s's block of its chunk
    sorts = []
    for c in range(len(cuts) - 1):
        g = np.arange(cuts[c], cuts[c + 1])
        sources = np.arange(mine.shape[0])
        starts = recv_starts[c][None, :] + inside[:, g].T  # (segment, source)
        pieces = np.stack([starts.reshape(-1), mine[:, g].T.reshape(-1),
                           np.repeat(g - cuts[c], len(sources))])
        head = shift + (extra if c == 0 else 0)
        sorts.append(SegmentSort(dtype, pieces, mine[:, g].sum(axis=0), int(landed[c]), base,
                                 shift, head))
    return sorts


def exchange(rt, layout: Plan, outgoing, report):
    """Send chunk by chunk; sort each chunk once it is in, beside the next one's transfers, all
    but the last (`Finish`). Returns (the receive buffer, the finish)."""
    import cupy

    incoming = cupy.empty_like(outgoing)  # the same size: the pool reuses a sort's blocks

    def send(c: int) -> None:
        rt.transport.alltoallv([outgoing], layout.sent[c], layout.received[:, c],
                               layout.send_starts[c], layout.recv_starts[c], [incoming])

    overlapped(len(layout.sorts), lambda c: None, send,
               lambda c: layout.sorts[c].run(incoming, outgoing), report)
    report.count_exchanged(outgoing.dtype.itemsize, layout.sent.sum(axis=0),
                           layout.received.sum(axis=1), rt.comm.Get_rank())
    return incoming, Finish(layout)


@dataclass
class Finish:
    """The last chunk's sort, after the exchange."""

    layout: Plan

    def finish(self, columns: list, scratch: list) -> list:
        """Sort the last chunk (columns: [the receive buffer], scratch: [the send buffer]);
        returns [this rank's sorted keys] (a view of either buffer), as LandingSort.finish."""
        (incoming,), (outgoing,), last = columns, scratch, self.layout.sorts[-1]
        last.run(incoming, outgoing)
        return [(outgoing if last.in_scratch else incoming)[: self.layout.rows]]
