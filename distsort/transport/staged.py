"""All-to-all-v of device arrays through host memory and MPI: device to host, MPI, host to
device. It works between any GPUs, shared or not, on any nodes, so it serves where NCCL cannot
(ranks that share a GPU) and CUDA IPC cannot (across nodes, no peer access), and for the small
exchanges beside the copies of ranks that share a GPU, where the two host collectives of a
copy exchange cost more than the bytes.

Only the blocks named by the counts and displacements move, packed back to back on the host,
and only the rows of the received blocks are written: a chunked exchange fills one receive
buffer block by block, call after call.
"""

from __future__ import annotations

from . import call_layout, displacements
from .mpi import MpiTransport


class StagedTransport:
    name = "host"
    # blocks start at multiples of 1024 rows, as over NCCL: the landing sort (local/landing.py)
    # reads the blocks it receives as 16-byte vectors, whichever transport brought them
    align_rows = 1024

    def __init__(self, comm, name: str = "host"):
        self.mpi = MpiTransport(comm)
        self.name = name  # "alone" at one rank, where it is never called

    def release(self) -> None:
        """Nothing kept between calls."""

    def alltoallv(self, columns: list, send_counts, recv_counts, send_displs=None,
                  recv_displs=None, outs: list | None = None) -> list:
        """Every column's blocks through host buffers, on the current stream (the copy to the
        host waits for the work queued on it)."""
        import cupy

        send_displs, recv_displs, outs = call_layout(cupy, columns, send_counts, recv_counts,
                                                     send_displs, recv_displs, outs)
        stream = cupy.cuda.get_current_stream()
        packed = [cupy.asnumpy(_blocks(c, send_displs, send_counts), stream=stream)
                  for c in columns]
        received = self.mpi.alltoallv(packed, send_counts, recv_counts)
        at = displacements(recv_counts)
        for out, host in zip(outs, received):
            rows = cupy.asarray(host)
            for start, count, here in zip(recv_displs, recv_counts, at):
                out[int(start) : int(start + count)] = rows[int(here) : int(here + count)]
        return outs


def _blocks(column, displs, counts):
    """The column's blocks [displs[j], displs[j] + counts[j]), back to back."""
    import cupy

    parts = [column[int(d) : int(d + n)] for d, n in zip(displs, counts)]
    return cupy.concatenate(parts) if parts else column[:0]
