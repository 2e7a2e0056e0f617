"""All-to-all-v over MPI on host (NumPy) arrays, safe for messages of any size.

MPI-3 counts and displacements are C ints, so one call cannot address more than 2^31-1 bytes
(mpi4py #575, Open MPI #5383). Small exchanges go in one Alltoallv of bytes. Larger ones go in
rounds: in round k every pair exchanges bytes [k*c, (k+1)*c) of its message, packed into a staging
buffer of at most p*c bytes, so counts, displacements and the extra memory all stay bounded.
"""

from __future__ import annotations

import numpy as np
from mpi4py import MPI

from .. import settings
from . import as_bytes, call_layout, choice, displacements, row_bytes

INT_MAX = 2**31 - 1


class MpiTransport:
    name = choice.MPI_HOST
    align_rows = 1  # blocks back to back

    def __init__(self, comm, chunk_bytes: int | None = None):
        self.comm = comm
        self.chunk_bytes = int(chunk_bytes or settings.value("DISTSORT_MPI_CHUNK_BYTES"))

    def release(self) -> None:
        """Nothing kept between calls."""

    def alltoallv(self, columns: list, send_counts: np.ndarray, recv_counts: np.ndarray,
                  send_displs=None, recv_displs=None, outs: list | None = None) -> list:
        send_displs, recv_displs, outs = call_layout(np, columns, send_counts, recv_counts,
                                                     send_displs, recv_displs, outs)
        for c, out in zip(columns, outs):
            self._column(c, out, send_counts, recv_counts, send_displs, recv_displs)
        return outs

    def _column(self, send, out, send_counts, recv_counts, send_displs, recv_displs) -> None:
        width = row_bytes(send)
        sbytes = np.asarray(send_counts, np.int64) * width
        rbytes = np.asarray(recv_counts, np.int64) * width
        sdisp = np.asarray(send_displs, np.int64) * width
        rdisp = np.asarray(recv_displs, np.int64) * width
        sbuf, rbuf = as_bytes(np.ascontiguousarray(send)), as_bytes(out)
        limit = min(self.chunk_bytes, INT_MAX)
        small = max(_reach(sdisp, sbytes), _reach(rdisp, rbytes)) <= limit
        if self.comm.allreduce(small, op=MPI.LAND):
            self._one_call(sbuf, sbytes, sdisp, rbuf, rbytes, rdisp)
        else:
            self._rounds(sbuf, sbytes, sdisp, rbuf, rbytes, rdisp, limit // self.comm.Get_size())

    def _one_call(self, sbuf, sbytes, sdisp, rbuf, rbytes, rdisp) -> None:
        self.comm.Alltoallv([sbuf, (sbytes.tolist(), sdisp.tolist()), MPI.BYTE],
                            [rbuf, (rbytes.tolist(), rdisp.tolist()), MPI.BYTE])

    def _rounds(self, sbuf, sbytes, sdisp, rbuf, rbytes, rdisp, piece: int) -> None:
        piece = max(piece, 1)
        need = int(max(sbytes.max(), rbytes.max()) + piece - 1) // piece
        rounds = self.comm.allreduce(need, op=MPI.MAX)
        for k in range(rounds):
            lo = k * piece
            scount = np.clip(sbytes - lo, 0, piece)
            rcount = np.clip(rbytes - lo, 0, piece)
            stage_s = np.concatenate(
                [sbuf[d + lo : d + lo + c] for d, c in zip(sdisp, scount)]
            )
            stage_r = np.empty(int(rcount.sum()), dtype=np.uint8)
            self._one_call(stage_s, scount, displacements(scount), stage_r, rcount,
                           displacements(rcount))
            for d, c, at in zip(rdisp, rcount, displacements(rcount)):
                rbuf[d + lo : d + lo + c] = stage_r[at : at + c]


def _reach(displs: np.ndarray, nbytes: np.ndarray) -> int:
    """The bytes of a buffer that a call's blocks reach (not its length: a sender's buffer may
    have room past its rows, partition.scattered)."""
    return int((displs + nbytes).max()) if len(nbytes) else 0
