"""Which peer allocations the copy-engine transport keeps mapped (transport/ipc.py), on the host:
the CUDA calls are faked, the policy is the transport's own; and when NCCL takes over its small
calls."""

from __future__ import annotations

import itertools
from collections import OrderedDict

import pytest

from distsort.errors import DistsortError
from distsort.transport import ipc

MIB = 1 << 20


class FakeRuntime:
    """ipcOpenMemHandle / ipcCloseMemHandle that record what is mapped."""

    def __init__(self):
        self.open: dict[int, bytes] = {}
        self.opened = 0
        self._pointers = itertools.count(1 << 40, 1 << 32)

    def ipcOpenMemHandle(self, handle: bytes) -> int:
        ptr = next(self._pointers)
        self.open[ptr] = handle
        self.opened += 1
        return ptr

    def ipcCloseMemHandle(self, ptr: int) -> None:
        del self.open[ptr]


@pytest.fixture
def transport():
    t = object.__new__(ipc.IpcTransport)  # the mapping policy alone: no GPU, no communicator
    t.rt, t.mapped = FakeRuntime(), OrderedDict()
    return t


class Peer:
    """A peer's allocations: each new one at a fresh address, or at a given one."""

    def __init__(self):
        self.next_base = 1 << 36
        self.handles = itertools.count()

    def alloc(self, size: int, base: int | None = None) -> tuple:
        if base is None:
            base, self.next_base = self.next_base, self.next_base + size
        return (f"h{next(self.handles)}".encode(), 0, base, size)


def call(transport, q: int, *entries) -> list:
    """One call's targets in peer q (of 3 ranks; this one is rank 0)."""
    peers = [([],), ([],), ([],)]
    peers[q] = (list(entries),)
    return transport._targets(q, peers)


def mapped_bytes(transport, q: int) -> int:
    return sum(hi - lo for (peer, _), (_, (lo, hi)) in transport.mapped.items() if peer == q)


def test_sorts_of_growing_sizes_keep_about_two_receive_buffers_mapped(transport):
    peer = Peer()
    sizes = [k * 64 * MIB for k in range(4, 11)]
    for size in sizes:
        buffer = peer.alloc(size)
        call(transport, 1, buffer)
        assert (1, buffer[0]) in transport.mapped
        assert mapped_bytes(transport, 1) <= ipc.KEEP * size
    # the last two stay: the one before fits in twice the last one's bytes
    assert mapped_bytes(transport, 1) == sizes[-1] + sizes[-2]
    assert len(transport.rt.open) == 2


def test_two_sizes_that_alternate_stay_mapped(transport):
    peer = Peer()
    small, large = peer.alloc(64 * MIB), peer.alloc(100 * MIB)
    for _ in range(4):
        call(transport, 1, small)
        call(transport, 1, large)
    assert transport.rt.opened == 2
    assert len(transport.mapped) == 2


def test_a_new_pair_of_columns_closes_the_least_recently_used_first(transport):
    peer = Peer()
    old_keys, old_values = peer.alloc(64 * MIB), peer.alloc(64 * MIB)
    call(transport, 1, old_keys, old_values)
    call(transport, 1, old_keys)  # the keys' allocation used more recently
    keys, values = peer.alloc(64 * MIB), peer.alloc(32 * MIB)
    call(transport, 1, keys, values)
    # 96 MiB this call: 192 may stay mapped, so the keys' 64 stay and the values' go
    assert set(transport.mapped) == {(1, keys[0]), (1, values[0]), (1, old_keys[0])}


def test_one_peers_new_allocation_leaves_another_peers_mappings(transport):
    first, second = Peer(), Peer()
    kept = [second.alloc(256 * MIB) for _ in range(3)]
    for buffer in kept:
        call(transport, 2, buffer)
    for k in range(4, 8):
        call(transport, 1, first.alloc(k * 64 * MIB))
    assert all((2, buffer[0]) in transport.mapped for buffer in kept[1:])
    assert mapped_bytes(transport, 2) == 512 * MIB


def test_a_new_allocation_over_a_freed_ones_range_closes_its_mapping(transport):
    peer = Peer()
    old = peer.alloc(512 * MIB)
    call(transport, 1, old)
    new = peer.alloc(64 * MIB, base=old[2] + 128 * MIB)  # the peer freed old, then allocated
    call(transport, 1, new)
    assert set(transport.mapped) == {(1, new[0])}
    assert len(transport.rt.open) == 1


def test_targets_point_at_the_offsets_in_the_mapped_allocation(transport):
    handle, _, base, size = Peer().alloc(64 * MIB)
    first, second = call(transport, 1, (handle, 4096, base, size), None)
    ptr = transport.mapped[1, handle][0]
    assert (first, second) == (ptr + 4096, 0)
    assert call(transport, 1, (handle, 8192, base, size)) == [ptr + 8192]


@pytest.mark.parametrize("starts", [True, False])
def test_small_calls_go_to_nccl_once_a_process_has_made_a_few(starts):
    """The first PROMOTE_AFTER small calls go through host memory; NCCL, started once at the
    next, takes the rest; where it fails to start (an agreed DistsortError) host memory still."""
    started = []

    def nccl():
        started.append(1)
        if not starts:
            raise DistsortError("NCCL could not connect the ranks' GPUs")
        return "nccl"

    t = object.__new__(ipc.IpcTransport)
    t.small, t.promote, t.small_calls, t.every_call = "host", nccl, 0, False
    used = [t._small() for _ in range(ipc.PROMOTE_AFTER + 3)]
    after = "nccl" if starts else "host"
    assert used == ["host"] * ipc.PROMOTE_AFTER + [after] * 3 and started == [1]


class FakeNccl:
    name, align_rows = "nccl", 512

    def alltoallv(self, columns, *layout):
        return ["by nccl", len(columns)]


@pytest.mark.parametrize("starts", [True, False])
def test_on_more_gpus_nccl_once_started_takes_every_call_and_the_mappings_go(starts):
    """every_call (more than AUTO_IPC_RANKS GPUs): once NCCL starts, large calls go to it too,
    the report names it, blocks align as it wants, and the copy engines' mappings are closed
    (release); where it fails to start, nothing changes."""
    def nccl():
        if not starts:
            raise DistsortError("NCCL could not connect the ranks' GPUs")
        return FakeNccl()

    t = object.__new__(ipc.IpcTransport)
    t.small, t.promote, t.small_calls, t.every_call = "host", nccl, 0, True
    t.taken_over, t.align_rows, released = None, 1024, []
    t.release = lambda: released.append(1)
    for _ in range(ipc.PROMOTE_AFTER + 1):
        t._small()
    if starts:
        assert t.taken_over is not None and released == [1]
        assert (t.name, t.align_rows) == ("nccl", 512)
        assert t.alltoallv([1, 2], None, None) == ["by nccl", 2]  # a large call: NCCL's too
    else:
        assert t.taken_over is None and released == [] and (t.name, t.align_rows) == ("ipc",
                                                                                      1024)
