"""Probe: an all-to-all by the copy engines (CUDA IPC peer copies) against NCCL, alone and
beside a sort on another stream.

Why: in the chunked exchange the NCCL kernels and the partition's scatters share the SMs, and
each slows the other (bench/RESULTS.md, run 103: scatters 2.2 -> 3.2 ms a chunk, transfers at
87% of the plain all-to-all). Peer copies by cudaMemcpyAsync into a buffer opened by CUDA IPC run
on the copy engines and take no SM. This measures whether they move as fast, and how much each
way slows a kernel beside it. Every rank sends an equal block to every rank (itself included).

Run: mpirun -n P python3 bench/history/ce_probe.py [--log 30] [--reps 5] [--out DIR]
"""

from __future__ import annotations

import argparse
import json
import os

import cupy as cp
import numpy as np
from cupy.cuda import nccl, runtime
from mpi4py import MPI

D2D = 3  # cudaMemcpyDeviceToDevice


def raw_buffer(nbytes: int):
    """A cudaMalloc'd buffer of its own (an IPC handle names the base of an allocation)."""
    ptr = runtime.malloc(nbytes)
    mem = cp.cuda.UnownedMemory(ptr, nbytes, None)
    return ptr, cp.ndarray(nbytes // 4, cp.uint32, cp.cuda.MemoryPointer(mem, 0))


class Probe:
    def __init__(self, comm, log: int, pieces: int):
        self.comm, self.rank, self.size = comm, comm.Get_rank(), comm.Get_size()
        cp.cuda.Device(self.rank % runtime.getDeviceCount()).use()
        self.nbytes = 4 << log
        self.block = self.nbytes // self.size
        self.send_ptr, self.send = raw_buffer(self.nbytes)
        self.recv_ptr, self.recv = raw_buffer(self.nbytes)
        self.send[...] = cp.random.randint(1, 2**32 - 1, self.send.size, dtype=cp.uint32)
        handles = comm.allgather(runtime.ipcGetMemHandle(self.recv_ptr))
        self.peer_recv = [self.recv_ptr if q == self.rank else runtime.ipcOpenMemHandle(h)
                          for q, h in enumerate(handles)]
        uid = comm.bcast(nccl.get_unique_id() if self.rank == 0 else None)
        self.nccl = nccl.NcclCommunicator(self.size, uid, self.rank)
        self.pieces = pieces
        self.streams = [cp.cuda.Stream(non_blocking=True) for _ in range(self.size * pieces)]
        self.xfer = cp.cuda.Stream(non_blocking=True)
        self.work = cp.cuda.Stream(non_blocking=True)
        self.keys = cp.random.randint(0, 2**32, 1 << 28, dtype=cp.uint32)

    def copies(self) -> None:
        """Every block to its receiver by cudaMemcpyAsync, `pieces` streams a peer, behind and
        ahead of the transfer stream."""
        start = self.xfer.record()
        piece = self.block // self.pieces
        for i, s in enumerate(self.streams):
            q, k = divmod(i, self.pieces)
            q = (self.rank + q) % self.size  # every rank starts with a different peer
            s.wait_event(start)
            src = self.send_ptr + q * self.block + k * piece
            dst = self.peer_recv[q] + self.rank * self.block + k * piece
            runtime.memcpyAsync(dst, src, piece, D2D, s.ptr)
            self.xfer.wait_event(s.record())

    def nccl_group(self) -> None:
        nccl.groupStart()
        for q in range(self.size):
            self.nccl.send(self.send_ptr + q * self.block, self.block, nccl.NCCL_UINT8, q,
                           self.xfer.ptr)
            self.nccl.recv(self.recv_ptr + q * self.block, self.block, nccl.NCCL_UINT8, q,
                           self.xfer.ptr)
        nccl.groupEnd()

    def sorts(self) -> None:
        with self.work:
            for _ in range(2):
                cp.sort(self.keys)

    def timed(self, transfer, work: bool) -> tuple[float, float]:
        """(transfer ms, work ms) of one round, the slowest rank's; 0 where not run."""
        self.comm.Barrier()
        t0, w0 = self.xfer.record(), self.work.record()
        if transfer:
            transfer()
        if work:
            self.sorts()
        t1, w1 = self.xfer.record(), self.work.record()
        t1.synchronize()
        w1.synchronize()
        self.comm.Barrier()  # the receivers' buffers are whole only once every sender is done
        ms = (cp.cuda.get_elapsed_time(t0, t1) if transfer else 0.0,
              cp.cuda.get_elapsed_time(w0, w1) if work else 0.0)
        return tuple(self.comm.allreduce(m, op=MPI.MAX) for m in ms)

    def check(self) -> bool:
        """Every received block sums to what its sender's block for this rank summed to."""
        blocks = self.send.reshape(self.size, -1).astype(cp.uint64).sum(axis=1).get()
        sent = self.comm.allgather([int(b) for b in blocks])  # sent[q][r]: q's block for r
        got = self.recv.reshape(self.size, -1).astype(cp.uint64).sum(axis=1).get()
        ok = all(int(got[q]) == sent[q][self.rank] for q in range(self.size))
        return bool(self.comm.allreduce(ok, op=MPI.LAND))

    def handle_costs(self) -> dict:
        """Host ms of exporting and of opening + closing a peer's buffer, median of 20."""
        import time

        peer, (ptr, _) = (self.rank + 1) % self.size, raw_buffer(1 << 30)
        get, opened = [], []
        for _ in range(20):
            t = time.perf_counter()
            handle = runtime.ipcGetMemHandle(ptr)
            get.append(time.perf_counter() - t)
            handle = self.comm.sendrecv(handle, dest=peer, source=(self.rank - 1) % self.size)
            t = time.perf_counter()
            runtime.ipcCloseMemHandle(runtime.ipcOpenMemHandle(handle))
            opened.append(time.perf_counter() - t)
        self.comm.Barrier()
        runtime.free(ptr)
        return {"get handle ms": round(1e3 * float(np.median(get)), 4),
                "open + close ms": round(1e3 * float(np.median(opened)), 4)}

    def run(self, reps: int) -> dict:
        cases = {"copy engines": self.copies, "nccl": self.nccl_group}
        out = self.handle_costs()
        for name, transfer in cases.items():
            self.recv.fill(0)
            cp.cuda.Device().synchronize()
            self.timed(transfer, False)
            out[f"{name} correct"] = self.check()
        rounds = [(name, t, w) for name, t in [*cases.items(), ("work alone", None)]
                  for w in (False, True) if t or w]
        for name, transfer, work in rounds:
            self.timed(transfer, work)  # warm-up
            times = np.array([self.timed(transfer, work) for _ in range(reps)])
            med = np.median(times, axis=0)
            sent = self.block * (self.size - 1)
            key = f"{name}{' + sorts' if work and transfer else ''}"
            out[key] = {"transfer_ms": round(float(med[0]), 3), "work_ms": round(float(med[1]), 3),
                        "GB/s sent": round(sent / med[0] / 1e6, 1) if med[0] else None}
        return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--log", type=int, default=30, help="log2 of uint32 keys per rank")
    parser.add_argument("--pieces", type=int, default=1, help="copies (streams) per peer")
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    comm = MPI.COMM_WORLD
    result = Probe(comm, args.log, args.pieces).run(args.reps)
    if comm.Get_rank() == 0:
        result = {"ranks": comm.Get_size(), "log": args.log, "pieces": args.pieces, **result}
        print(json.dumps(result, indent=1))
        if args.out:
            os.makedirs(args.out, exist_ok=True)
            path = f"{args.out}/ce_probe_p{comm.Get_size()}_k{args.pieces}.json"
            with open(path, "w") as f:
                json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
