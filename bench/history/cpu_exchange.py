"""CPU ranks of one node: an all-to-all of n uint32 keys a rank by MPI Alltoallv, against two
copies through an MPI shared window (each rank copies its keys in, each copies its blocks out),
and a local copy of the same bytes into new memory (as the exchange's receive buffer is) and
into memory touched before (the memory's own pace).

`mpiexec -n P python bench/history/cpu_exchange.py 2^24 [threads]`: medians of 5, each way
twice; the window's result is checked against MPI's.
"""

import sys
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
from mpi4py import MPI

comm = MPI.COMM_WORLD
p, r = comm.Get_size(), comm.Get_rank()
n = int(eval(sys.argv[1].replace("^", "**")))
threads = int(sys.argv[2]) if len(sys.argv) > 2 else 1
pool = ThreadPoolExecutor(threads)
send = np.random.default_rng(r).integers(0, 2**32, n, dtype=np.uint32)
counts = np.full(p, n // p, np.int64)
counts[-1] += n - counts.sum()
sd = np.concatenate([[0], np.cumsum(counts)[:-1]])
rc = np.array(comm.alltoall(counts.tolist()), np.int64)
rd = np.concatenate([[0], np.cumsum(rc)[:-1]])
win = MPI.Win.Allocate_shared(n * 4, 1, comm=comm.Split_type(MPI.COMM_TYPE_SHARED))
mine = np.frombuffer(win.Shared_query(r)[0], np.uint32)
peers = [np.frombuffer(win.Shared_query(q)[0], np.uint32) for q in range(p)]
peer_sd = np.array(comm.alltoall(sd.tolist()), np.int64)


def copy_parts(parts: list) -> None:
    def one(k):
        for d, s in parts[k::threads]:
            d[:] = s
    list(pool.map(one, range(threads)))


def split(d, s) -> list:
    step = -(-len(d) // threads)
    return [(d[i:i + step], s[i:i + step]) for i in range(0, len(d), step)]


def mpi_way():
    out = np.empty(rc.sum(), np.uint32)
    comm.Alltoallv([send, (counts, sd), MPI.UINT32_T], [out, (rc, rd), MPI.UINT32_T])
    return out


def window_way():
    out = np.empty(rc.sum(), np.uint32)
    comm.Barrier()  # the peers have read the last call's keys
    copy_parts(split(mine, send))
    comm.Barrier()
    copy_parts([part for q in range(p) for part in split(
        out[rd[q]:rd[q] + rc[q]], peers[q][peer_sd[q]:peer_sd[q] + rc[q]])])
    return out


def local_copy():
    out = np.empty(n, np.uint32)
    copy_parts(split(out, send))
    return out


kept = np.ones(n, np.uint32)  # touched once: no page is new to the copy


def copy_kept():
    copy_parts(split(kept, send))
    return kept


assert np.array_equal(mpi_way(), window_way())
for name, way in [("mpi", mpi_way), ("window", window_way), ("copy", local_copy),
                  ("copy into kept memory", copy_kept)] * 2:
    times = []
    for _ in range(5):
        comm.Barrier()
        t = time.perf_counter()
        way()
        comm.Barrier()
        times.append(time.perf_counter() - t)
    if r == 0:
        print(f"{name} p={p} n={n} threads={threads}: median {np.median(times) * 1e3:.1f} ms, "
              f"all {[round(x * 1e3, 1) for x in times]}")
win.Free()
