"""Out-of-core distributed sort, for ranks whose sort does not fit their device memory budget.

The result is that of pipeline.distributed_sort: the same order, ties broken by global input
position (so every sort is stable), each rank's shard within max(1.05·n/p, ⌈n/p⌉) elements.
No step holds more than about `budget` bytes on the device:

1. runs: each rank cuts its input into pieces that fit the budget (on GPUs at least MIN_RUNS,
   so that copies in and out overlap), sorts each on the device
   (pipeline.local_sort, stable) and keeps the sorted run in host memory (pinned on GPUs),
   together with a regular sample of it: every t-th element, with its run and index.
2. splitters: every rank gathers all samples, orders them and picks p·q - 1 splitters: q key
   ranges ("pieces") per rank. Ties are ordered by (key, run, index in run), which is (key,
   global position): runs are contiguous pieces of the input in rank order, sorted stably.
3. cut: each run is cut by each splitter. The run's own samples say between which two sampled
   elements the cut lies; a search in the key words of the at most t rows between decides.
4. rounds: in round j every rank sends each rank d the slices of its runs in d's j-th piece.
   On GPUs the slices are copied from the pinned runs straight into a device buffer and sent
   over NCCL when every rank's share fits its budget; otherwise (CPU backend, or a round made
   too big by a skewed input) MPI moves host buffers (exchange_round). The receiver gets them
   in (source rank, run) order, i.e. in global position order; one stable sort on the device
   puts them in order, and they are appended to its output.

Why the sizes hold: a run has c samples below a splitter exactly when between (c-1)·t + 1 and
c·t of its elements are below it, so between two splitters whose sample ranks differ by s lie
at most t·s + m·(t-1) elements (m runs in all), below n/(p·q) + (2m + 1)·t for consecutive
splitters. The stride t is chosen so that (2m + 1)·t stays below 4% of n/p (balance, as
splitters.EPSILON) and below a quarter of a merge piece, and q so that every piece fits the
budget. Small data sets get t = 1: every element is a sample and the splitters are exact. So
would budgets so small that a merge piece holds fewer than about 16 elements per run in all;
above SAMPLE_LIMIT elements that is refused with an error naming the budget needed.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from mpi4py import MPI

from .backend import Backend, CopyLane
from .errors import DistsortError, agree
from .inputs import on_gpu
from .keys import NumericCodec, record_key_words
from .memory import PAGE, HostColumns, default_budget, host_empty, parse_size
from .phases import phase
from .pipeline import exchange, local_sort, plain_keys
from .progress import Bar
from .report import HostClock, SortReport
from .runtime import Runtime, get_runtime
from .splitters import EPSILON, device_rows
from .transport import displacements, row_bytes
from .transport.mpi import MpiTransport

SAMPLE_TARGET = 1 << 18  # samples in all, when the balance bound allows that few
SAMPLE_LIMIT = 1 << 24  # the most samples (a whole small data set) every rank gathers
BALANCE = 1.05  # a shard holds at most max(BALANCE·n/p, ⌈n/p⌉) rows
WORK_FACTOR = 4  # a rank's in-memory sort needs about this many times its shard's bytes
MIN_ROUNDS, MIN_PIECE = 32, 1 << 16  # see plan_layout
# On GPUs a rank's input is cut into at least MIN_RUNS runs (of at least MIN_RUN_ROWS rows),
# however large the budget: run i+1 comes in while run i-1 goes out, so with two or three runs
# most of the copying runs one way at a time, and eight runs sort markedly faster.
MIN_RUNS, MIN_RUN_ROWS = 8, 1 << 26


@dataclass
class Source:
    """What to sort: `count` rows that `read(lo, hi)` gives as columns (host or device arrays).

    encode turns device columns into the columns that are sorted and carried (encoded keys
    first); key_words derives the unsigned key words from those, for NumPy or device arrays;
    decode turns sorted carried columns into the output columns.
    """

    count: int
    read: Callable[[int, int], list]
    encode: Callable[[list], list]
    key_words: Callable[[list], list]
    decode: Callable[[list], list]


@dataclass
class Layout:
    """How the work is cut: the same on every rank except `rank`."""

    rank: int
    counts: list[int]  # input elements per rank
    run_rows: int  # elements per run
    piece_rows: int  # at most about this many elements in one merge piece
    runs_per_rank: list[int]
    stride: int  # t: every t-th element of a run is sampled
    pieces: int  # q: key ranges (and exchange rounds) per rank

    @property
    def first_run(self) -> int:
        return sum(self.runs_per_rank[: self.rank])

    def runs(self) -> list[tuple[int, int]]:
        """This rank's runs as [lo, hi) ranges of its input."""
        n = self.counts[self.rank]
        return [(lo, min(lo + self.run_rows, n)) for lo in range(0, n, self.run_rows)]


def external_sort(rt: Runtime, source: Source, budget: int, report: SortReport,
                  write: Callable[[int, list], None] | None = None,
                  store: list | None = None, out: list | None = None) -> list | None:
    """Sort the source globally within `budget` bytes of device memory per rank.

    Without `write`, returns this rank's shard of every output column in host memory: in `out`
    (host arrays, one per output column, each with at least shard_capacity() rows; the result
    is their first rows) if given, else in new arrays; with `write`, calls write(row, columns)
    with the shard's pieces in order (row: in the global output).
    `store`: host arrays, one per carried column, to keep the runs in; by default new ones.
    Passing the input itself (when encode keeps its dtypes) sorts runs in place: each run is
    read before it is written back to the same rows.
    The phases (runs, splitters, exchange and merge) cover the whole sort, the host arrays it
    allocates included, and wait for the copy lanes: they add up to its time.
    """
    budget = rt.comm.allreduce(int(budget), op=MPI.MIN)
    template = source.encode([rt.backend.from_host(a) for a in source.read(0, 0)])
    layout = agree(rt.comm, lambda: plan_layout(rt, source, template, budget))
    report.count_in, report.global_count = source.count, sum(layout.counts)
    report.ranks, report.path = len(layout.counts), "out of core"
    clock = HostClock(rt.backend.synchronize)
    with phase(report, "partition", clock):  # the runs
        runs = HostColumns(template, source.count, layout.runs(), rt.backend.name == "gpu",
                           given=store)
        try:
            sample = form_runs(rt, source, layout, runs.columns, runs.ready)
        finally:
            runs.close()
        store = runs.columns
    with phase(report, "sample", clock):  # the splitters, and where they cut the runs
        samples, picks = pick_splitters(rt.comm, sample, len(layout.counts) * layout.pieces)
        cuts = cut_runs(store, source.key_words, layout, samples, picks)
        totals = rt.comm.allreduce(bucket_sizes(cuts, len(picks) + 1))
    first, q = layout.rank * layout.pieces, layout.pieces
    start, report.count_out = int(totals[:first].sum()), int(totals[first : first + q].sum())
    output = None
    if write is None:
        with phase(report, "finish", clock):
            output = write = agree(rt.comm, lambda: ShardOutput(
                rt, source.decode(template), report.count_out, start, out))
    cost = row_cost(template, source.key_words(template))
    room = budget - layout.piece_rows * (cost + sum(row_bytes(c) for c in template))
    merge_rounds(rt, source, layout, store, cuts, report, write, start, room)
    if output is None:
        return None
    with phase(report, "finish", clock):
        return output.close()


def plan_layout(rt: Runtime, source: Source, template: list, budget: int) -> Layout:
    """Rows per run, sample stride and pieces per rank for this budget (see the module doc)."""
    comm = rt.comm
    counts = comm.allgather(source.count)
    rows = max(1, budget // row_cost(template, source.key_words(template)))
    if rt.backend.name == "gpu":  # runs enough to keep both directions of PCIe busy at once
        rows = min(rows, max(-(-max(counts) // MIN_RUNS), MIN_RUN_ROWS))
    if rows > PAGE:  # every run starts on a page of the store: HostColumns locks them in turn
        rows -= rows % PAGE
    runs_per_rank = comm.allgather(-(-source.count // rows))
    total, p, m = sum(counts), comm.Get_size(), sum(runs_per_rank)
    # a round's buffers stay a small part of a shard: no piece above 1/MIN_ROUNDS of one; on
    # GPUs half a run at most, so the round's send buffer fits beside it (exchange_round)
    limit = rows // 2 if rt.backend.name == "gpu" else rows
    piece = max(1, min(limit, max(-(-max(counts) // MIN_ROUNDS), MIN_PIECE)))
    slack = min(EPSILON * total / p, piece / 4)
    stride = max(1, min(int(slack // (2 * m + 1)), -(-total // SAMPLE_TARGET)))
    if stride == 1 and total > SAMPLE_LIMIT:
        raise _too_small(budget, total, row_cost(template, source.key_words(template)))
    extra = 0 if stride == 1 else (2 * m + 1) * stride  # t = 1: exact splitters
    pieces = max(1, -(-total // (p * max(piece - extra, 1))))
    return Layout(comm.Get_rank(), counts, rows, piece, runs_per_rank, stride, pieces)


def _too_small(budget: int, total: int, cost: int) -> DistsortError:
    """Runs so many and so small that only a sample of every element would bound the pieces."""
    need = 8 * math.isqrt(total) * cost
    return DistsortError(f"a device memory budget of {budget} bytes is too small for "
                         f"{total} elements: give at least {need} bytes (--device-memory)")


def row_cost(columns: list, words: list) -> int:
    """Device bytes one row needs while it is sorted: columns in and out, the next piece
    coming in (Loader), the last run going out, key words, order and the engine's temporaries.
    Plain keys (one column that is its own key) need less."""
    width = sum(row_bytes(c) for c in columns)
    if plain_keys(columns, words):
        return 6 * width
    return 5 * width + 4 * (sum(w.dtype.itemsize for w in words) + 8)


def form_runs(rt: Runtime, source: Source, layout: Layout, store: list,
              ready: Callable[[int], None]) -> np.ndarray:
    """Sort each budget-sized piece of this rank's input into a run kept in the host store
    (run i at its input rows, once ready(i) says they may take it); return the regular sample
    rows (key words..., run, index).

    On GPUs three things overlap: piece i+1 comes in (Loader), piece i is sorted, run i-1
    goes out to the store (a second lane: PCIe carries both directions at once).
    """
    samples = []
    runs = layout.runs()
    pieces, out = Loader(rt, source.read, runs), rt.backend.copy_lane()
    bar = Bar(rt.comm, "runs sorted", len(runs), unit="run")
    for i, (lo, hi) in enumerate(runs):
        columns = local_sort(rt, source.encode(pieces.take(i)), source.key_words)
        pieces.start(i + 1)  # read while the device sorts
        words = source.key_words(columns)
        samples.append(regular_sample(rt, words, layout.stride, layout.first_run + i))
        out.wait()  # run i-1 is in the store: at most one run in flight
        out.follow()
        ready(i)
        for column, host in zip(columns, store):
            out.download(column, host[lo:hi])
        bar.add(1)
    out.wait()
    bar.close()
    return rt.backend.to_host(rt.xp.concatenate(samples)) if samples else None


class Loader:
    """The device columns of pieces [lo, hi) of the input, in order. On GPUs piece i+1 is read
    and copied in (on a lane where read gives host arrays; pinned ones copy directly) while
    piece i is sorted: start(i + 1) once piece i's sort is queued."""

    def __init__(self, rt: Runtime, read, ranges: list):
        self.rt, self.read, self.ranges = rt, read, ranges
        self.lane = rt.backend.copy_lane()
        self.next = None
        self.start(0)

    def take(self, i: int) -> list:
        """Piece i (started before), for the device's next work, which waits for it."""
        columns, self.next = self.next, None
        self.lane.join()
        return columns

    def start(self, i: int) -> None:
        if i < len(self.ranges):
            lo, hi = self.ranges[i]
            self.lane.follow()  # its buffers may be memory that the queued work frees
            self.next = [to_device(self.rt, a, self.lane) for a in self.read(lo, hi)]


def to_device(rt: Runtime, host, lane: CopyLane):
    """A host array on the backend's device; on GPUs one direct copy on the lane, not CuPy's
    staging through its own pinned buffer (an extra host copy). The caller joins the lane."""
    if rt.backend.name != "gpu" or not isinstance(host, np.ndarray) or not host.dtype.isnative:
        return rt.backend.from_host(host)
    return lane.upload(host)


def regular_sample(rt: Runtime, words: list, stride: int, run: int):
    """Rows (key words..., run, index) of every stride-th element of a sorted run, left on the
    backend's device: form_runs reads them back once, after the last run. A small read from
    the device mid-loop waits for the run copies in flight (it held each run back by a whole
    download)."""
    index = rt.xp.arange(0, len(words[0]), stride, dtype=np.int64)
    rows = device_rows(words, index, rt.xp, extra=2)
    rows[:, -2], rows[:, -1] = run, index
    return rows


def pick_splitters(comm, sample, buckets: int) -> tuple[np.ndarray, np.ndarray]:
    """All ranks' samples in (key, run, index) order, and the ranks of the buckets-1 splitters.

    The samples are gathered into one array (no per-rank copies) and put in order by one
    gather through their sorted positions: host memory about 56 bytes a sample row.
    """
    width = comm.allreduce(0 if sample is None else sample.shape[1], op=MPI.MAX) or 2
    mine = np.zeros((0, width), np.uint64) if sample is None else sample
    counts = np.array(comm.allgather(mine.size), np.int64)
    rows = np.empty((int(counts.sum()) // width, width), np.uint64)
    comm.Allgatherv(mine, [rows, (counts, displacements(counts)), MPI.UINT64_T])
    rows = rows[np.lexsort(rows.T[::-1])]
    return rows, np.arange(1, buckets, dtype=np.int64) * len(rows) // buckets


def cut_runs(store: list, key_words, layout: Layout, samples: np.ndarray,
             picks: np.ndarray) -> list[np.ndarray]:
    """For each of this rank's runs, its bucket boundaries: 0, one cut per splitter, length."""
    cuts, plain = [], _plain(store, key_words)
    for i, (lo, hi) in enumerate(layout.runs()):
        run = layout.first_run + i
        columns = [c[lo:hi] for c in store]
        if plain:
            inner = cut_plain(columns[0], run, samples[picks])
        else:
            own = np.flatnonzero(samples[:, -2] == run)  # ranks of the run's samples
            below = np.searchsorted(own, picks)  # of them, how many lie below each splitter
            inner = [cut_run(columns, key_words, run, int(c), samples[r], layout.stride)
                     for c, r in zip(below, picks)]
        cuts.append(np.array([0, *inner, hi - lo], dtype=np.int64))
    return cuts


def _plain(columns: list, key_words) -> bool:
    """Is the first column the only key word (numeric keys), so that it can be searched?"""
    empty = [c[:0] for c in columns]
    return plain_keys(empty, key_words(empty))


def cut_plain(keys: np.ndarray, run: int, splitters: np.ndarray) -> np.ndarray:
    """cut_run for every splitter at once where a run's keys are its only key word: a binary
    search of the whole sorted run (a few dozen page reads per splitter, and no Python
    loop: searched one by one, every splitter in every run, they took a costly share of a
    merge)."""
    key = splitters[:, 0].astype(keys.dtype)
    theirs = splitters[:, -2].astype(np.int64)
    ties_before = run < theirs  # the run's elements equal to the key come before the splitter
    cut = np.where(ties_before, np.searchsorted(keys, key, "right"),
                   np.searchsorted(keys, key, "left"))
    return np.where(theirs == run, splitters[:, -1].astype(np.int64), cut)


def cut_run(columns: list, key_words, run: int, below: int, splitter: np.ndarray,
            stride: int) -> int:
    """Elements of a sorted run that come before the splitter (key, run, index) in the
    (key, global position) order, given that `below` of the run's samples do."""
    if int(splitter[-2]) == run:
        return int(splitter[-1])
    if below == 0:
        return 0
    lo, hi = (below - 1) * stride + 1, min(below * stride, len(columns[0]))
    if lo >= hi:
        return lo
    words = key_words([c[lo:hi] for c in columns])
    return lo + rank_in_sorted(words, splitter[:-2], inclusive=run < int(splitter[-2]))


def rank_in_sorted(words: list, key, inclusive: bool) -> int:
    """Rows of lexicographically sorted host words before `key` (or not after it, inclusive)."""
    lo, hi = 0, len(words[0])
    for word, k in zip(words, key):
        k = word.dtype.type(k)
        part = word[lo:hi]
        lo, hi = (lo + int(np.searchsorted(part, k, "left")),
                  lo + int(np.searchsorted(part, k, "right")))
    return hi if inclusive else lo


def bucket_sizes(cuts: list[np.ndarray], buckets: int) -> np.ndarray:
    """Elements of this rank's runs in each bucket."""
    sizes = np.zeros(buckets, np.int64)
    for cut in cuts:
        sizes += np.diff(cut)
    return sizes


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
        with phase(report, "finish", clock):
            columns = local_sort(rt, columns, source.key_words)
            write(done, source.decode(columns))
        done += len(columns[0])
        bar.add(1)
    bar.close()


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
    made too big by a skewed input) move host buffers over MPI, which bounds the device
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
    source rank, on the device. Device buffers go over the backend's transport, host buffers
    over MPI (and then to the device on the lane)."""
    alone, displs = rt.comm.Get_size() == 1, displacements(send_counts)
    if on_device:
        return columns if alone else exchange(rt, columns, send_counts, displs, report, 1)[0]
    if not alone:
        host = rt if rt.backend.name == "cpu" else Runtime(rt.comm, Backend(),
                                                           MpiTransport(rt.comm))
        columns = exchange(host, columns, send_counts, displs, report, 1)[0]
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


def check_out_rows(out: list, rows: int) -> None:
    """Raise if the caller's out arrays are too short for a shard of `rows` rows."""
    if any(len(o) < rows for o in out):
        raise DistsortError(f"out has {min(len(o) for o in out)} rows; this rank's shard "
                            f"needs {rows} (shard_capacity gives a size that always fits)")


def shard_capacity(total: int, ranks: int) -> int:
    """Rows that always hold a rank's shard of `total` elements over `ranks` ranks: the
    balance bound max(1.05·n/p, ⌈n/p⌉) (a caller's `out` with this many rows always fits)."""
    return max(math.ceil(BALANCE * total / ranks), -(-total // ranks)) if ranks else 0


class ShardOutput:
    """write() for external_sort without one: the shard's output columns in host memory
    (the caller's `out`, else new arrays, pinned on GPUs), each piece copied straight to its
    rows; on GPUs on a lane, while the next round runs (one piece in flight)."""

    def __init__(self, rt: Runtime, template: list, rows: int, first: int,
                 out: list | None = None):
        if out is None:
            pinned = rt.backend.name == "gpu"
            out = [host_empty((rows,) + c.shape[1:], c.dtype, pinned) for c in template]
        else:
            check_out_rows(out, rows)
        self.columns = [o[:rows] for o in out]
        self.first, self.lane = first, rt.backend.copy_lane()

    def __call__(self, row: int, columns: list) -> None:
        self.lane.wait()  # the last piece is out: its device buffers may go
        self.lane.follow()
        at = row - self.first
        for column, out in zip(columns, self.columns):
            self.lane.download(column, out[at : at + len(column)])

    def close(self) -> list:
        """The output columns, once every piece is in them."""
        self.lane.wait()
        return self.columns


# --- the library's entry points (api.py dispatches here when a shard does not fit) ---


def _same(x):
    return x


@dataclass
class Job:
    rt: Runtime
    budget: int
    to_caller: Callable = _same


def plan(array, comm, backend: str | None, device_memory: int | str | None, values=None,
         extra_row_bytes: int = 0) -> Job | None:
    """A Job if any rank's work (about 4x its shard's bytes) exceeds its budget, else None.

    Collective; every rank gets the same answer. The budget is device_memory if given, else a
    safe fraction of the free device memory (host memory on the CPU backend).
    """
    gpu = on_gpu(array)
    rt = get_runtime(comm, backend or ("gpu" if gpu else "cpu"))
    work = array.nbytes + (values.nbytes if values is not None else 0)
    budget = over_budget(rt, work + len(array) * extra_row_bytes, device_memory)
    if budget is None:
        return None
    if gpu:
        import cupy

        return Job(rt, budget, cupy.asarray)
    return Job(rt, budget)


def over_budget(rt: Runtime, shard_bytes: int, device_memory: int | str | None) -> int | None:
    """This rank's budget if any rank's work (WORK_FACTOR x its shard) exceeds its own, else
    None. Collective: every rank gets the same answer."""
    mine = budget(rt, device_memory)
    return mine if exceeds(rt, shard_bytes, mine) else None


def exceeds(rt: Runtime, shard_bytes: int, budget: int) -> bool:
    """Does any rank's work (WORK_FACTOR x its shard) exceed its budget? Collective."""
    return rt.comm.allreduce(WORK_FACTOR * shard_bytes > budget, op=MPI.LOR)


def budget(rt: Runtime, device_memory) -> int:
    """device_memory (parsed by the entry point's checks: inputs.py), else the default: a share
    of the device's (or the host's) memory for each of the ranks that share it."""
    if device_memory is not None:
        return parse_size(device_memory)
    return default_budget(rt.backend.name, rt.sharers)


def numeric_source(rt: Runtime, count: int, read, dtype, descending: bool,
                   stable: bool) -> Source:
    """Numeric keys (and any payload columns after them) read by read(lo, hi)."""
    codec = NumericCodec(np.dtype(dtype), descending, canonical=stable)
    carried = 1 + int(codec.lossy)  # the codes, and the original keys where codes lose bits

    def encode(cols):
        return [codec.encode(cols[0], rt.xp)] + (cols if codec.lossy else cols[1:])

    def decode(cols):
        return [cols[1] if codec.lossy else codec.decode(cols[0], rt.xp)] + cols[carried:]

    return Source(count, read, encode, _first_word, decode)


def positions_source(rt: Runtime, count: int, read, offset: int, dtype,
                     descending: bool) -> Source:
    """argsort: keys from read(lo, hi)[0]; the output is their global int64 positions."""
    codec = NumericCodec(np.dtype(dtype), descending, canonical=True)

    def with_positions(lo: int, hi: int) -> list:
        return [read(lo, hi)[0], rt.xp.arange(offset + lo, offset + hi, dtype=np.int64)]

    def encode(cols):
        return [codec.encode(cols[0], rt.xp), cols[1]]

    return Source(count, with_positions, encode, _first_word, lambda cols: cols[1:])


def records_source(rt: Runtime, count: int, read, key_size: int, descending: bool) -> Source:
    """(n, record_size) uint8 records ordered by their first key_size bytes (memcmp)."""
    def words(cols):
        xp = np if isinstance(cols[0], np.ndarray) else rt.xp
        return record_key_words(cols[0], key_size, xp, descending)

    return Source(count, read, _same, words, _same)


def sort_numeric(job: Job, keys, values, descending: bool, stable: bool,
                 report: SortReport, out: list | None = None) -> tuple:
    """Out-of-core sort (and sort_pairs): this rank's keys (and values) shard; in `out`
    (checked host arrays, keys' then values') when given."""
    _check_1d(keys)
    columns = [keys] if values is None else [keys, values]
    source = numeric_source(job.rt, len(keys), _slices(columns), keys.dtype, descending, stable)
    result = external_sort(job.rt, source, job.budget, report, out=out)
    if out is None:
        result = [job.to_caller(c) for c in result]
    return result[0], result[1] if values is not None else None


def argsort(job: Job, keys, descending: bool, report: SortReport, out: list | None = None):
    """Out-of-core argsort: global int64 input positions of this rank's shard."""
    _check_1d(keys)
    offset = job.rt.comm.exscan(len(keys)) or 0
    source = positions_source(job.rt, len(keys), _slices([keys]), offset, keys.dtype,
                              descending)
    return _result(job, external_sort(job.rt, source, job.budget, report, out=out), out)


def sort_records(job: Job, records, key_size: int, descending: bool, report: SortReport,
                 out: list | None = None):
    """Out-of-core sort of (n, record_size) uint8 records by their first key_size bytes."""
    source = records_source(job.rt, len(records), _slices([records]), key_size, descending)
    return _result(job, external_sort(job.rt, source, job.budget, report, out=out), out)


def _result(job: Job, columns: list, out: list | None):
    """The one output column, as the caller's kind unless it is in the caller's `out`."""
    return columns[0] if out is not None else job.to_caller(columns[0])


def _slices(columns: list):
    return lambda lo, hi: [c[lo:hi] for c in columns]


def _first_word(cols: list) -> list:
    return [cols[0]]


def _check_1d(keys) -> None:
    if getattr(keys, "ndim", 1) != 1:
        raise DistsortError(f"keys must be a 1-D array; got shape {keys.shape}")
