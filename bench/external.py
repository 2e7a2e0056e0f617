"""Out-of-core sort benchmark (issue 5): uint32 keys in host memory, sorted into host memory.

    (a) mpirun -n 4 python bench/external.py --total 200GB            # more than one GPU holds
    (b) python bench/external.py --total 8GB --budget-fraction 8      # one GPU, budget = data/8
    (c) mpiexec -n 4 python bench/external.py --backend cpu --total 400MB --budget-fraction 64

Each rank generates its share of --total bytes of random uint32 keys into host memory (pinned on
GPUs; drawn on the GPU, in pieces), takes the input's checksum, and sorts with distsort's
out-of-core path (external.external_sort; the runs are formed in place in the input buffer, the
output is a new buffer: host memory = input + output + one round's buffers). The output is
checked piece by piece, without a copy: order within and across ranks, count, and checksum equal
to the input's. Reported: seconds, GB/s of input per GPU against the pinned PCIe rate (--pcie,
~55 GB/s) and against the floor of a run-then-merge sort (every byte crosses PCIe four times:
~pcie/2 of input per GPU), per-phase seconds of the slowest rank (runs, splitters, exchange,
merge), and per rank the peak host memory (VmHWM) against input + output: the extra over the
process's resident memory before the input was made (interpreter, CUDA, MPI), as a fraction of
the input (goal: <= 10%; on the CPU backend the budget's sort work is host memory too). JSON to
--out. Before generating, each node checks that its ranks' input + output + 10% fit MemAvailable.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

import numpy as np
from mpi4py import MPI

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
from distsort import external  # noqa: E402
from distsort.check import checksum  # noqa: E402
from distsort.memory import (  # noqa: E402
    available_host_memory,
    default_budget,
    host_empty,
    parse_size,  # noqa: E402
)
from distsort.report import SortReport  # noqa: E402
from distsort.runtime import get_runtime  # noqa: E402

COMM = MPI.COMM_WORLD
PIECE = {"gpu": 1 << 28, "cpu": 1 << 20}  # keys generated, hashed or checked at a time
PHASES = {"runs": "partition", "splitters": "sample", "exchange": "exchange", "merge": "finish"}
HOST_EXTRA = 0.10  # goal: host memory <= input + output + 10% of the input


def generate(rt, n: int, seed: int) -> np.ndarray:
    """n random uint32 keys in host memory (pinned on GPUs, drawn there), piece by piece."""
    gpu, piece = rt.backend.name == "gpu", PIECE[rt.backend.name]
    keys = host_empty((n,), np.uint32, pinned=gpu)
    rng = (rt.xp.random.RandomState if gpu else np.random.RandomState)(
        seed * 100_003 + COMM.Get_rank())
    for lo in range(0, n, piece):
        size = min(piece, n - lo)
        if gpu:  # 32 random low bits from two 31-bit draws
            draws = rng.randint(0, 2**31, size=(2, size), dtype=np.int64)
            bits = ((draws[0] << 16) ^ draws[1]).astype(np.uint32)
        else:
            bits = rng.randint(0, 2**32, size=size, dtype=np.uint32)
        rt.backend.copy_lane().download(bits, keys[lo : lo + size])  # direct, no staging
    return keys


def pieces(rt, keys: np.ndarray, overlap: int = 0):
    """The host keys on the backend's device, piece by piece (each with `overlap` keys of the
    next): direct copies from pinned memory, no staging copy."""
    lane = rt.backend.copy_lane()
    for lo in range(0, len(keys), PIECE[rt.backend.name]):
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


def check_host_memory(n: int) -> None:
    """Exit with a message, before any allocation, if this node's ranks' input + output + 10%
    would not fit its available host memory (the kernel would kill the run instead)."""
    node = COMM.Split_type(MPI.COMM_TYPE_SHARED)
    need = node.allreduce(int(n * 4 * (2 + HOST_EXTRA)))
    have = node.allreduce(available_host_memory(), op=MPI.MIN)
    node.Free()
    if COMM.allreduce(need > have, op=MPI.LOR):
        if COMM.Get_rank() == 0:
            print(f"a node's ranks need about {need / 1e9:.1f} GB of host memory (input + output "
                  f"+ {HOST_EXTRA:.0%}); MemAvailable is {have / 1e9:.1f} GB", file=sys.stderr)
        sys.exit(2)


def run(args) -> dict:
    rt = get_runtime(COMM, args.backend)
    p, total_bytes = COMM.Get_size(), parse_size(args.total)
    n = total_bytes // 4 // p
    check_host_memory(n)
    baseline = host_bytes("VmRSS")
    keys = generate(rt, n, args.seed)
    keys_sum = device_checksum(rt, keys)
    budget = parse_size(args.device_memory) if args.device_memory else None
    if args.budget_fraction:
        budget = keys.nbytes // args.budget_fraction
    budget = budget or default_budget(rt.backend.name)
    source = external.Source(n, lambda lo, hi: [keys[lo:hi]], lambda c: c,
                             lambda c: [c[0]], lambda c: c)
    report = SortReport(rank=COMM.Get_rank(), backend=rt.backend.name,
                        engine=rt.backend.engine.name)
    layouts = []
    plan = external.plan_layout
    external.plan_layout = lambda *a: layouts.append(plan(*a)) or layouts[-1]
    rt.backend.synchronize()
    COMM.Barrier()
    start = time.perf_counter()
    out = external.external_sort(rt, source, budget, report, store=[keys])[0]
    rt.backend.synchronize()
    seconds = COMM.allreduce(time.perf_counter() - start, op=MPI.MAX)
    ok = verify(rt, keys_sum, n, out)
    memory = host_memory(baseline, keys.nbytes, out.nbytes, budget)
    return summary(rt, args, total_bytes, n, budget, seconds, ok, report, layouts[-1], memory)


def host_memory(baseline: int, input_bytes: int, output_bytes: int, budget: int) -> dict:
    """Peak host memory of every rank against its input + output."""
    peak = host_bytes("VmHWM")
    extra = peak - baseline - input_bytes - output_bytes
    mine = {"peak": peak, "baseline": baseline, "input": input_bytes, "output": output_bytes,
            "extra": extra, "extra_over_input": extra / max(input_bytes, 1)}
    ranks = COMM.allgather(mine)
    return {
        "per_rank": ranks,
        "peak_sum": sum(r["peak"] for r in ranks),
        "input_plus_output_sum": sum(r["input"] + r["output"] for r in ranks),
        "extra_over_input_max": max(r["extra_over_input"] for r in ranks),
        "extra_over_input_total": sum(r["extra"] for r in ranks)
        / max(sum(r["input"] for r in ranks), 1),
        "budget_over_input": budget / max(input_bytes, 1),
    }


def summary(rt, args, total_bytes, n, budget, seconds, ok, report, layout, memory) -> dict:
    per_gpu = n * 4 / seconds / 1e9
    pool = 0
    if rt.backend.name == "gpu":
        pool = COMM.allreduce(rt.xp.get_default_memory_pool().total_bytes(), op=MPI.MAX)
    return {
        "backend": rt.backend.name, "ranks": COMM.Get_size(), "total_bytes": total_bytes,
        "keys_per_rank": n, "budget_bytes": budget, "seconds": seconds, "verified": bool(ok),
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
    """One line per measure: time, rate, phases, host memory against the goal."""
    memory, phases = result["host_memory"], result["phases_slowest_rank"]
    return "\n".join([
        f"{'ok' if result['verified'] else 'WRONG'}: {result['ranks']} rank(s), "
        f"{result['total_bytes'] / 1e9:.2f} GB in {result['seconds']:.3f} s, "
        f"{result['gb_per_s_per_rank']:.2f} GB/s of input per rank "
        f"({result['fraction_of_run_merge_floor']:.0%} of the run-merge floor)",
        "phases (s, slowest rank): " + ", ".join(f"{k} {v:.3f}" for k, v in phases.items()),
        f"host memory: peak {memory['peak_sum'] / 1e9:.2f} GB over all ranks, input + output "
        f"{memory['input_plus_output_sum'] / 1e9:.2f} GB; extra over input + output: "
        f"{memory['extra_over_input_max']:.1%} of the input (worst rank), "
        f"{memory['extra_over_input_total']:.1%} (all ranks); goal <= {HOST_EXTRA:.0%}",
    ])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--total", default="200GB", help="bytes of uint32 keys in all")
    parser.add_argument("--backend", choices=("gpu", "cpu"), default="gpu")
    parser.add_argument("--device-memory", help="budget per rank (default: distsort's)")
    parser.add_argument("--budget-fraction", type=int,
                        help="budget = this rank's data / N (case b: 8)")
    parser.add_argument("--pcie", type=float, default=55.0, help="pinned PCIe GB/s per GPU")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default="bench/results", help="folder for the JSON")
    args = parser.parse_args()
    result = run(args)
    if COMM.Get_rank() == 0:
        os.makedirs(args.out, exist_ok=True)
        name = f"external_{COMM.Get_size()}{args.backend}_{args.total}"
        name += f"_frac{args.budget_fraction}" if args.budget_fraction else ""
        with open(os.path.join(args.out, name + ".json"), "w") as f:
            json.dump(result, f, indent=2)
        print(headline(result), flush=True)
    if not result["verified"]:
        sys.exit(1)


if __name__ == "__main__":
    main()
