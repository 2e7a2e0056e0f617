"""Stage 4: the merge rounds: every rank's j-th key range exchanged, sorted on the device and
written out, round after round.
"""

from __future__ import annotations

import numpy as np
from mpi4py import MPI

from ..backend import Backend, CopyLane
from ..phases import phase
from ..progress import Bar
from ..report import HostClock, SortReport
from ..runtime import Runtime
from ..steps.exchange import exchange_columns
from ..steps.finish import local_sort, merged
from ..transport import displacements, row_bytes
from ..transport.mpi import MpiTransport
from .layout import Layout, Source
from .runs import to_device


def merge_rounds(rt: Runtime, source: Source, layout: Layout, store: list, cuts: list,
                 report: SortReport, write, start: int, room: int) -> None:
    """Round j: every rank's j-th piece is exchanged, sorted on the device and written. On
    GPUs round j+1's send buffer comes in on a lane while round j is exchanged and sorted."""
    q = layout.pieces
    sends = [round_slices(layout, cuts, j) for j in range(q)]
    on_device = device_rounds(rt, store, [counts for _, counts in sends], room)
    lane, clock = rt.backend.copy_lane(), HostClock(rt.backend.synchronize)
    staged = stage(rt, store, sends[0][0], lane) if on_device[0] else None
    done, bar = start, Bar(rt.comm, "key ranges merged", q, unit="range")
    for j, (slices, send_counts) in enumerate(sends):
        with phase(report, "exchange", clock):  # waits for the staged rows
            columns = staged if on_device[j] else [gather(c, slices) for c in store]
            lane.join()
            ahead = j + 1 < q and on_device[j + 1]
            staged = stage(rt, store, sends[j + 1][0], lane) if ahead else None
            columns = exchange_round(rt, columns, send_counts, on_device[j], report, lane)
            runs = received_runs(rt, layout, slices)
        with phase(report, "finish", clock):
            columns = sort_round(rt, columns, source.key_words, runs)
            write(done, source.decode(columns))
        done += len(columns[0])
        bar.add(1)
    bar.close()


def received_runs(rt: Runtime, layout: Layout, slices: list) -> list | None:
    """On CPUs, the rows of each sorted run a round received, in the order they came (by source
    rank, then run): every rank's slice lengths for each rank (one small all-to-all). None on
    GPUs, which sort the round (our radix sort there is faster than a merge)."""
    if rt.backend.name != "cpu":
        return None
    runs, p = len(layout.runs()), len(layout.counts)
    lengths = [[hi - lo for lo, hi in slices[d * runs : (d + 1) * runs]] for d in range(p)]
    return [n for source in rt.comm.alltoall(lengths) for n in source]


def sort_round(rt: Runtime, columns: list, key_words, runs: list | None) -> list:
    """A round's rows in order: merged where they are known sorted runs and can be, else
    sorted (stably: ties in global input order either way)."""
    if runs is not None:
        out = merged(columns, key_words(columns), runs)
        if out is not None:
            return out
    return local_sort(rt, columns, key_words)


def round_slices(layout: Layout, cuts: list, j: int) -> tuple[list, np.ndarray]:
    """Round j's [lo, hi) slices of the store, by destination rank then run, and the rows
    each rank gets."""
    p, q = len(layout.counts), layout.pieces
    starts = [lo for lo, _ in layout.runs()]
    buckets = [d * q + j for d in range(p)]
    slices = [(s + cut[b], s + cut[b + 1]) for b in buckets for s, cut in zip(starts, cuts)]
    send_counts = np.array([sum(int(c[b + 1] - c[b]) for c in cuts) for b in buckets],
                           dtype=np.int64)
    return slices, send_counts


def device_rounds(rt: Runtime, store: list, send_counts: list, room: int) -> np.ndarray:
    """Which rounds go from device buffers over the backend's transport: on GPUs, those where
    every rank's send buffers of the round and the next (copied in ahead) fit the `room` its
    budget leaves beside the piece it receives. The others (all on the CPU backend, or rounds
    made too big by a skewed input) move host buffers (exchange_round), which bounds the device
    memory whatever the input. Collective on GPUs."""
    if rt.backend.name != "gpu":
        return np.zeros(len(send_counts), bool)
    width = sum(row_bytes(c) for c in store)
    sent = np.array([int(c.sum()) * width for c in send_counts] + [0], np.int64)
    fits = (sent[:-1] + sent[1:] <= room).astype(np.int32)
    rt.comm.Allreduce(MPI.IN_PLACE, fits, op=MPI.MIN)
    return fits.astype(bool)


def stage(rt: Runtime, store: list, slices: list, lane: CopyLane) -> list:
    """A round's send rows copied from the (pinned) runs into device buffers on the lane,
    after the work queued so far: each byte crosses PCIe once and no host copy is made."""
    lane.follow()
    return [device_gather(rt, c, slices, lane) for c in store]


def exchange_round(rt: Runtime, columns: list, send_counts: np.ndarray, on_device: bool,
                   report: SortReport, lane: CopyLane) -> list:
    """One round's all-to-all of the send rows (grouped by destination); the rows received, by
    source rank, on the device. Device buffers go over the backend's transport; host buffers over
    the CPU backend's (ranks reading each other's memory, or MPI), or on GPUs over MPI, and then
    to the device on the lane."""
    alone, displs = rt.comm.Get_size() == 1, displacements(send_counts)
    if on_device:
        if alone:
            return columns
        return exchange_columns(rt, columns, send_counts, displs, report, 1)[0]
    if not alone:
        host = rt if rt.backend.name == "cpu" else Runtime(rt.comm, Backend(),
                                                           MpiTransport(rt.comm))
        columns = exchange_columns(host, columns, send_counts, displs, report, 1)[0]
    lane.follow()
    columns = [to_device(rt, c, lane) for c in columns]
    lane.join()
    return columns


def gather(column: np.ndarray, slices: list[tuple[int, int]]) -> np.ndarray:
    """The rows of the given [lo, hi) slices of a host column, in order, in one array."""
    return np.concatenate([column[a:b] for a, b in slices]) if slices else column[:0]


def device_gather(rt: Runtime, column: np.ndarray, slices: list[tuple[int, int]],
                  lane: CopyLane):
    """gather() into one device array, one copy per slice on the lane (direct from pinned
    memory; the caller joins the lane)."""
    out = rt.xp.empty((sum(b - a for a, b in slices),) + column.shape[1:], column.dtype)
    at = 0
    for a, b in slices:
        if b > a:
            lane.upload(column[a:b], out[at : at + b - a])
            at += b - a
    return out
