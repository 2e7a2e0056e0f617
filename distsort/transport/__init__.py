"""The transport seam: an all-to-all-v of rows between ranks: host rows by MPI, or read out of
each other's memory (the CPU ranks of one node), or between GPUs by the copy engines (CUDA IPC,
one node) or NCCL.

`alltoallv(columns, send_counts, recv_counts)` takes arrays whose first axis holds rows already
grouped by destination rank (send_counts[j] rows for rank j, in rank order) and returns, for each,
the rows received, grouped by source rank. Counts are in rows and 64-bit; each transport turns
them into bytes and splits what its library cannot take in one call.
"""

from __future__ import annotations

from typing import Protocol

import numpy as np

from ..arrays import ceil_div, module_of


class Transport(Protocol):
    name: str
    align_rows: int  # blocks placed at multiples of this many rows move fastest

    def alltoallv(self, columns: list, send_counts: np.ndarray, recv_counts: np.ndarray,
                  send_displs=None, recv_displs=None, outs: list | None = None) -> list:
        """Send each column's rows for rank j to rank j; return the rows received, by source.

        Displacements (in rows; default: blocks back to back) place each peer's block; with
        recv_displs the receive buffer has recv_displs[-1] + recv_counts[-1] rows, gaps included.
        outs: receive buffers, one per column, to fill (at least that many rows) instead of new
        ones. GPU transports work on the current CUDA stream.
        """

    def release(self) -> None:
        """Give back what the transport keeps from one call to the next for speed (the copy
        engines: mappings of other ranks' memory); the next call takes it again. Collective."""


def row_bytes(a) -> int:
    """Bytes in one row (one element of a 1-D array, one record of a 2-D array)."""
    return a.dtype.itemsize * (int(np.prod(a.shape[1:])) if a.ndim > 1 else 1)


def as_bytes(a):
    """The array as a flat uint8 buffer (a view where it is contiguous, else a contiguous copy)."""
    return a.reshape(-1).view(np.uint8)


def aligned_displacements(counts, align: int):
    """Where each peer's block starts when every block starts at a multiple of align rows
    (int64; host or device arrays alike: chunks.plan lays out chunk 0 on the device). Ufuncs,
    not operators: see arrays.py."""
    xp, rows = module_of(counts), counts.astype(np.int64)
    padded = xp.multiply(ceil_div(rows, align), align)
    return padded.cumsum() - padded


def counts_received(comm, send_counts: np.ndarray) -> np.ndarray:
    """How many rows each rank sends this one, from the rows it sends each (one Alltoall)."""
    recv_counts = np.empty_like(send_counts)
    comm.Alltoall(send_counts, recv_counts)
    return recv_counts


def displacements(counts: np.ndarray) -> np.ndarray:
    """Exclusive prefix sum (int64): where each peer's block starts."""
    out = np.zeros(len(counts), dtype=np.int64)
    np.cumsum(counts[:-1], out=out[1:])
    return out


def call_layout(xp, columns: list, send_counts, recv_counts, send_displs, recv_displs,
                outs: list | None) -> tuple:
    """One alltoallv call's (send_displs, recv_displs, outs): displacements as given or blocks
    back to back, receive buffers as given or new ones of xp that hold every block."""
    send_displs = displacements(send_counts) if send_displs is None else send_displs
    recv_displs = displacements(recv_counts) if recv_displs is None else recv_displs
    rows = int(recv_displs[-1] + recv_counts[-1])
    outs = outs or [xp.empty((rows,) + c.shape[1:], dtype=c.dtype) for c in columns]
    return send_displs, recv_displs, outs
