"""All-to-all-v between GPUs with NCCL grouped send/recv (through cupy.cuda.nccl).

One NCCL group holds a send and a receive per peer, byte-typed with 64-bit counts, so NCCL
schedules all pairs at once over NVLink. The communicator is built once per MPI communicator
(its unique id travels over MPI) and reused: creating one costs far more than an exchange.
"""

from __future__ import annotations

import numpy as np

from . import as_bytes, displacements, row_bytes


class NcclTransport:
    name = "nccl"

    def __init__(self, comm):
        import cupy
        from cupy.cuda import nccl

        self.cp, self.nccl = cupy, nccl
        uid = nccl.get_unique_id() if comm.Get_rank() == 0 else None
        uid = comm.bcast(uid, root=0)
        self.nccl_comm = nccl.NcclCommunicator(comm.Get_size(), uid, comm.Get_rank())
        self.size, self.rank = comm.Get_size(), comm.Get_rank()

    def alltoallv(self, send, send_counts: np.ndarray, recv_counts: np.ndarray, stream=None):
        cp, nccl = self.cp, self.nccl
        width = row_bytes(send)
        out = cp.empty((int(recv_counts.sum()),) + send.shape[1:], dtype=send.dtype)
        sbuf, rbuf = as_bytes(cp.ascontiguousarray(send)), as_bytes(out)
        sbytes = np.asarray(send_counts, np.int64) * width
        rbytes = np.asarray(recv_counts, np.int64) * width
        sdisp, rdisp = displacements(sbytes), displacements(rbytes)
        stream = stream or cp.cuda.get_current_stream()
        me = self.rank
        with stream:  # this rank's own rows: a device copy, not a trip through NCCL
            rbuf[rdisp[me] : rdisp[me] + rbytes[me]] = sbuf[sdisp[me] : sdisp[me] + sbytes[me]]
        nccl.groupStart()
        for peer in range(self.size):
            if peer == me:
                continue
            if sbytes[peer]:
                self.nccl_comm.send(
                    sbuf.data.ptr + int(sdisp[peer]), int(sbytes[peer]), nccl.NCCL_UINT8,
                    peer, stream.ptr,
                )
            if rbytes[peer]:
                self.nccl_comm.recv(
                    rbuf.data.ptr + int(rdisp[peer]), int(rbytes[peer]), nccl.NCCL_UINT8,
                    peer, stream.ptr,
                )
        nccl.groupEnd()
        return out
