"""How the out-of-core work is cut: rows per run, the sample stride and the merge pieces,
the same on every rank (see the package doc).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from ..columns import plain_keys
from ..errors import DistsortError
from ..memory import PAGE
from ..runtime import Runtime
from ..steps.sample import EPSILON
from ..transport import row_bytes

SAMPLE_TARGET = 1 << 18  # samples in all, when the balance bound allows that few


SAMPLE_LIMIT = 1 << 24  # the most samples (a whole small data set) every rank gathers


BALANCE = 1.05  # a shard holds at most max(BALANCE·n/p, ⌈n/p⌉) rows


MIN_ROUNDS, MIN_PIECE = 32, 1 << 16  # see plan_layout


# A rank takes a slice of each of its runs for each rank in each round: with a budget so small
# that runs and rounds both number thousands, that bookkeeping (Python, per slice) would run for
# minutes on a few megabytes. Above this many slices a rank, the budget is refused as too small.
MAX_SLICES = 1 << 18


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


def plan_layout(rt: Runtime, source: Source, template: list, budget: int) -> Layout:
    """Rows per run, sample stride and pieces per rank for this budget (see the module doc)."""
    counts = rt.comm.allgather(source.count)
    cost = row_cost(template, source.key_words(template))
    gpu = rt.backend.name == "gpu"
    cut = _cut(counts, cost, budget, gpu)
    if cut is None:
        raise _too_small(budget, sum(counts), least_budget(counts, cost, budget, gpu))
    rows, piece, runs_per_rank, stride, pieces = cut
    return Layout(rt.comm.Get_rank(), counts, rows, piece, runs_per_rank, stride, pieces)


def _cut(counts: list[int], cost: int, budget: int, gpu: bool) -> tuple | None:
    """(rows a run, rows a merge piece, runs per rank, sample stride, pieces per rank) for this
    budget, or None where it is too small (see the module doc)."""
    rows = max(1, budget // cost)
    if gpu:  # runs enough to keep both directions of PCIe busy at once
        rows = min(rows, max(-(-max(counts) // MIN_RUNS), MIN_RUN_ROWS))
    if rows > PAGE:  # every run starts on a page of the store: HostColumns locks them in turn
        rows -= rows % PAGE
    runs_per_rank = [-(-count // rows) for count in counts]
    total, p, m = sum(counts), len(counts), sum(runs_per_rank)
    # a round's buffers stay a small part of a shard: no piece above 1/MIN_ROUNDS of one; on
    # GPUs half a run at most, so the round's send buffer fits beside it (exchange_round)
    limit = rows // 2 if gpu else rows
    piece = max(1, min(limit, max(-(-max(counts) // MIN_ROUNDS), MIN_PIECE)))
    slack = min(EPSILON * total / p, piece / 4)
    stride = max(1, min(int(slack // (2 * m + 1)), -(-total // SAMPLE_TARGET)))
    if stride == 1 and total > SAMPLE_LIMIT:  # only a sample of every element bounds the pieces
        return None
    extra = 0 if stride == 1 else (2 * m + 1) * stride  # t = 1: exact splitters
    pieces = max(1, -(-total // (p * max(piece - extra, 1))))
    if max(runs_per_rank) * p * pieces > MAX_SLICES:  # slices ~ max count * total * (cost/budget)^2
        return None
    return rows, piece, runs_per_rank, stride, pieces


def least_budget(counts: list[int], cost: int, budget: int, gpu: bool) -> int:
    """A budget above `budget` that _cut takes, within 1/64 of the least (the sizes round to
    pages, so it is searched, not solved): doubled until taken, then halved in between."""
    high = max(budget, cost) * 2
    for _ in range(64):
        if _cut(counts, cost, high, gpu) is not None:
            break
        high *= 2
    low = budget
    while high - low > max(high // 64, 1):
        middle = (low + high) // 2
        if _cut(counts, cost, middle, gpu) is None:
            low = middle
        else:
            high = middle
    return high


def _too_small(budget: int, total: int, need: int) -> DistsortError:
    """The budget refused, with one that would do."""
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


def shard_capacity(total: int, ranks: int) -> int:
    """Rows that always hold a rank's shard of `total` elements over `ranks` ranks: the
    balance bound max(1.05·n/p, ⌈n/p⌉) (a caller's `out` with this many rows always fits)."""
    return max(math.ceil(BALANCE * total / ranks), -(-total // ranks)) if ranks else 0
