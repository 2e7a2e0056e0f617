"""Distributed sort benchmark on GPUs: `mpirun -n P python bench/dist_sort.py [--out DIR]`.

For each case it times distsort (fresh random keys for every run, a warm-up first, median of
--reps), its phases, the exchange rate, the balance and the GPU memory pool's peak, and in the same
run two baselines on the same total data: one GPU sorting everything with cupy.sort (rank 0), and a
naive sort -> split -> exchange -> sort-again pipeline across the ranks. Every output is checked.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

import cupy
import numpy as np
from mpi4py import MPI

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
import distsort  # noqa: E402
from distsort.check import verify  # noqa: E402
from distsort.cli import parse_count  # noqa: E402
from distsort.report import SortReport  # noqa: E402
from distsort.runtime import get_runtime  # noqa: E402

COMM = MPI.COMM_WORLD
CASES = {  # name: (total keys, key dtype, value dtype or None[, "stable"])
    "u32-4x2^28": (4 * 2**28, np.uint32, None),
    "u32-4x2^30": (4 * 2**30, np.uint32, None),
    "u64-4x2^29": (4 * 2**29, np.uint64, None),
    "u32+u32-4x2^28": (4 * 2**28, np.uint32, np.uint32),
}
MORE_CASES = {  # run when named: stable float sorts (floats in (-1, 1): no -0.0, no NaN), and
    # the Sort Benchmark's records (100 random bytes ordered by their first 10: sort_records)
    "f32-stable-4x2^28": (4 * 2**28, np.float32, None, "stable"),
    "f32+u32-stable-4x2^28": (4 * 2**28, np.float32, np.uint32, "stable"),
    "rec100k10-4x2^25": (4 * 2**25, np.uint8, None, "records", 100, 10),
}


def random_keys(n: int, dtype) -> cupy.ndarray:
    """Uniform random keys over the dtype's whole range (never all zero), made in pieces."""
    out = cupy.empty(n, dtype=dtype)
    if np.dtype(dtype).kind == "f":
        for start in range(0, n, 2**26):
            draws = cupy.random.random(min(2**26, n - start), dtype=dtype)
            out[start : start + 2**26] = draws * 2 - 1
        return out
    pieces = np.dtype(dtype).itemsize // 4 * 2  # 31-bit draws enough to cover every bit
    step = 2**26
    for start in range(0, n, step):
        draws = cupy.random.randint(0, 2**31, size=(pieces, min(step, n - start)), dtype=cupy.int64)
        bits = draws[0].astype(cupy.uint64)
        for more in draws[1:]:
            bits = (bits << cupy.uint64(31)) ^ more.astype(cupy.uint64)
        out[start : start + step] = bits.astype(dtype)
    return out


def timed(fn) -> float:
    """Seconds of fn() on the slowest rank, with the GPU idle before and after."""
    cupy.cuda.get_current_stream().synchronize()
    COMM.Barrier()
    start = time.perf_counter()
    fn()
    cupy.cuda.get_current_stream().synchronize()
    return COMM.allreduce(time.perf_counter() - start, op=MPI.MAX)


def random_records(n: int, size: int) -> cupy.ndarray:
    """n random records of `size` bytes (n * size a multiple of 8)."""
    return random_keys(n * size // 8, np.uint64).view(np.uint8).reshape(n, size)


def run_distsort(n_local: int, dtype, vdtype, reps: int, flags: tuple = ()) -> dict:
    pool = cupy.get_default_memory_pool()
    times, phases, peak, result, per_rank, transfers, grown = [], [], 0, {}, [], [], []
    stable, (size, key_size) = "stable" in flags, flags[1:] if "records" in flags else (0, None)
    for rep in range(reps + 1):  # the first run is the warm-up
        keys = random_records(n_local, size) if size else random_keys(n_local, dtype)
        values = random_keys(n_local, vdtype) if vdtype else None
        report = SortReport()
        if rep == 0:  # the warm-up measures the memory the sort takes; later runs reuse it
            pool.free_all_blocks()
            before = pool.total_bytes()

        def call(keys=keys, values=values, report=report):
            if size:
                result["keys"] = distsort.sort_records(keys, key_size, report=report)
            elif values is None:
                result["keys"] = distsort.sort(keys, stable=stable, report=report)
            else:
                result["keys"], result["values"] = distsort.sort_pairs(keys, values,
                                                                       stable=stable,
                                                                       report=report)

        held = pool.total_bytes()
        seconds = timed(call)
        if rep == 0:
            peak = pool.total_bytes() - before
        else:  # a timed sort that grew the pool paid for new device memory (cudaMalloc)
            grown.append(COMM.allreduce(pool.total_bytes() - held, op=MPI.MAX))
        verdict = verify(COMM, keys, result["keys"], key_size=key_size, xp=cupy)
        assert verdict.ok, verdict.message
        if rep:
            times.append(seconds)
            phases.append({k: COMM.allreduce(v, op=MPI.MAX) for k, v in report.phases.items()})
            per_rank = COMM.allgather(dict(report.phases))
            transfers.append(COMM.allreduce(report.transfer_seconds or 0.0, op=MPI.MAX))
        shard = COMM.allreduce(len(result["keys"]), op=MPI.MAX)
        sent = COMM.allreduce(report.bytes_sent, op=MPI.MAX)
        result.clear()
    med = statistics.median(times)
    phase = {k: statistics.median(p[k] for p in phases) for k in phases[0]}
    total = n_local * COMM.Get_size()
    row_bytes = size or np.dtype(dtype).itemsize + (np.dtype(vdtype).itemsize if vdtype else 0)
    return {
        "seconds": med, "gkeys_per_s": total / med / 1e9, "phases": phase,
        "exchange_gb_per_s": sent / phase.get("exchange", float("nan")) / 1e9,
        # the transfers alone (GPU events around the NCCL calls, beside the kernels they overlap)
        "transfer_gb_per_s": sent / (statistics.median(transfers) or float("nan")) / 1e9,
        "max_shard_over_mean": shard * COMM.Get_size() / total,
        "peak_pool_bytes": COMM.allreduce(peak, op=MPI.MAX),
        "peak_over_shard_bytes": COMM.allreduce(peak, op=MPI.MAX) / (n_local * row_bytes),
        "runs": times,
        "pool_growth_bytes": grown,
        "last_run_phases_per_rank": per_rank,
    }


def one_gpu_baseline(total: int, dtype, vdtype, reps: int) -> float | None:
    """Rank 0 sorts the whole data set alone: cupy.sort, or cupy.argsort + gather with values."""
    seconds = []
    if COMM.Get_rank() == 0:
        for rep in range(reps + 1):
            keys = random_keys(total, dtype)
            values = random_keys(total, vdtype) if vdtype else None
            cupy.cuda.get_current_stream().synchronize()
            start, stop = cupy.cuda.Event(), cupy.cuda.Event()
            start.record()
            if values is None:
                out = cupy.sort(keys)
            else:
                order = cupy.argsort(keys)
                out, _ = keys[order], values[order]
            stop.record()
            stop.synchronize()
            assert bool((out[1:] >= out[:-1]).all())
            if rep:
                seconds.append(cupy.cuda.get_elapsed_time(start, stop) / 1e3)
            del keys, values, out
        cupy.get_default_memory_pool().free_all_blocks()
    COMM.Barrier()
    return COMM.bcast(statistics.median(seconds) if seconds else None)


def naive_baseline(n_local: int, dtype, reps: int) -> float:
    """Sort locally, split by regular samples, exchange, sort everything again (keys only)."""
    rt = get_runtime(COMM, "gpu")
    p = COMM.Get_size()
    times = []
    for rep in range(reps + 1):
        keys = random_keys(n_local, dtype)

        def call(keys=keys):
            local = cupy.sort(keys)
            picks = cupy.asnumpy(local[(np.arange(1, p) * len(local)) // p])
            splitters = np.sort(np.concatenate(COMM.allgather(picks)))[p - 1 :: p][: p - 1]
            cuts = cupy.asnumpy(cupy.searchsorted(local, cupy.asarray(splitters)))
            send = np.diff(np.concatenate([[0], cuts, [len(local)]])).astype(np.int64)
            recv = np.empty_like(send)
            COMM.Alltoall(send, recv)
            return cupy.sort(rt.transport.alltoallv([local], send, recv)[0])

        seconds = timed(call)
        if rep:
            times.append(seconds)
    return statistics.median(times)


def nccl_transport():
    """NCCL's transport (the goals' reference), whichever the sort uses."""
    transport = get_runtime(COMM, "gpu").transport
    return transport.small if transport.name == "ipc" else transport


def exchange_reference(n_local: int, dtype, reps: int, skew: int = 0, transport=None) -> float:
    """GB/s sent per rank by a plain all-to-all of the same bytes (by NCCL unless a transport is
    given); with skew, every block is a few keys shorter or longer than n/p, so blocks start at
    unaligned addresses (as in a sort)."""
    transport = transport or nccl_transport()
    p = COMM.Get_size()
    counts = np.full(p, n_local // p, dtype=np.int64)
    counts[: p // 2 * 2] += np.tile([skew, -skew], p // 2)
    data = random_keys(int(counts.sum()), dtype)
    recv = np.empty_like(counts)
    COMM.Alltoall(counts, recv)
    times = [timed(lambda: transport.alltoallv([data], counts, recv)) for _ in range(reps + 1)]
    sent = (counts.sum() - counts[COMM.Get_rank()]) * data.itemsize
    return COMM.allreduce(sent, op=MPI.MAX) / statistics.median(times[1:]) / 1e9


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--cases", default=",".join(CASES), help="comma-separated case names")
    parser.add_argument("--total", type=parse_count, help="total keys, every case (strong scaling)")
    parser.add_argument("--per-rank", type=parse_count,
                        help="keys per rank for every case (weak scaling)")
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--no-baselines", action="store_true")
    parser.add_argument("--exchange-only", action="store_true",
                        help="only the plain NCCL all-to-all of each case's keys")
    parser.add_argument("--out", default=".")
    args = parser.parse_args()
    get_runtime(COMM, "gpu")  # bind the GPU, build NCCL before anything is timed
    p = COMM.Get_size()
    results = []
    for name in args.cases.split(","):
        total, dtype, vdtype, *flags = {**CASES, **MORE_CASES}[name]
        total = args.per_rank * p if args.per_rank else args.total or total
        if args.exchange_only:
            rate = exchange_reference(total // p, dtype, args.reps)
            if COMM.Get_rank() == 0:
                print(f"{name} P={p}: plain all-to-all {rate:.0f} GB/s sent per rank", flush=True)
            continue
        row = {"case": name if not (args.total or args.per_rank) else f"{name}@{total}",
               "ranks": p, "total_keys": total,
               **run_distsort(total // p, dtype, vdtype, args.reps, tuple(flags))}
        if not args.no_baselines and "records" not in flags:
            row["one_gpu_cupy_sort_s"] = one_gpu_baseline(total, dtype, vdtype, args.reps)
            row["speedup_vs_one_gpu"] = row["one_gpu_cupy_sort_s"] / row["seconds"]
            if vdtype is None and p > 1:
                row["naive_s"] = naive_baseline(total // p, dtype, args.reps)
                row["alltoall_gb_per_s"] = exchange_reference(total // p, dtype, args.reps)
                row["alltoall_unaligned_gb_per_s"] = exchange_reference(total // p, dtype,
                                                                        args.reps, skew=3)
                transport = get_runtime(COMM, "gpu").transport
                if transport.name == "ipc":
                    row["alltoall_copy_engines_gb_per_s"] = exchange_reference(
                        total // p, dtype, args.reps, transport=transport)
        results.append(row)
        if COMM.Get_rank() == 0:
            print(format_row(row), flush=True)
    if COMM.Get_rank() == 0:
        os.makedirs(args.out, exist_ok=True)
        tag = f"_per{args.per_rank}" if args.per_rank else ""
        tag += f"_total{args.total}" if args.total else ""
        with open(os.path.join(args.out, f"dist_sort_p{p}{tag}.json"), "w") as f:
            json.dump(results, f, indent=1)


def format_row(r: dict) -> str:
    ph = " ".join(f"{k}={v * 1e3:.1f}" for k, v in r["phases"].items())
    base = ""
    if r.get("one_gpu_cupy_sort_s"):
        base = (f" | 1-GPU cupy.sort {r['one_gpu_cupy_sort_s'] * 1e3:.1f} ms "
                f"-> {r['speedup_vs_one_gpu']:.2f}x")
    if r.get("naive_s"):
        base += (f" | naive {r['naive_s'] * 1e3:.1f} ms | plain all-to-all (NCCL) "
                 f"{r['alltoall_gb_per_s']:.0f} GB/s/rank, unaligned blocks "
                 f"{r['alltoall_unaligned_gb_per_s']:.0f}")
    if r.get("alltoall_copy_engines_gb_per_s"):
        base += f", by the copy engines {r['alltoall_copy_engines_gb_per_s']:.0f}"
    return (f"{r['case']:>16} P={r['ranks']} n={r['total_keys']}: {r['seconds'] * 1e3:.1f} ms "
            f"{r['gkeys_per_s']:.1f} Gkeys/s [{ph} ms] xchg {r['exchange_gb_per_s']:.0f} GB/s/rank "
            f"(transfers {r.get('transfer_gb_per_s', float('nan')):.0f}) "
            f"shard {r['max_shard_over_mean']:.4f} peak {r['peak_over_shard_bytes']:.2f}x{base}")


if __name__ == "__main__":
    main()
