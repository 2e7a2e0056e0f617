"""The exchange: an all-to-all-v moves every rank's groups to their destinations, over the
runtime's transport. Rows grouped now go in one exchange (their key words ahead of them where
those are no column, so their order is found while the rows travel); rows counted in chunks go
chunk by chunk, each chunk grouped while the one before is in flight, and where a landing sort
waits, each chunk's first radix pass runs as it lands.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..backend import exchange_stream
from ..local.landing import LandingSort
from ..local.rows import take
from ..report import SortReport
from ..runtime import Runtime
from ..transport import aligned_displacements, counts_received, row_bytes
from .chunks import Plan, buffer_rows, scatter_chunk
from .finish import received_order
from .partition import ChunkedRows, GroupedRows

ALIGN_BYTES = 256  # where each column's receive buffer starts in their common allocation


@dataclass
class Received:
    """This rank's received rows: columns (with gaps between the source blocks), blocks (rows,
    start) of each block in them, sent (the sent columns, held until the finish: its scratch),
    and begun: a finish begun during the exchange (a landing sort, or the order of rows whose
    key words came ahead), or None; runs: each block is sorted (GroupedRows.runs)."""

    columns: list
    blocks: tuple
    sent: list
    begun: object | None
    runs: bool = False
    placed: bool = False  # sent: the rest of the received columns' memory (_into_place)


def exchange(rt: Runtime, routed: GroupedRows | ChunkedRows, report: SortReport) -> Received:
    """Move the partition's rows to their destinations."""
    if isinstance(routed, ChunkedRows):
        received, sent = exchange_chunks(rt, routed.columns, routed.words, routed.layout,
                                         report, routed.landing)
        return Received(received, routed.layout.blocks(), sent, routed.landing)
    if routed.placed is not None:
        return _into_place(rt, routed, report)
    sent = (routed.send_counts, routed.send_displs)
    if not routed.ahead:
        received, blocks = exchange_columns(rt, routed.columns, *sent, report,
                                            even_rows=routed.even_rows)
        return Received(received, blocks, routed.columns, None, routed.runs)
    return _words_ahead(rt, routed, report)


def _into_place(rt: Runtime, routed: GroupedRows, report: SortReport) -> Received:
    """Rows grouped where they land (partition.scattered): the other ranks' blocks move from
    the rows after the receive area into it; this rank's own block, already there, not at
    all."""
    (recv, landing), rank = routed.placed, rt.comm.Get_rank()
    area = int(recv.sum())
    report.count_exchanged(sum(row_bytes(c) for c in routed.columns), routed.send_counts,
                           recv, rank)
    # an empty area is a buffer of its own: MPI refuses a send and a receive at one address
    heads = [c[:area] if area else np.empty(0, c.dtype) for c in routed.columns]
    tails = [c[area:] for c in routed.columns]
    if routed.pushed:  # every block is in place already
        return Received(heads, (recv, landing), tails, None, placed=True)
    away, arriving = routed.send_counts.copy(), recv.copy()
    away[rank] = arriving[rank] = 0
    from_tails = np.maximum(routed.send_displs - area, 0)  # the own block's: 0, none sent
    transfer(rt, tails, (away, from_tails), (arriving, landing), heads)
    return Received(heads, (recv, landing), tails, None, placed=True)


def _words_ahead(rt: Runtime, routed: GroupedRows, report: SortReport) -> Received:
    """The key words first, then the rows, on one lane: the received rows' order is found from
    the words while the rows are in flight."""
    sent, ahead = (routed.send_counts, routed.send_displs), routed.ahead
    blocks = receive_layout(rt, ahead + routed.columns, routed.send_counts, report)
    outs = receive_buffers(rt, ahead + routed.columns, blocks, routed.even_rows)
    words_out, rows_out = (None, None) if outs is None else (outs[:len(ahead)],
                                                             outs[len(ahead):])
    lane = rt.backend.transfer_lane()
    lane.follow()
    with lane:
        departed = lane.mark()
        words = transfer(rt, ahead, sent, blocks, words_out)
    lane.join()  # the order waits for the words only
    with lane:
        received = transfer(rt, routed.columns, sent, blocks, rows_out)
        arrived = lane.mark()
    if departed is not None:
        report.time_transfers(departed, arrived)
    order = received_order(rt, words, blocks, routed.outside)
    return Received(received, blocks, routed.columns, Ordered(order, lane))


def exchange_columns(rt: Runtime, columns: list, send_counts, send_displs, report: SortReport,
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
    recv_counts = counts_received(rt.comm, send_counts)
    report.count_exchanged(sum(row_bytes(c) for c in columns), send_counts, recv_counts,
                           rt.comm.Get_rank())
    return recv_counts, aligned_displacements(recv_counts, align or rt.transport.align_rows)


def transfer(rt: Runtime, columns: list, sent: tuple, blocks: tuple, outs: list | None) -> list:
    """The rows of every column, sent as sent (counts, starts) and received as blocks (counts,
    starts), into outs (None: new buffers, the transport's)."""
    return rt.transport.alltoallv(columns, sent[0], blocks[0], sent[1], blocks[1], outs)


def receive_buffers(rt: Runtime, columns: list, blocks: tuple, even_rows: int | None):
    """With even_rows (GPUs), receive buffers for the blocks (counts, starts) of these columns
    with rows for any shard of about that size (buffer_rows): the pool hands every such
    sort the same memory, which the copy engines' peers keep mapped (a new buffer costs a new
    allocation and new mappings, both costly); all cut from one allocation, so a
    peer maps one allocation however the columns are sent (words ahead of their rows, in
    calls of their own: two allocations would have each call close the other's mapping,
    transport/ipc.py: KEEP). Else None."""
    if even_rows is None or rt.backend.name != "gpu":
        return None
    rows = buffer_rows(int(blocks[1][-1] + blocks[0][-1]), even_rows)
    sizes = [-(-rows * row_bytes(c) // ALIGN_BYTES) * ALIGN_BYTES for c in columns]
    memory = rt.xp.empty(sum(sizes), dtype=np.uint8)
    starts = np.cumsum([0] + sizes)
    return [memory[a : a + rows * row_bytes(c)].view(c.dtype).reshape((rows,) + c.shape[1:])
            for a, c in zip(starts, columns)]


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


def exchange_chunks(rt: Runtime, columns: list, words: list, layout: Plan, report: SortReport,
                    landing: LandingSort | None = None) -> tuple[list, list]:
    """Send chunk 0 (scattered by plan) and scatter each later chunk by destination while the
    one before is sent; with a landing sort, land each chunk's blocks once they are in. Returns
    the received columns and the send buffers (the finish's scratch)."""
    import cupy

    keyed, outgoing = words[0] is columns[0], layout.outgoing
    incoming = [cupy.empty(o.shape, o.dtype)[: layout.recv_rows] for o in outgoing[-len(columns):]]
    sending = outgoing[1 - int(keyed):]  # the buffers of the columns (not of loose key words)

    me = rt.comm.Get_rank()
    direct = layout.bits > 0  # ByDigit: see the module on the own block

    def scatter(c: int) -> None:
        if 0 < c < len(layout.bounds):
            starts, own = layout.send_starts[c], None
            if direct:
                starts = starts.copy()
                starts[me], own = layout.recv_starts[me, c], (me, incoming)
            scatter_chunk(layout.parts[c], layout.bounds[c], layout.tables[c], starts, columns,
                     outgoing, keyed, own)

    def send(c: int) -> None:
        sent, received = layout.sent[c], layout.received[:, c]
        if direct and c > 0:  # the own block is in place
            sent, received = sent.copy(), received.copy()
            sent[me] = received[me] = 0
        rt.transport.alltoallv(sending, sent, received, layout.send_starts[c],
                               layout.recv_starts[:, c], incoming)

    def land(c: int) -> None:  # chunk c's block from every source (buffer order: source-major)
        for b in range(c, len(landing.counts), chunks):
            landing.land(b, incoming[0], sending[0])

    chunks = len(layout.sent)
    overlapped(chunks, scatter, send, land if landing is not None else None, report, lag=2)
    if landing is not None:
        land(chunks - 1)
        landing.prepare()  # queued now, while the transfers run: no host work after them
    report.count_exchanged(sum(row_bytes(c) for c in columns), layout.sent.sum(axis=0),
                           layout.received.sum(axis=1), rt.comm.Get_rank())
    return incoming, sending


def overlapped(chunks: int, prepare, send, land, report, lag: int = 1) -> None:
    """Chunk by chunk: prepare(c) on the compute (current) stream, then send(c) on the exchange
    stream once the compute stream's work so far is done; land(c - lag), where given, on the
    compute stream once chunk c - lag is in, beside the later chunks' transfers. The compute
    stream then lands every chunk but the last and waits for that one (landing it is the
    caller's); the report gets the transfers' span.

    lag 2 queues chunk c + 1's preparation before chunk c - 1's landing, which waits for chunk
    c - 1's transfers: so the next send does not wait behind a landing (with lag 1 the link
    sits idle meanwhile). It pays with the exchange stream's priority: a scatter queued as soon
    as the one before ends would otherwise hold the SMs ahead of the transfers beside it."""
    import cupy

    compute, side = cupy.cuda.get_current_stream(), exchange_stream(cupy.cuda.Device().id)
    departed, arrived = [], []

    def land_after(c: int) -> None:
        compute.wait_event(arrived[c])
        land(c)

    for c in range(chunks):
        prepare(c)
        side.wait_event(compute.record())
        departed.append(side.record())
        with side:
            send(c)
        arrived.append(side.record())
        if land is not None and c >= lag:
            land_after(c - lag)
    if land is not None:
        for c in range(max(chunks - lag, 0), chunks - 1):
            land_after(c)
    compute.wait_event(arrived[-1])
    report.time_transfers(departed[0], arrived[-1])
