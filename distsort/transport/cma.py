"""All-to-all-v of host arrays between the ranks of one node by cross-memory attach: each rank
reads the blocks sent to it straight out of the senders' memory (Linux process_vm_readv), on
its pool's threads. One copy of each byte, made by its receiver, all pairs at once, where MPI's
shared-memory path copies each byte into a shared segment and out again, a fragment at a time
(Open MPI moved 2^28 keys between 2 ranks of a 16-core node at ~0.8 GB/s a rank:
bench/RESULTS.md, run 328).

The kernel must let a rank read its peers' memory (the same user, no seccomp profile or Yama
setting that refuses it, one PID namespace): connect() reads a token from every peer before any
sort relies on it, and where any read fails or brings the wrong token, every rank keeps MPI.
A sender's buffers stay untouched until every receiver has read them: alltoallv returns on no
rank before all have. connect() then writes a token into every peer too: where every write
lands (`writes`), the CPU partition writes plain keys straight into their receivers' memory
(local/push.c, process_vm_writev) and leaves this transport nothing to move.
"""

from __future__ import annotations

import ctypes
import functools
import os

import numpy as np
from mpi4py import MPI

from .. import workers
from ..errors import DistsortError, agree
from ..io import libc
from . import call_layout, choice, row_bytes

PIECE = 16 << 20  # bytes a thread reads in one call: pieces of the large blocks go to all threads


class _Iovec(ctypes.Structure):
    _fields_ = [("base", ctypes.c_void_p), ("len", ctypes.c_size_t)]


def _vm(name: str):
    """The C library's process_vm_readv or process_vm_writev, or None where there is none."""
    iov = ctypes.POINTER(_Iovec)
    return libc.function(name, (ctypes.c_int, iov, ctypes.c_ulong, iov, ctypes.c_ulong,
                                ctypes.c_ulong), ctypes.c_ssize_t)


def read_from(pid: int, remote: int, local: int, nbytes: int) -> None:
    """Copy nbytes at address `remote` of process pid to address `local` of this one. Raises
    OSError where the kernel refuses or the bytes are not there."""
    _move("process_vm_readv", "reading", pid, remote, local, nbytes)


def write_to(pid: int, remote: int, local: int, nbytes: int) -> None:
    """Copy nbytes at address `local` of this process to address `remote` of process pid.
    Raises OSError where the kernel refuses or the memory is not there."""
    _move("process_vm_writev", "writing", pid, remote, local, nbytes)


def _move(name: str, doing: str, pid: int, remote: int, local: int, nbytes: int) -> None:
    call = _vm(name)
    if call is None:
        raise OSError(f"this system has no {name}")
    done = 0
    while done < nbytes:
        mine = _Iovec(local + done, nbytes - done)
        theirs = _Iovec(remote + done, nbytes - done)
        got = call(pid, ctypes.byref(mine), 1, ctypes.byref(theirs), 1, 0)
        if got <= 0:
            err = ctypes.get_errno() if got < 0 else 0
            raise OSError(err, f"{doing} process {pid}'s memory: {os.strerror(err)}")
        done += got


def connect(comm) -> CmaTransport | None:
    """A CmaTransport where every rank of comm reads every other's memory, else None (on every
    rank alike); its `writes`: whether every rank writes every other's too (a seccomp profile
    may allow one call and not the other), the same on every rank. Collective."""
    token = np.frombuffer(os.urandom(8), np.uint64).copy()
    inbox = np.zeros(comm.Get_size(), np.uint64)  # slot q: rank q's token, written by q
    peers = comm.allgather((os.getpid(), token.ctypes.data, int(token[0]), inbox.ctypes.data))
    got = np.zeros(1, np.uint64)
    try:
        for pid, address, expected, _ in peers:
            read_from(pid, address, got.ctypes.data, got.nbytes)
            if int(got[0]) != expected:  # another process under that PID: another namespace
                raise OSError(f"process {pid} is not the rank that gave its PID")
        works = True
    except OSError:
        works = False
    if not comm.allreduce(works, op=MPI.LAND):  # every token read: they may go now
        return None
    slot = inbox.itemsize * comm.Get_rank()
    try:
        for pid, _, _, box in peers:
            write_to(pid, box + slot, token.ctypes.data, token.nbytes)
    except OSError:
        pass  # a slot left empty says so
    comm.Barrier()  # every write made before any inbox is read
    written = [int(t) for _, _, t, _ in peers] == [int(t) for t in inbox]
    return CmaTransport(comm, [pid for pid, _, _, _ in peers],
                        writes=comm.allreduce(written, op=MPI.LAND))


class CmaTransport:
    name = choice.CMA
    align_rows = 1  # blocks back to back

    def __init__(self, comm, pids: list[int], writes: bool = False):
        self.comm, self.pids = comm, pids
        self.writes = writes  # every rank writes every other's memory (partition's push)

    def release(self) -> None:
        """Nothing kept between calls."""

    def receivers(self, mine: np.ndarray) -> tuple[list[int], np.ndarray]:
        """Where this rank writes its rows for each rank (a push: `writes`), given `mine`, the
        addresses at which each rank's rows land here: every rank's PID (0 for this rank, whose
        own rows are copied, not written across) and the address its rows land at there.
        Collective."""
        theirs = np.empty_like(mine)
        self.comm.Alltoall(mine, theirs)
        pids = list(self.pids)
        pids[self.comm.Get_rank()] = 0
        return pids, theirs

    def alltoallv(self, columns: list, send_counts: np.ndarray, recv_counts: np.ndarray,
                  send_displs=None, recv_displs=None, outs: list | None = None) -> list:
        send_displs, recv_displs, outs = call_layout(np, columns, send_counts, recv_counts,
                                                     send_displs, recv_displs, outs)
        sends = [np.ascontiguousarray(c) for c in columns]  # held until every peer has read
        widths = [row_bytes(c) for c in sends]
        mine = np.array([[s.ctypes.data + int(d) * w for s, w in zip(sends, widths)]
                         for d in send_displs], dtype=np.uint64).reshape(len(send_displs),
                                                                         len(sends))
        theirs = np.empty_like(mine)  # row q: where rank q's blocks for this rank lie
        self.comm.Alltoall(mine, theirs)
        # every rank raises where any read fails, and none returns before all have read
        agree(self.comm, lambda: self._read(self._reads(theirs, outs, widths, recv_counts,
                                                        recv_displs)))
        return outs

    def _reads(self, theirs: np.ndarray, outs: list, widths: list, recv_counts,
               recv_displs) -> list[tuple]:
        """read_from's arguments for every block this rank receives."""
        if not all(out.flags.c_contiguous and out.flags.writeable for out in outs):
            raise ValueError("receive buffers must be C-contiguous and writeable")
        reads = []
        for q, (count, at) in enumerate(zip(recv_counts, recv_displs)):
            for c, (out, width) in enumerate(zip(outs, widths)):
                reads += _pieces(self.pids[q], int(theirs[q, c]),
                                 out.ctypes.data + int(at) * width, int(count) * width)
        return reads

    @staticmethod
    def _read(reads: list) -> None:
        """Every read, then the first failure's error: no read may still be writing into the
        receive buffers once this returns or raises."""
        failed: list[OSError] = []

        def one(*args) -> None:
            try:
                read_from(*args)
            except OSError as exc:
                failed.append(exc)

        workers.each([functools.partial(one, *r) for r in reads])
        if failed:
            raise DistsortError(f"the exchange could not read a peer rank's memory "
                                f"({failed[0]})")


def _pieces(pid: int, remote: int, local: int, nbytes: int) -> list[tuple]:
    """read_from's arguments for [0, nbytes) of a block, in pieces of at most PIECE bytes."""
    return [(pid, remote + lo, local + lo, min(PIECE, nbytes - lo))
            for lo in range(0, nbytes, PIECE)]
