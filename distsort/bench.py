"""`python -m distsort bench`: throughput against size, and where each rank's time goes.

For sizes growing by 4× up to --count keys, every rank generates fresh random keys for each timed
run (a warm-up run first), sorts them, and the slowest rank's time counts; the median of --reps
runs is kept. Rank 0 prints a table, writes JSON (--report) and a PNG (--plot): per-phase time of
every rank at the largest size, and G keys/s against size.
"""

from __future__ import annotations

import json
import statistics

import numpy as np

from . import api
from .errors import DistsortError, agree
from .gen import check_dist, generate
from .io import rank_range
from .io.writer import writable
from .report import PHASES, SortReport, duration, rate
from .runtime import get_runtime

DEFAULT_MAX_PER_RANK = {"gpu": 2**28, "cpu": 2**21}


def run_bench(args, comm) -> int:
    rt = agree(comm, lambda: get_runtime(comm, args.backend))
    dtype = agree(comm, lambda: check_dist(args.dist, args.dtype))
    agree(comm, lambda: _arguments_usable(args) if comm.Get_rank() == 0 else None)
    top = args.count
    if top is None:
        top = DEFAULT_MAX_PER_RANK[rt.backend.name] * comm.Get_size()
    sizes = [top >> (2 * k) for k in range(args.steps)][::-1]
    rows = [_measure(rt, comm, dtype, n, args) for n in sizes if n > 0]
    if comm.Get_rank() == 0:
        for row in rows:
            print(f"{row['keys']:>14} keys: {duration(row['seconds']):>9}  "
                  f"{rate(row['keys'], row['seconds'], 'keys'):>14}", flush=True)
        _write(args, rows)
    return 0


def _measure(rt, comm, dtype, total: int, args) -> dict:
    start, stop = rank_range(total, comm.Get_rank(), comm.Get_size())
    seconds, reports = [], []
    for rep in range(args.reps + 1):
        keys = generate(args.dist, dtype, start, stop, args.seed + rep, rt.xp, total)
        report = SortReport()
        api.sort(keys, comm, backend=rt.backend.name, report=report)
        if rep:  # the first run warms up (kernel compilation, NCCL set-up)
            seconds.append(comm.allreduce(report.seconds, op=_max()))
            reports.append(report.as_dict())
    med = statistics.median(seconds)
    return {"keys": total, "seconds": med, "gkeys_per_s": total / med / 1e9,
            "per_rank": comm.allgather(reports[-1])}


def _max():
    from mpi4py import MPI

    return MPI.MAX


def _arguments_usable(args) -> None:
    """Before any work: --steps, --reps and --count from 1 on, and the report and the plot can be
    written (the plot: matplotlib there, and a file type it draws)."""
    for name in ("steps", "reps", "count"):  # --count: None where not given
        value = getattr(args, name)
        if value is not None and value < 1:
            raise DistsortError(f"--{name} {value}: give 1 or more")
    writable(args.report)
    if args.plot:
        writable(args.plot, "the plot", others=(args.report,))
        kinds = _plotting().gcf().canvas.get_supported_filetypes()
        if args.plot.rsplit(".", 1)[-1].lower() not in kinds:
            raise DistsortError(f"--plot {args.plot}: name a file of a type matplotlib draws "
                                f"({', '.join(sorted(kinds))})")


def _plotting():
    """matplotlib's pyplot, drawing to files; a clear error where matplotlib is missing."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise DistsortError("--plot needs matplotlib: pip install 'distsort[plot]' (or "
                            "matplotlib), or leave out --plot") from None
    return plt


def _write(args, rows: list[dict]) -> None:
    if args.report:
        with open(args.report, "w") as f:
            json.dump(rows, f, indent=1)
    if not args.plot:
        return
    plt = _plotting()
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4))
    ranks = rows[-1]["per_rank"]
    bottom = np.zeros(len(ranks))
    for phase in PHASES:
        ms = np.array([r["phases"].get(phase, 0.0) * 1e3 for r in ranks])
        left.bar([str(r["rank"]) for r in ranks], ms, bottom=bottom, label=phase)
        bottom += ms
    left.set(xlabel="rank", ylabel="ms", title=f"phases at {rows[-1]['keys']} keys")
    left.legend()
    right.plot([r["keys"] for r in rows], [r["gkeys_per_s"] for r in rows], marker="o")
    right.set(xscale="log", xlabel="keys in all", ylabel="G keys/s", title="throughput")
    fig.tight_layout()
    fig.savefig(args.plot, dpi=100)
    print(f"wrote {args.plot}", flush=True)
