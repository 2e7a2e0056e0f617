"""Out-of-core sort benchmark (issue 5): uint32 keys in host memory, sorted into host memory.

    (a) mpirun -n 4 python bench/external.py --total 200GB            # more than one GPU holds
    (b) python bench/external.py --total 32GB --budget-fraction 8     # one GPU, budget = data/8

Each rank generates its share of --total bytes of random uint32 keys into pinned host memory
(on its GPU, in pieces), takes the input's checksum, and sorts with distsort's out-of-core path
(external.external_sort; the runs are formed in place in the input buffer, the output is a new
pinned buffer: host memory = input + output + one round's buffers). The output is checked: order
within and across ranks, count, and checksum equal to the input's. Reported: seconds, GB/s of
input per GPU against the pinned PCIe rate (--pcie, ~55 GB/s) and against the floor of a
run-then-merge sort (every byte crosses PCIe four times: ~pcie/2 of input per GPU), phases,
peak host memory (VmHWM, summed over the ranks) and the GPU memory pool's size. JSON to --out.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

import cupy
import numpy as np
from mpi4py import MPI

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
from distsort import external  # noqa: E402
from distsort.check import checksum  # noqa: E402
from distsort.memory import default_budget, host_empty, parse_size  # noqa: E402
from distsort.report import SortReport  # noqa: E402
from distsort.runtime import get_runtime  # noqa: E402

COMM = MPI.COMM_WORLD
PIECE = 1 << 28  # keys generated, hashed or checked on the GPU at a time


def generate(n: int, seed: int) -> np.ndarray:
    """n random uint32 keys in pinned host memory, drawn on the GPU piece by piece."""
    keys = host_empty((n,), np.uint32, pinned=True)
    rng = cupy.random.RandomState(seed * 100_003 + COMM.Get_rank())
    for lo in range(0, n, PIECE):
        draws = rng.randint(0, 2**31, size=(2, min(PIECE, n - lo)), dtype=cupy.int64)
        bits = (draws[0] << 16) ^ draws[1]  # 32 random low bits from two 31-bit draws
        bits.astype(cupy.uint32).get(out=keys[lo : lo + draws.shape[1]])
    return keys


def device_checksum(keys: np.ndarray) -> int:
    """check.checksum over the host keys, computed on the GPU piece by piece."""
    total = 0
    for lo in range(0, len(keys), PIECE):
        total += checksum(cupy.asarray(keys[lo : lo + PIECE]), cupy)
    return total % 2**64


def sorted_locally(keys: np.ndarray) -> bool:
    """Is the host array non-decreasing? (Checked on the GPU, piece by piece, overlapping.)"""
    for lo in range(0, max(len(keys) - 1, 0), PIECE):
        piece = cupy.asarray(keys[lo : lo + PIECE + 1])
        if not bool((piece[1:] >= piece[:-1]).all()):
            return False
    return True


def verify(keys_in_sum: int, count_in: int, out: np.ndarray) -> bool:
    """Order inside and across ranks, total count and checksum: all ranks get the answer."""
    ends = (int(out[0]), int(out[-1])) if len(out) else None
    ok = sorted_locally(out)
    parts = COMM.allgather((ok, ends, count_in, len(out), keys_in_sum, device_checksum(out)))
    ok = all(p[0] for p in parts)
    ends = [p[1] for p in parts if p[1] is not None]
    ok &= all(a[1] <= b[0] for a, b in zip(ends, ends[1:]))
    ok &= sum(p[2] for p in parts) == sum(p[3] for p in parts)
    return ok and sum(p[4] for p in parts) % 2**64 == sum(p[5] for p in parts) % 2**64


def peak_host_bytes() -> int:
    """This process's peak resident memory (VmHWM), pinned buffers included."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    return 0


def run(total_bytes: int, budget: int | None, budget_fraction: int | None, seed: int) -> dict:
    rt = get_runtime(COMM, "gpu")
    p = COMM.Get_size()
    n = total_bytes // 4 // p
    keys = generate(n, seed)
    keys_sum = device_checksum(keys)
    if budget_fraction:
        budget = keys.nbytes // budget_fraction
    budget = budget or default_budget("gpu")
    source = external.Source(n, lambda lo, hi: [keys[lo:hi]], lambda c: c,
                             lambda c: [c[0]], lambda c: c)
    report = SortReport(rank=COMM.Get_rank(), backend="gpu", engine=rt.backend.engine.name)
    layouts = []
    plan = external.plan_layout
    external.plan_layout = lambda *a: layouts.append(plan(*a)) or layouts[-1]
    cupy.cuda.Device().synchronize()
    COMM.Barrier()
    start = time.perf_counter()
    out = external.external_sort(rt, source, budget, report, store=[keys])[0]
    cupy.cuda.Device().synchronize()
    seconds = COMM.allreduce(time.perf_counter() - start, op=MPI.MAX)
    ok = verify(keys_sum, n, out)
    return summary(total_bytes, n, p, budget, seconds, ok, report, layouts[-1])


def summary(total_bytes, n, p, budget, seconds, ok, report, layout) -> dict:
    per_gpu = n * 4 / seconds / 1e9
    pcie = ARGS.pcie
    return {
        "ranks": p, "total_bytes": total_bytes, "keys_per_rank": n, "budget_bytes": budget,
        "seconds": seconds, "verified": bool(ok),
        "gb_per_s_per_gpu": per_gpu,
        "pcie_gb_per_s": pcie,
        "fraction_of_pcie": per_gpu / pcie,
        "fraction_of_run_merge_floor": per_gpu / (pcie / 2),
        "phases_slowest_rank": {k: COMM.allreduce(v, op=MPI.MAX)
                                for k, v in sorted(report.phases.items())},
        "runs_per_rank": layout.runs_per_rank, "pieces_per_rank": layout.pieces,
        "sample_stride": layout.stride,
        "peak_host_bytes_sum": COMM.allreduce(peak_host_bytes()),
        "input_plus_output_bytes": 2 * total_bytes,
        "peak_device_pool_bytes": COMM.allreduce(
            cupy.get_default_memory_pool().total_bytes(), op=MPI.MAX),
        "bytes_received_max": COMM.allreduce(report.bytes_received, op=MPI.MAX),
    }


def main() -> None:
    global ARGS
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--total", default="200GB", help="bytes of uint32 keys in all")
    parser.add_argument("--device-memory", help="budget per rank (default: distsort's)")
    parser.add_argument("--budget-fraction", type=int,
                        help="budget = this rank's data / N (case b: 8)")
    parser.add_argument("--pcie", type=float, default=55.0, help="pinned PCIe GB/s per GPU")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default="bench/results", help="folder for the JSON")
    ARGS = parser.parse_args()
    budget = parse_size(ARGS.device_memory) if ARGS.device_memory else None
    result = run(parse_size(ARGS.total), budget, ARGS.budget_fraction, ARGS.seed)
    if COMM.Get_rank() == 0:
        os.makedirs(ARGS.out, exist_ok=True)
        name = f"external_{COMM.Get_size()}gpu_{ARGS.total}"
        name += f"_frac{ARGS.budget_fraction}" if ARGS.budget_fraction else ""
        with open(os.path.join(ARGS.out, name + ".json"), "w") as f:
            json.dump(result, f, indent=2)
        print(json.dumps(result, indent=2), flush=True)
    if not result["verified"]:
        sys.exit(1)


ARGS: argparse.Namespace

if __name__ == "__main__":
    main()
