"""Library use from an mpi4py program: every rank brings its keys and gets back its sorted shard.

    mpirun -n 4 python examples/library_sort.py [--count-per-rank N]

The shards, concatenated in rank order, are all the keys sorted. This program sorts float64 keys
(NaN included: it sorts last) as NumPy arrays, ascending and descending, asks for the global
permutation with argsort and, where every rank has a GPU and CuPy, sorts CuPy arrays on the GPUs.
Each result is checked on rank 0 against NumPy on the gathered keys (fine at this size; for
files at scale, `python -m distsort check` checks without gathering). Exit status 1 if any
result is wrong.
"""

from __future__ import annotations

import argparse
import os
import sys

import numpy as np
from mpi4py import MPI

import distsort


def gather(comm: MPI.Comm, shard) -> np.ndarray | None:
    """All ranks' shards, concatenated in rank order, on rank 0 (None elsewhere)."""
    parts = comm.gather(np.asarray(shard), root=0)
    return np.concatenate(parts) if parts is not None else None


def descending(keys: np.ndarray) -> np.ndarray:
    """NumPy's descending order with NaN last, as distsort orders it."""
    nan = np.isnan(keys)
    return np.concatenate([np.sort(keys[~nan])[::-1], keys[nan]])


def verdict(comm: MPI.Comm, what: str, ok: bool | None, shard_len: int) -> bool:
    """Tell rank 0's verdict to every rank, and print it with the shard sizes."""
    ok = comm.bcast(ok, root=0)
    sizes = comm.gather(shard_len, root=0)
    if comm.rank == 0:
        print(f"{what}: {'ok' if ok else 'WRONG'} (shard sizes {sizes})", flush=True)
    return bool(ok)


def numpy_sorts(comm: MPI.Comm, keys: np.ndarray) -> bool:
    everything = gather(comm, keys)
    ok = True
    for desc, expect in ((False, np.sort), (True, descending)):
        shard = distsort.sort(keys, comm, descending=desc)
        got = gather(comm, shard)
        good = None if got is None else np.array_equal(got, expect(everything), equal_nan=True)
        order = "descending" if desc else "ascending"
        ok &= verdict(comm, f"numpy float64 sort, {order}", good, len(shard))
    perm = distsort.argsort(keys, comm)
    got = gather(comm, perm)
    good = None if got is None else np.array_equal(got, np.argsort(everything, kind="stable"))
    return verdict(comm, "numpy argsort (global int64 positions)", good, len(perm)) and ok


def every_rank_has_a_gpu(comm: MPI.Comm) -> bool:
    if os.environ.get("DISTSORT_BACKEND") == "cpu":
        return False
    try:
        import cupy

        has_gpu = cupy.cuda.runtime.getDeviceCount() > 0
    except Exception:  # no CuPy, no driver, no device
        has_gpu = False
    return comm.allreduce(has_gpu, op=MPI.LAND)


def cupy_sort(comm: MPI.Comm, count: int) -> bool:
    import cupy

    distsort.bind_gpu(comm)  # this rank's GPU current before allocating on it, as distsort does
    host_keys = np.random.default_rng(comm.rank).integers(0, 2**32, count, dtype=np.uint32)
    keys = cupy.asarray(host_keys)  # on this rank's GPU
    shard = distsort.sort(keys, comm)
    cupy_out = comm.allreduce(isinstance(shard, cupy.ndarray), op=MPI.LAND)
    everything, got = gather(comm, cupy.asnumpy(keys)), gather(comm, cupy.asnumpy(shard))
    good = None if got is None else cupy_out and np.array_equal(got, np.sort(everything))
    return verdict(comm, "cupy uint32 sort on the GPUs (CuPy in, CuPy out)", good, len(shard))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count-per-rank", type=int, default=200_000)
    args = parser.parse_args()
    comm = MPI.COMM_WORLD

    rng = np.random.default_rng(comm.rank)
    n = args.count_per_rank + 1000 * comm.rank  # shards need not be the same size
    keys = rng.normal(size=n)
    keys[rng.integers(0, n, 10)] = np.nan
    if comm.rank == 0:
        print(f"{comm.size} rank(s), {n} to {n + 1000 * (comm.size - 1)} keys each", flush=True)
    ok = numpy_sorts(comm, keys)
    if every_rank_has_a_gpu(comm):
        ok = cupy_sort(comm, args.count_per_rank) and ok
    elif comm.rank == 0:
        print("cupy sort: skipped (not every rank has a GPU, or DISTSORT_BACKEND=cpu)")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
