"""The out-of-core sort and the library's entry points to it.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass

from mpi4py import MPI

from ..errors import DistsortError, agree
from ..inputs import on_gpu
from ..memory import HostColumns
from ..phases import phase
from ..plan import out_of_core
from ..report import HostClock, SortReport
from ..runtime import Runtime
from ..transport import row_bytes
from .cuts import bucket_sizes, cut_runs, pick_splitters
from .layout import Source, plan_layout, row_cost
from .merge import merge_rounds
from .runs import form_runs
from .sources import (
    ShardOutput,
    numeric_source,
    positions_source,
    records_source,
    row_slices,
    unchanged,
)


@dataclass
class Job:
    rt: Runtime
    budget: int
    to_caller: Callable = unchanged


def plan(rt: Runtime, array, device_memory: int | str | None, values=None,
         extra_row_bytes: int = 0) -> Job | None:
    """A Job where the sort of this array (and values; extra_row_bytes more a row) on rt goes
    out of core (plan.out_of_core), else None. Collective; every rank gets the same answer."""
    rows = len(array)
    row = (array.nbytes + (values.nbytes if values is not None else 0)) // max(rows, 1)
    budget = out_of_core(rt, rows, row + extra_row_bytes, device_memory)
    if budget is None:
        return None
    if on_gpu(array):
        import cupy

        return Job(rt, budget, cupy.asarray)
    return Job(rt, budget)


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
    The phases (the plan and the runs, splitters, exchange and merge) cover the whole sort, the
    host arrays it allocates included, and wait for the copy lanes: they add up to its time.
    """
    # the budget leaves no room for graphs of the runs' and rounds' sorts (local/graphs.py)
    with getattr(rt.backend.engine, "within_budget", contextlib.nullcontext)():
        return _external_sort(rt, source, budget, report, write, store, out)


def _external_sort(rt: Runtime, source: Source, budget: int, report: SortReport, write,
                   store: list | None, out: list | None) -> list | None:
    clock = HostClock(rt.backend.synchronize)
    with phase(report, "partition", clock):  # the plan, then the runs
        budget = rt.comm.allreduce(int(budget), op=MPI.MIN)
        template = source.encode([rt.backend.from_host(a) for a in source.read(0, 0)])
        layout = agree(rt.comm, lambda: plan_layout(rt, source, template, budget))
        report.count_in, report.global_count = source.count, sum(layout.counts)
        report.ranks, report.path = len(layout.counts), "out of core"
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


def sort_numeric(job: Job, keys, values, descending: bool, stable: bool,
                 report: SortReport, out: list | None = None) -> tuple:
    """Out-of-core sort (and sort_pairs): this rank's keys (and values) shard; in `out`
    (checked host arrays, keys' then values') when given."""
    _check_1d(keys)
    columns = [keys] if values is None else [keys, values]
    source = numeric_source(job.rt, len(keys), row_slices(columns), keys.dtype, descending, stable)
    result = external_sort(job.rt, source, job.budget, report, out=out)
    if out is None:
        result = [job.to_caller(c) for c in result]
    return result[0], result[1] if values is not None else None


def argsort(job: Job, keys, descending: bool, report: SortReport, out: list | None = None):
    """Out-of-core argsort: global int64 input positions of this rank's shard."""
    _check_1d(keys)
    offset = job.rt.comm.exscan(len(keys)) or 0
    source = positions_source(job.rt, len(keys), row_slices([keys]), offset, keys.dtype,
                              descending)
    return _result(job, external_sort(job.rt, source, job.budget, report, out=out), out)


def sort_records(job: Job, records, key_size: int, descending: bool, report: SortReport,
                 out: list | None = None):
    """Out-of-core sort of (n, record_size) uint8 records by their first key_size bytes."""
    source = records_source(job.rt, len(records), row_slices([records]), key_size, descending)
    return _result(job, external_sort(job.rt, source, job.budget, report, out=out), out)


def _result(job: Job, columns: list, out: list | None):
    """The one output column, as the caller's kind unless it is in the caller's `out`."""
    return columns[0] if out is not None else job.to_caller(columns[0])


def _check_1d(keys) -> None:
    if getattr(keys, "ndim", 1) != 1:
        raise DistsortError(f"keys must be a 1-D array; got shape {keys.shape}")
