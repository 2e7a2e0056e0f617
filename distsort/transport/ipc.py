"""All-to-all-v between the GPUs of one node by their copy engines: each sender writes its
blocks straight into the receivers' buffers (cudaMemcpyAsync through CUDA IPC mappings).

Why: NCCL moves the blocks with kernels, which share the SMs with the partition's scatters that
run beside them in the chunked exchange, and each slows the other: the transfers lose some of
their rate and the scatters take markedly longer. Copies by the copy engines take no SM: on 2
GPUs (bench/history/ce_probe.py) they moved more than NCCL's send/recv, and kept their rate
beside a sort where NCCL's dropped.

Each call, on every rank, on the current stream:
1. the rank marks its receive buffers free to be written (an interprocess event, `ready`);
2. one allgather tells every rank every buffer (IPC handle of its allocation and the offset in
   it), every rank's counts and receive displacements;
3. per peer, on a stream of its own, the rank waits for the peer's `ready` and copies its
   blocks into the peer's buffers (its own block by a local copy);
4. it marks its copies done (`done`), and after a barrier (every rank has recorded its mark)
   the stream waits for every peer's `done`: when the call's work on the stream is over, every
   block sent to this rank is in.
A wait on an event waits for the record made before the wait was queued; the allgather and the
barrier order those host calls, so no rank waits on a mark of another call.

Calls that move few bytes (the sample, most tests) go through host memory and MPI (staged.py):
two host collectives cost more than the copies save. NCCL moves them faster (about 1 ms a sort
on 2 H200s, bench/RESULTS.md runs 257-258) but takes seconds to start in every process, so it is
started for them only once a process has made PROMOTE_AFTER of them: a program or a service
that sorts again and again pays that start once; a one-sort job (the command line) never. On
more than two GPUs NCCL's exchanges are the faster (bench/RESULTS.md, run 144): there, once
started, it takes every call (`every_call`), and the mappings are closed.
A peer's allocation, once mapped, stays mapped: the memory pool hands the same allocations to
sort after sort, and opening one is costly (tens of ms).
The price: memory stays allocated while another rank maps it, even once its owner's pool frees
it (CUDA calls freeing it first undefined). Three things bound it:
- a mapping that overlaps a peer's new allocation is closed (the peer freed the old one);
- when a call maps a new allocation of a peer, the peer's least recently used mappings that
  the call does not write into are closed until what stays mapped of that peer is at most
  KEEP times what the call writes into: sorts of growing sizes keep about two receive buffers
  of a peer mapped, not all of them, and two sizes that alternate both stay mapped;
- release() (distsort.release) closes every mapping on every rank before any rank goes on to
  free its pool.
Used only where every rank can map every other's memory (one node; checked once at start,
else `small`): by default on 2 ranks with a GPU each (on 4 GPUs the copies lost to NCCL), and
between ranks that share GPUs, which NCCL refuses (transport/choice.py). Ranks on one GPU map
each other's allocations on it like those of a peer GPU.
"""

from __future__ import annotations

import ctypes
import functools
from collections import OrderedDict

import numpy as np
from mpi4py import MPI

from .. import settings
from ..errors import DistsortError, agree
from . import as_bytes, call_layout, displacements, row_bytes

D2D = 3  # cudaMemcpyDeviceToDevice
# A peer's allocations stay mapped up to this many times the bytes of those a call writes into.
KEEP = 2
# Small calls through `small` before `promote` (NCCL) takes them over: an in-memory sort makes
# one or two (the sample, an exchange under DISTSORT_IPC_MIN_BYTES), so the second sort does it.
PROMOTE_AFTER = 2


@functools.cache
def _address_range():
    """cuMemGetAddressRange: an IPC handle names the base of a cudaMalloc allocation, and the
    memory pool hands out pieces of larger ones."""
    fn = ctypes.CDLL("libcuda.so.1").cuMemGetAddressRange_v2
    fn.argtypes = [ctypes.POINTER(ctypes.c_uint64), ctypes.POINTER(ctypes.c_size_t),
                   ctypes.c_uint64]
    return fn


def exported(ptr: int) -> tuple[bytes, int, int, int] | None:
    """(IPC handle of the allocation holding ptr, ptr's offset in it, the allocation's base and
    size); None for no memory."""
    from cupy.cuda import runtime

    if not ptr:
        return None
    base, size = ctypes.c_uint64(), ctypes.c_size_t()
    status = _address_range()(ctypes.byref(base), ctypes.byref(size), ptr)
    if status:
        raise RuntimeError(f"cuMemGetAddressRange failed ({status})")
    return runtime.ipcGetMemHandle(base.value), ptr - base.value, base.value, size.value


class IpcFailed(DistsortError):
    """Some rank cannot map another's memory, or copies into it do not arrive whole."""


class IpcTransport:
    name = "ipc"

    def __init__(self, comm, small, promote=None, every_call: bool = False):
        """small: the transport of calls under DISTSORT_IPC_MIN_BYTES (host memory and MPI);
        promote(): the one that takes them over after PROMOTE_AFTER (NCCL; built then, every
        rank alike), and with every_call the large ones too. Collective, and raises on every
        rank where some rank cannot map another's memory."""
        import cupy
        from cupy.cuda import runtime

        self.cp, self.rt, self.comm, self.small = cupy, runtime, comm, small
        self.promote, self.small_calls, self.every_call = promote, 0, every_call
        self.taken_over = None  # promote()'s transport, where it takes every call
        self.rank, self.size, self.align_rows = comm.Get_rank(), comm.Get_size(), small.align_rows
        self.streams = [cupy.cuda.Stream(non_blocking=True) for _ in range(self.size)]
        # (peer, handle) -> (pointer here, (base, end) in the peer), least recently used first
        self.mapped: OrderedDict = OrderedDict()
        self.calls = 0
        self.ready = self.done = None
        self.peer_events = self._open_events()
        self._check()

    def _all_or_none(self, step):
        """step() (local work, no collective) on every rank; if it raised anywhere, IpcFailed
        on every rank (errors.agree), so that no rank is left alone in a later collective."""
        def local():
            try:
                return step()
            except Exception as exc:  # noqa: BLE001 - reported on every rank by agree
                raise IpcFailed(f"CUDA IPC between the ranks does not work here: {exc}") from None

        return agree(self.comm, local)

    def _open_events(self) -> list:
        """Every peer's (ready, done) events, opened here."""
        cupy, rt = self.cp, self.rt

        def export() -> tuple:
            self.ready, self.done = (cupy.cuda.Event(disable_timing=True, interprocess=True)
                                     for _ in range(2))
            return rt.ipcGetEventHandle(self.ready.ptr), rt.ipcGetEventHandle(self.done.ptr)

        handles = self.comm.allgather(self._all_or_none(export))
        return self._all_or_none(lambda: [
            None if q == self.rank else [rt.ipcOpenEventHandle(h) for h in pair]
            for q, pair in enumerate(handles)])

    def _check(self) -> None:
        """One small exchange by copies, every peer's buffer mapped first: a mapping that
        opens but does not carry the bytes is found here, not in a sort."""
        cp, size = self.cp, self.size
        got = cp.zeros(size * 1024, dtype=np.int64)
        peers = self.comm.allgather(([self._all_or_none(lambda: exported(got.data.ptr))],))
        self._all_or_none(lambda: [self._targets(q, peers) for q in range(size) if q != self.rank])
        counts = np.full(size, 1024, dtype=np.int64)
        # the patterns made on the host, not by CuPy's operators with numbers (arrays.py)
        sent = cp.asarray(np.arange(size * 1024, dtype=np.int64) + self.rank * 10**6)
        self._copy_all([sent], counts, counts, displacements(counts), displacements(counts),
                       [got])
        want = (np.arange(1024)[None, :] + 1024 * self.rank
                + 10**6 * np.arange(size)[:, None]).reshape(-1)

        def verify() -> None:
            if not np.array_equal(cp.asnumpy(got), want):
                raise RuntimeError("copies into another rank's memory did not arrive whole")

        self._all_or_none(verify)

    def alltoallv(self, columns: list, send_counts: np.ndarray, recv_counts: np.ndarray,
                  send_displs=None, recv_displs=None, outs: list | None = None) -> list:
        """Every column's blocks by copies into the receivers' buffers (see the module)."""
        if self.taken_over is not None:
            return self.taken_over.alltoallv(columns, send_counts, recv_counts, send_displs,
                                             recv_displs, outs)
        send_displs, recv_displs, outs = call_layout(self.cp, columns, send_counts, recv_counts,
                                                     send_displs, recv_displs, outs)
        sent = int(np.asarray(send_counts).max(initial=0)) * sum(row_bytes(c) for c in columns)
        if self.comm.allreduce(sent, op=MPI.MAX) < settings.value("DISTSORT_IPC_MIN_BYTES"):
            return self._small().alltoallv(columns, send_counts, recv_counts, send_displs,
                                           recv_displs, outs)
        return self._copy_all(columns, send_counts, recv_counts, send_displs, recv_displs, outs)

    def _small(self):
        """The transport of this small call: `small`, or once PROMOTE_AFTER calls went through
        it, promote()'s (every rank counts the same calls, so all switch at one call); where
        that fails to start (DistsortError on every rank), `small` still."""
        self.small_calls += 1
        if self.promote is not None and self.small_calls > PROMOTE_AFTER:
            promote, self.promote = self.promote, None
            try:
                self.small = promote()
            except DistsortError:
                return self.small
            if self.every_call:  # every rank alike: the same call promotes on every rank
                self.release()
                self.taken_over = self.small
                self.name, self.align_rows = self.small.name, self.small.align_rows
        return self.small

    def _copy_all(self, columns, send_counts, recv_counts, send_displs, recv_displs, outs):
        cp, rt = self.cp, self.rt
        stream = cp.cuda.get_current_stream()
        self.ready.record(stream)
        peers = self._agree(outs, send_counts, recv_counts, recv_displs)
        start, widths = stream.record(), [row_bytes(c) for c in columns]
        # A contiguous copy made here goes back to the pool of this stream, which waits below
        # for the copies that read it before any later allocation on it.
        contiguous = [as_bytes(cp.ascontiguousarray(c)) for c in columns]
        sources = [c.data.ptr for c in contiguous]
        for k in range(self.size):  # each rank starts with a different peer
            q = (self.rank + k) % self.size
            side = self.streams[q]
            side.wait_event(start)
            if q != self.rank:
                rt.streamWaitEvent(side.ptr, self.peer_events[q][0], 0)
            targets = [o.data.ptr for o in outs] if q == self.rank else self._targets(q, peers)
            at = int(peers[q][2][self.rank])  # the row where the peer takes this rank's block
            for src, dst, width in zip(sources, targets, widths):
                nbytes = int(send_counts[q]) * width
                if nbytes:
                    rt.memcpyAsync(dst + at * width, src + int(send_displs[q]) * width, nbytes,
                                   D2D, side.ptr)
            stream.wait_event(side.record())
        self.done.record(stream)
        self.comm.Barrier()  # every rank's `done` is recorded: wait for this call's marks
        for events in self.peer_events:
            if events is not None:
                rt.streamWaitEvent(stream.ptr, events[1], 0)
        self.calls += 1
        return outs

    def release(self) -> None:
        """Close every mapping of the peers' memory, once this rank's copies are done; the
        barrier keeps every rank from going on (to free its pool) while another still maps it."""
        for stream in self.streams:
            stream.synchronize()
        for key in list(self.mapped):
            self._close(key)
        self.comm.Barrier()

    def _agree(self, outs, send_counts, recv_counts, recv_displs) -> list:
        """Every rank's (buffers, counts sent, receive displacements, counts received), after
        checking that every sender's counts match its receivers' (on every rank alike)."""
        mine = ([exported(o.data.ptr) for o in outs], np.asarray(send_counts, np.int64),
                np.asarray(recv_displs, np.int64), np.asarray(recv_counts, np.int64))
        peers = self.comm.allgather(mine)
        sent = np.stack([p[1] for p in peers])
        received = np.stack([p[3] for p in peers]).T
        if not np.array_equal(sent, received):
            raise ValueError("alltoallv: the ranks' send and receive counts disagree")
        return peers

    def _targets(self, q: int, peers: list) -> list:
        """The device pointers of peer q's receive buffers, mapped here once per allocation."""
        targets, used, opened = [], [], False
        for entry in peers[q][0]:
            if entry is None:
                targets.append(0)
                continue
            handle, offset, base, size = entry
            key = (q, handle)
            if key not in self.mapped:
                self._unmap_stale(q, base, base + size)
                self.mapped[key] = (self.rt.ipcOpenMemHandle(handle), (base, base + size))
                opened = True
            self.mapped.move_to_end(key)
            used.append(key)
            targets.append(self.mapped[key][0] + offset)
        if opened:
            self._evict(q, used)
        return targets

    def _unmap_stale(self, q: int, base: int, end: int) -> None:
        """Close the mappings of peer q's allocations that overlap [base, end) there: those
        the peer has freed (copies into them were over before it could)."""
        for key, (_, (lo, hi)) in list(self.mapped.items()):
            if key[0] == q and lo < end and base < hi:
                self._close(key)

    def _evict(self, q: int, used: list) -> None:
        """Close peer q's least recently used mappings but this call's (`used`) while what is
        mapped of q passes KEEP times the bytes of this call's. Run only where the call opened
        a mapping (costly on the host anyway), as closing one in the middle of a sort stalls
        it; and where the pool hands two alternating sizes of sort their own
        allocations again, both stay mapped."""
        def nbytes(key) -> int:
            lo, hi = self.mapped[key][1]
            return hi - lo

        held = sum(nbytes(key) for key in self.mapped if key[0] == q)
        budget = KEEP * sum(nbytes(key) for key in set(used))
        for key in [k for k in self.mapped if k[0] == q and k not in used]:
            if held <= budget:
                break
            held -= nbytes(key)
            self._close(key)

    def _close(self, key) -> None:
        self.rt.ipcCloseMemHandle(self.mapped.pop(key)[0])


def connect(comm, small, nccl=None, every_call: bool = False):
    """The copy-engine transport where every rank (all on one node: transport/choice.py) can
    reach every other's memory, its small calls through `small` (taken over by nccl() after a
    few, where given; with every_call, all calls), else nccl() (default: `small` itself);
    collective."""
    try:
        return IpcTransport(comm, small, nccl, every_call)
    except DistsortError:  # raised on every rank alike (IpcFailed, or RemoteError naming it)
        return nccl() if nccl is not None else small
