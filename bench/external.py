"""Out-of-core sort benchmark (issue 5): uint32 keys in host memory, sorted into host memory.

    (a) mpirun -n 4 python bench/external.py --total 200GB            # more than one GPU holds
        mpirun -n 4 python bench/external.py --device-memory 48GB,default # two sorts, one alloc.
    (b) python bench/external.py --total 8GB --budget-fraction 8      # one GPU, budget = data/8
    (c) mpiexec -n 4 python bench/external.py --backend cpu --total 400MB --budget-fraction 64

Each rank allocates its share of --total bytes of uint32 keys in host memory and an output of
distsort.shard_capacity rows (pinned on GPUs: DISTSORT_PINNED says how, see distsort/memory.py),
both before the timer, each allocation timed and reported on its own line (with the part of
them in transparent huge pages, worst rank); it draws random keys
into the input (on the GPU, in pieces), takes their checksum, runs one small out-of-core sort as
a warm-up (kernels compiled and loaded, NCCL set up), and then sorts with distsort's out-of-core
path (outofcore.sort.external_sort, runs formed in place in the input, the shard written into the
output: out=), --reps times per budget with fresh keys each (the median is reported: the first
large sort of a process ran slower, 0.55 s against 0.38-0.41 s in run 37). Every output is
checked piece by piece, without a copy: order within and across ranks, count, and checksum
equal to the input's. Reported: seconds, GB/s of input per GPU
against the pinned PCIe rate (--pcie, ~55 GB/s) and against the floor of a run-then-merge sort
(every byte crosses PCIe four times: ~pcie/2 of input per GPU), per-phase seconds of the slowest
rank (runs, splitters, exchange, merge) and what the phases leave out, and host memory per rank:
the sort's own peak beyond the input and output that exist before it (VmHWM reset just before
the sort, as a fraction of the input; goal <= 10%; on the CPU backend the budget's sort work is
host memory too), and the process's peak against interpreter/CUDA/MPI + input + output. JSON to
--out. Before allocating, each node checks that its ranks' input + output + 10% fit the memory
it has left (MemAvailable and the cgroup limit) and refuses with the total that fits if not.
Rank 0 prints each step on stderr as it starts (seconds, resident memory), so a run that is
killed shows where.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import time

import numpy as np
from mpi4py import MPI

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
from distsort.check import checksum  # noqa: E402
from distsort.errors import DistsortError, RemoteError, agree  # noqa: E402
from distsort.memory import PINNED_RESERVE as RESERVE  # noqa: E402
from distsort.memory import (  # noqa: E402
    available_host_memory,
    cgroup_room,
    default_budget,
    first_touch,
    host_empty,
    huge_page_bytes,
    parse_size,
)
from distsort.outofcore import layout as ooc_layout  # noqa: E402
from distsort.outofcore import sort as ooc  # noqa: E402
from distsort.report import SortReport  # noqa: E402
from distsort.runtime import get_runtime  # noqa: E402

sys.path.insert(0, os.path.dirname(__file__))  # gpu_trace, imported when --trace asks (CuPy)

COMM = MPI.COMM_WORLD
PIECE = {"gpu": 1 << 28, "cpu": 1 << 20}  # keys generated, hashed or checked at a time
PHASES = {"runs": "partition", "splitters": "sample", "exchange": "exchange", "merge": "finish"}
HOST_EXTRA = 0.10  # goal: host memory <= input + output + 10% of the input
STARTED = time.perf_counter()


def generate(rt, keys: np.ndarray, seed: int) -> None:
    """Random uint32 keys into a host array (drawn on the GPU there), piece by piece."""
    gpu, piece, n = rt.backend.name == "gpu", PIECE[rt.backend.name], len(keys)
    rng = (rt.xp.random.RandomState if gpu else np.random.RandomState)(
        seed * 100_003 + COMM.Get_rank())
    lane = rt.backend.copy_lane()
    for lo in range(0, n, piece):
        size = min(piece, n - lo)
        if gpu:  # 32 random low bits from two 31-bit draws
            draws = rng.randint(0, 2**31, size=(2, size), dtype=np.int64)
            bits = ((draws[0] << 16) ^ draws[1]).astype(np.uint32)
        else:
            bits = rng.randint(0, 2**32, size=size, dtype=np.uint32)
        lane.wait()  # one piece in flight
        lane.follow()
        lane.download(bits, keys[lo : lo + size])  # direct, no staging
    lane.wait()


def pieces(rt, keys: np.ndarray, overlap: int = 0):
    """The host keys on the backend's device, piece by piece (each with `overlap` keys of the
    next): direct copies from pinned memory, no staging copy."""
    lane = rt.backend.copy_lane()
    for lo in range(0, len(keys), PIECE[rt.backend.name]):
        lane.follow()
        piece = lane.upload(keys[lo : lo + PIECE[rt.backend.name] + overlap])
        lane.join()
        yield piece


def device_checksum(rt, keys: np.ndarray) -> int:
    """check.checksum over the host keys, computed on the backend piece by piece."""
    return sum(checksum(piece, rt.xp) for piece in pieces(rt, keys)) % 2**64


def sorted_locally(rt, keys: np.ndarray) -> bool:
    """Is the host array non-decreasing? (Checked on the backend, piece by piece.)"""
    return all(bool((p[1:] >= p[:-1]).all()) for p in pieces(rt, keys, overlap=1))


def verify(rt, keys_in_sum: int, count_in: int, out: np.ndarray) -> bool:
    """Order inside and across ranks, total count and checksum: all ranks get the answer."""
    ends = (int(out[0]), int(out[-1])) if len(out) else None
    ok = sorted_locally(rt, out)
    parts = COMM.allgather((ok, ends, count_in, len(out), keys_in_sum,
                            device_checksum(rt, out)))
    ok = all(p[0] for p in parts)
    ends = [p[1] for p in parts if p[1] is not None]
    ok &= all(a[1] <= b[0] for a, b in zip(ends, ends[1:]))
    ok &= sum(p[2] for p in parts) == sum(p[3] for p in parts)
    return ok and sum(p[4] for p in parts) % 2**64 == sum(p[5] for p in parts) % 2**64


def host_bytes(field: str) -> int:
    """This process's VmHWM (peak resident memory) or VmRSS, pinned buffers included."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    return 0


def reset_peak() -> bool:
    """Start VmHWM again from the resident memory now (Linux: clear_refs 5); False if not."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
    except OSError:
        return False
    return True


def step(text: str) -> None:
    """Rank 0 says on stderr which step starts, when, and its resident memory then."""
    if COMM.Get_rank() == 0:
        print(f"[{time.perf_counter() - STARTED:8.1f} s, rank 0 RSS {host_bytes('VmRSS') / 1e9:.1f}"
              f" GB] {text}", file=sys.stderr, flush=True)


def check_host_memory(n: int, rows_out: int) -> None:
    """Exit with a message, before any allocation, if this node's ranks' input + output + 10%
    would not fit the memory it has left (MemAvailable and the cgroup limit, less the page-lock
    reserve): the kernel would kill the run instead. The message says what --total fits."""
    node = COMM.Split_type(MPI.COMM_TYPE_SHARED)
    per_key = 4 * (1 + rows_out / max(n, 1) + HOST_EXTRA)
    need = node.allreduce(int(n * per_key))
    have = node.allreduce(available_host_memory() - RESERVE, op=MPI.MIN)
    ranks_here = node.Get_size()
    node.Free()
    if COMM.allreduce(need > have, op=MPI.LOR):
        if COMM.Get_rank() == 0:
            fits = have / per_key * 4 * COMM.Get_size() / ranks_here
            limit = resource.getrlimit(resource.RLIMIT_MEMLOCK)[0]
            room = cgroup_room()
            print(f"a node's ranks need about {need / 1e9:.1f} GB of host memory (input + "
                  f"output + {HOST_EXTRA:.0%}); {have / 1e9:.1f} GB are left (MemAvailable "
                  f"{available_memory_text(room)}, less {RESERVE / 2**30:.0f} GiB); about "
                  f"--total {fits / 1e9:.0f}GB fits (ulimit -l: "
                  f"{'unlimited' if limit == resource.RLIM_INFINITY else limit})",
                  file=sys.stderr)
        sys.exit(2)


def available_memory_text(room: int) -> str:
    return "" if room == sys.maxsize else f"and cgroup room {room / 1e9:.1f} GB"


def allocate(rows: int, gpu: bool) -> tuple[np.ndarray, float]:
    """A resident host array of uint32 (pinned on GPUs, else first touched) and the seconds it
    took, slowest rank; distsort's one message and exit 2 on every rank if it cannot be had."""
    start = time.perf_counter()
    try:
        array = agree(COMM, lambda: resident(rows, gpu))
    except RemoteError:
        sys.exit(2)
    except DistsortError as exc:
        print(f"distsort: error: {exc}", file=sys.stderr)
        sys.exit(2)
    return array, COMM.allreduce(time.perf_counter() - start, op=MPI.MAX)


def resident(rows: int, gpu: bool) -> np.ndarray:
    """A host array of uint32 whose pages are all in memory (page-locked on GPUs)."""
    array = host_empty((rows,), np.uint32, pinned=gpu)
    if not gpu:
        first_touch(array.view(np.uint8))
    return array


def warm_up(rt, budget_fraction: int) -> None:
    """One small out-of-core sort (many runs and rounds): kernels compiled and loaded, NCCL
    and the pools set up before the timed sort."""
    small = np.random.default_rng(COMM.Get_rank()).integers(0, 2**32, 1 << 20, np.uint32)
    source = ooc_layout.Source(len(small), lambda lo, hi: [small[lo:hi]], lambda c: c,
                             lambda c: [c[0]], lambda c: c)
    ooc.external_sort(rt, source, small.nbytes // budget_fraction, SortReport())


def run(args) -> list[dict]:
    """Allocate once, then for each budget of --device-memory: fresh keys, one timed sort into
    the output, verified. One result per budget."""
    rt = get_runtime(COMM, args.backend)
    gpu, p, total_bytes = rt.backend.name == "gpu", COMM.Get_size(), parse_size(args.total)
    n = total_bytes // 4 // p
    rows_out = ooc_layout.shard_capacity(n * p, p)
    check_host_memory(n, rows_out)
    baseline = host_bytes("VmRSS")
    step(f"allocating the input: {n * 4 / 1e9:.1f} GB a rank")
    keys, input_seconds = allocate(n, gpu)
    step(f"allocating the output: {rows_out * 4 / 1e9:.1f} GB a rank")
    out, output_seconds = allocate(rows_out, gpu)
    huge = COMM.allreduce(huge_page_bytes() / (keys.nbytes + out.nbytes), op=MPI.MIN)
    allocation = {"input_seconds": input_seconds, "output_seconds": output_seconds,
                  "input_bytes": keys.nbytes, "output_bytes": out.nbytes,
                  "huge_page_fraction_min": huge,
                  "pinned": os.environ.get("DISTSORT_PINNED", "register") if gpu else "no"}
    step("warm-up sort")
    warm_up(rt, max(args.budget_fraction or 8, 8))
    layouts = []
    plan = ooc.plan_layout
    ooc.plan_layout = lambda *a: layouts.append(plan(*a)) or layouts[-1]
    results = []
    for i, wanted in enumerate(args.device_memory.split(",")):
        budget = budget_of(rt, wanted, keys.nbytes, args.budget_fraction)
        reps = []
        for rep in range(args.reps):
            step(f"generating the keys (budget {budget / 1e9:.1f} GB, run {rep + 1})")
            generate(rt, keys, args.seed + i * args.reps + rep)
            keys_sum = device_checksum(rt, keys)
            traced = args.trace and rep == 0
            trace = os.path.join(args.out, f"trace_{wanted}.json") if traced else None
            timing, ok, report, memory = timed_sort(rt, keys, out, budget, keys_sum,
                                                    baseline, trace)
            timing["allocation"] = allocation
            reps.append(summary(rt, args, total_bytes, n, budget, timing, ok, report,
                                layouts[-1], memory))
        results.append(median_run(reps))
    return results


def median_run(reps: list[dict]) -> dict:
    """The run of median time, with every run's seconds and whether all were verified."""
    middle = sorted(reps, key=lambda r: r["seconds"])[len(reps) // 2]
    return {**middle, "seconds_all": [r["seconds"] for r in reps],
            "verified": all(r["verified"] for r in reps)}


def budget_of(rt, wanted: str, data_bytes: int, fraction: int | None) -> int:
    """A --device-memory value in bytes: a size, or "default" (distsort's own budget, or this
    rank's data / --budget-fraction when that is given)."""
    if wanted != "default":
        return parse_size(wanted)
    return data_bytes // fraction if fraction else default_budget(rt.backend.name)


def timed_sort(rt, keys: np.ndarray, out: np.ndarray, budget: int, keys_sum: int,
               baseline: int, trace: str | None) -> tuple:
    """One out-of-core sort of keys (runs in place) into out, timed and verified; on GPUs
    with its copies' and sorts' timeline written to `trace` (rank 0's) if given."""
    n = len(keys)
    source = ooc_layout.Source(n, lambda lo, hi: [keys[lo:hi]], lambda c: c,
                             lambda c: [c[0]], lambda c: c)
    report = SortReport(rank=COMM.Get_rank(), backend=rt.backend.name,
                        engine=rt.backend.engine.name)
    process_peak = host_bytes("VmHWM")
    rt.backend.synchronize()
    COMM.Barrier()
    step("sorting")
    before = host_bytes("VmRSS") if reset_peak() else None
    tracer = None
    if trace and rt.backend.name == "gpu":
        from gpu_trace import Tracer

        tracer = Tracer(rt.backend.engine)
        tracer.install()
    start = time.perf_counter()
    shard = ooc.external_sort(rt, source, budget, report, store=[keys], out=[out])[0]
    rt.backend.synchronize()
    elapsed = time.perf_counter() - start
    if tracer:
        tracer.remove()
        write_trace(tracer.timeline(), trace)
    memory = host_memory(baseline, before, max(process_peak, host_bytes("VmHWM")),
                         keys.nbytes, out.nbytes, budget)
    step("verifying")
    ok = verify(rt, keys_sum, n, shard)
    timing = {"seconds": COMM.allreduce(elapsed, op=MPI.MAX), "unaccounted_seconds":
              COMM.allreduce(elapsed - report.seconds, op=MPI.MAX)}
    return timing, ok, report, memory


def write_trace(timeline: dict, path: str) -> None:
    """Rank 0's timeline to path, and its summary to stdout."""
    from gpu_trace import describe

    if COMM.Get_rank() == 0:
        os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
        with open(path, "w") as f:
            json.dump(timeline, f)
        print(describe(timeline["summary"]), flush=True)


def host_memory(baseline: int, before: int | None, peak: int, input_bytes: int,
                output_bytes: int, budget: int) -> dict:
    """Host memory of every rank: the sort's own peak beyond what was resident just before it
    (input and output included; None where VmHWM could not be reset), and the process's peak
    against baseline (interpreter, CUDA, MPI) + input + output."""
    sort_extra = None if before is None else host_bytes("VmHWM") - before
    extra = peak - baseline - input_bytes - output_bytes
    mine = {"peak": peak, "baseline": baseline, "input": input_bytes, "output": output_bytes,
            "extra": extra, "extra_over_input": extra / max(input_bytes, 1),
            "sort_extra": sort_extra}
    ranks = COMM.allgather(mine)
    sorts = [r["sort_extra"] for r in ranks]
    return {
        "per_rank": ranks,
        "peak_sum": sum(r["peak"] for r in ranks),
        "baseline_sum": sum(r["baseline"] for r in ranks),
        "input_plus_output_sum": sum(r["input"] + r["output"] for r in ranks),
        "extra_over_input_max": max(r["extra_over_input"] for r in ranks),
        "sort_extra_over_input_max": None if None in sorts else max(
            s / max(r["input"], 1) for s, r in zip(sorts, ranks)),
        "budget_over_input": budget / max(input_bytes, 1),
    }


def summary(rt, args, total_bytes, n, budget, timing, ok, report, layout, memory) -> dict:
    per_gpu = n * 4 / timing["seconds"] / 1e9
    pool = 0
    if rt.backend.name == "gpu":
        pool = COMM.allreduce(rt.xp.get_default_memory_pool().total_bytes(), op=MPI.MAX)
    return {
        "backend": rt.backend.name, "ranks": COMM.Get_size(), "total_bytes": total_bytes,
        "keys_per_rank": n, "budget_bytes": budget, **timing, "verified": bool(ok),
        "gb_per_s_per_rank": per_gpu,
        "pcie_gb_per_s": args.pcie,
        "fraction_of_pcie": per_gpu / args.pcie,
        "fraction_of_run_merge_floor": per_gpu / (args.pcie / 2),
        "phases_slowest_rank": {name: COMM.allreduce(report.phases.get(key, 0.0), op=MPI.MAX)
                                for name, key in PHASES.items()},
        "runs_per_rank": layout.runs_per_rank, "pieces_per_rank": layout.pieces,
        "sample_stride": layout.stride,
        "host_memory": memory,
        "peak_device_pool_bytes": pool,
        "bytes_received_max": COMM.allreduce(report.bytes_received, op=MPI.MAX),
    }


def headline(result: dict) -> str:
    """One line per measure: allocation, time, rate, phases, host memory against the goal."""
    memory, phases, alloc = result["host_memory"], result["phases_slowest_rank"], \
        result["allocation"]
    sort_extra = memory["sort_extra_over_input_max"]
    per_gb = (alloc["input_seconds"] + alloc["output_seconds"]) * 1e9 / max(
        alloc["input_bytes"] + alloc["output_bytes"], 1)
    return "\n".join([
        f"host allocation (before the timer, slowest rank; pinned: {alloc['pinned']}): input "
        f"{alloc['input_bytes'] / 1e9:.2f} GB in {alloc['input_seconds']:.2f} s, output "
        f"{alloc['output_bytes'] / 1e9:.2f} GB in {alloc['output_seconds']:.2f} s "
        f"({per_gb:.3f} s/GB, {alloc['huge_page_fraction_min']:.0%} in huge pages)",
        f"{'ok' if result['verified'] else 'WRONG'}: {result['ranks']} rank(s), "
        f"{result['total_bytes'] / 1e9:.2f} GB in {result['seconds']:.3f} s (median of "
        f"{', '.join(f'{t:.3f}' for t in result['seconds_all'])}), "
        f"{result['gb_per_s_per_rank']:.2f} GB/s of input per rank "
        f"({result['fraction_of_run_merge_floor']:.0%} of the run-merge floor)",
        "phases (s, slowest rank): " + ", ".join(f"{k} {v:.3f}" for k, v in phases.items())
        + f"; outside them {result['unaccounted_seconds']:.3f}",
        "host memory, the sort's own peak beyond input + output: "
        + ("unknown (VmHWM not resettable)" if sort_extra is None else f"{sort_extra:.1%}")
        + f" of the input (worst rank; goal <= {HOST_EXTRA:.0%})",
        f"host memory, process: peak {memory['peak_sum'] / 1e9:.2f} GB over all ranks = "
        f"interpreter/CUDA/MPI {memory['baseline_sum'] / 1e9:.2f} + input + output "
        f"{memory['input_plus_output_sum'] / 1e9:.2f} + extra "
        f"{memory['extra_over_input_max']:.1%} of the input (worst rank)",
    ])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--total", default="200GB", help="bytes of uint32 keys in all")
    parser.add_argument("--backend", choices=("gpu", "cpu"), default="gpu")
    parser.add_argument("--device-memory", default="default",
                        help="budget per rank: a size, or default (distsort's); several, "
                             "comma-separated, sort fresh keys once each (one allocation)")
    parser.add_argument("--budget-fraction", type=int,
                        help="budget = this rank's data / N (case b: 8)")
    parser.add_argument("--reps", type=int, default=1,
                        help="sorts per budget, fresh keys each; the median is reported")
    parser.add_argument("--trace", action="store_true",
                        help="GPU timeline of each budget's first sort to OUT/trace_BUDGET.json")
    parser.add_argument("--pcie", type=float, default=55.0, help="pinned PCIe GB/s per GPU")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default="bench/results", help="folder for the JSON")
    args = parser.parse_args()
    results = run(args)
    if COMM.Get_rank() == 0:
        os.makedirs(args.out, exist_ok=True)
        for wanted, result in zip(args.device_memory.split(","), results):
            name = f"external_{COMM.Get_size()}{args.backend}_{args.total}"
            name += f"_frac{args.budget_fraction}" if args.budget_fraction else ""
            name += "" if wanted == "default" else f"_budget{wanted}"
            with open(os.path.join(args.out, name + ".json"), "w") as f:
                json.dump(result, f, indent=2)
            print(headline(result), flush=True)
    if not all(result["verified"] for result in results):
        sys.exit(1)


if __name__ == "__main__":
    main()
