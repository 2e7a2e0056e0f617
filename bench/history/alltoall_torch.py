"""The plain all-to-all of `../shared/ANCHORS.md` (PyTorch's all_to_all_single over NCCL) beside
our transport's (bench/dist_sort.py --exchange-only), same bytes, same machine: a diagnostic of
the exchange's ceiling, not part of distsort (PyTorch is not a dependency).

Run: mpirun -n P python3 bench/history/alltoall_torch.py [--keys-per-rank 2^30] [--reps 5]
Prints the GB/s sent per rank (bytes to other ranks / median time, CUDA events, warm-up first)
and both NCCL versions.
"""

from __future__ import annotations

import argparse
import os
import statistics

from mpi4py import MPI


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--keys-per-rank", default="2^30")
    ap.add_argument("--reps", type=int, default=5)
    args = ap.parse_args()
    comm = MPI.COMM_WORLD
    rank, p = comm.Get_rank(), comm.Get_size()
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29517")
    import torch
    import torch.distributed as dist
    from cupy.cuda import nccl

    device = torch.device("cuda", rank % torch.cuda.device_count())
    torch.cuda.set_device(device)
    dist.init_process_group("nccl", rank=rank, world_size=p, device_id=device)
    base, exp = args.keys_per_rank.split("^") if "^" in args.keys_per_rank else (1, 0)
    n = int(base) ** int(exp) if exp else int(args.keys_per_rank)
    send = torch.randint(0, 2**31 - 1, (n,), dtype=torch.int32, device="cuda")
    recv = torch.empty_like(send)
    times = []
    for _ in range(args.reps + 1):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        dist.barrier()
        torch.cuda.synchronize()
        start.record()
        dist.all_to_all_single(recv, send)
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) / 1e3)
    seconds = comm.allreduce(statistics.median(times[1:]), op=MPI.MAX)
    sent = n * 4 * (p - 1) // p
    if rank == 0:
        print(f"torch all_to_all_single P={p} {n * 4 / 2**30:.2f} GiB per rank: "
              f"{seconds * 1e3:.2f} ms, {sent / seconds / 1e9:.0f} GB/s sent per rank; NCCL "
              f"torch {torch.cuda.nccl.version()} cupy {nccl.get_version()}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
