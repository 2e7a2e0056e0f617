"""An output mapping's pages faulted in ahead of its writes (io/ahead.py, parallel.FileRange)."""

from __future__ import annotations

import ctypes
import mmap
import os

import numpy as np
import pytest

from distsort.io import ahead, libc, parallel
from distsort.io.parallel import FileRange, reserve

PAGE = mmap.PAGESIZE


def _resident(view: np.ndarray) -> np.ndarray:
    """Which pages from the one view starts in are in memory (mincore)."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p]
    address = view.ctypes.data - view.ctypes.data % PAGE
    length = view.ctypes.data + len(view) - address
    pages = np.zeros(-(-length // PAGE), np.uint8)
    if libc.mincore(address, length, pages.ctypes.data) != 0:
        pytest.skip(f"mincore: {os.strerror(ctypes.get_errno())}")
    return pages & 1


def _reserved(path, nbytes: int, fill: bytes = b"") -> int:
    fd = os.open(path, os.O_RDWR | os.O_CREAT)
    if not reserve(fd, nbytes):
        os.close(fd)
        pytest.skip("this file system reserves no blocks: nothing is mapped")
    os.pwrite(fd, fill, 0)
    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)  # written out of the page cache
    return fd


def test_a_share_that_starts_mid_page_is_faulted_in_and_keeps_its_bytes(tmp_path):
    nbytes, share = 64 * PAGE, (PAGE + 100, 40 * PAGE + 7)  # not on page bounds, as after a header
    fd = _reserved(tmp_path / "f", nbytes, b"kept")
    try:
        mapping = mmap.mmap(fd, nbytes)
        view = np.frombuffer(mapping, np.uint8)
        target = view[slice(*share)]
        if _resident(target).all():
            pytest.skip("the file's pages are in memory before any write (tmpfs?)")
        madvise = libc.madvise()
        if madvise is None or madvise(view.ctypes.data + nbytes - PAGE, PAGE,
                                      ahead.MADV_POPULATE_WRITE):
            pytest.skip("this kernel refuses MADV_POPULATE_WRITE (before Linux 5.14)")
        pages = ahead.PagesAhead(target, threads=3)
        for thread in pages._threads:  # until every piece is in
            thread.join()
        assert not pages._stopped  # not refused: whole pages asked for
        assert _resident(target).all()
        assert bytes(view[:4]) == b"kept" and not view[4:].any()  # no byte changed
        pages.stop()
        del view, target, pages
        mapping.close()
    finally:
        os.close(fd)


def test_writes_land_whether_or_not_the_pages_came_in_first(tmp_path, monkeypatch):
    nbytes = 256 * PAGE
    data = np.random.default_rng(0).integers(0, 256, nbytes - 300, dtype=np.uint8)
    for refused in (False, True):
        if refused:  # a kernel without MADV_POPULATE_WRITE: the threads stop, writes go on
            monkeypatch.setattr(libc, "madvise", lambda: lambda *args: -1)
        path = tmp_path / f"out{refused}"
        fd = _reserved(path, nbytes)
        try:
            target = FileRange(fd, 300, nbytes - 300, True, ahead=(0, nbytes - 300))
            target.write(data[: len(data) // 2], 0)  # ends the faults ahead, wherever they are
            target.write(data[len(data) // 2 :], len(data) // 2)
            target.close()
            target.close()  # twice is harmless
        finally:
            os.close(fd)
        assert np.array_equal(np.fromfile(path, np.uint8)[300:], data)


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity") or (os.cpu_count() or 1) < 2,
                    reason="needs two cores and thread affinity")
def test_the_threads_are_not_held_to_the_core_the_launcher_bound_the_rank_to(monkeypatch):
    seen = []

    def madvise(*args):  # notes the cores it may run on; refuses, so the thread stops
        seen.append(os.sched_getaffinity(0))
        return -1

    monkeypatch.setattr(libc, "madvise", lambda: madvise)
    everywhere = os.sched_getaffinity(0)
    os.sched_setaffinity(0, [min(everywhere)])  # as Open MPI binds 1 or 2 ranks
    try:
        view = np.zeros(4 * PAGE, np.uint8)
        pages = ahead.PagesAhead(view, threads=1)
        for thread in pages._threads:  # it stops at the refusal
            thread.join()
    finally:
        os.sched_setaffinity(0, everywhere)
    assert seen and len(seen[0]) == (os.cpu_count() or 1)


def test_an_empty_share_faults_nothing_not_even_its_neighbours_page(tmp_path):
    fd = _reserved(tmp_path / "f", 4 * PAGE)
    try:
        mapping = mmap.mmap(fd, 4 * PAGE)
        view = np.frombuffer(mapping, np.uint8)
        pages = ahead.PagesAhead(view[PAGE + 100 : PAGE + 100], threads=2)
        assert pages._threads == []
        pages.stop()
        del view, pages
        mapping.close()
    finally:
        os.close(fd)


def test_no_more_is_faulted_in_than_the_kernel_lets_stay_dirty(tmp_path, monkeypatch):
    """The faulted pages are dirty (zeros): past the room the kernel allows before it writes
    dirty pages back, it would write the zeros to disk, then the data. So only the share's
    first bytes, as many as one of the node's writers' room."""
    assert ahead.room(1) > 0 and ahead.room(4) <= ahead.room(1) // 4 + 1  # read from /proc
    nbytes = 64 * PAGE
    monkeypatch.setattr(parallel, "room", lambda sharers: 8 * PAGE // sharers)
    fd = _reserved(tmp_path / "f", nbytes)
    try:
        target = FileRange(fd, 0, nbytes, True, sharers=2, ahead=(PAGE, nbytes))
        assert target._ahead._base == target._bytes.ctypes.data + PAGE
        assert target._ahead._size == 4 * PAGE  # the room of one of 2 sharers
        target.close()
    finally:
        os.close(fd)


def _mapped(view: np.ndarray) -> np.ndarray:
    """Which pages from the one view starts in are mapped into this process (/proc/self/pagemap:
    bit 63 of each page's entry)."""
    first = view.ctypes.data // PAGE
    pages = -(-(view.ctypes.data + len(view)) // PAGE) - first
    with open("/proc/self/pagemap", "rb") as f:
        f.seek(8 * first)
        entries = np.frombuffer(f.read(8 * pages), np.uint64)
    return (entries >> np.uint64(63)).astype(bool)


@pytest.mark.skipif(not os.path.exists("/proc/self/pagemap"), reason="needs /proc/self/pagemap")
def test_written_pages_are_let_go_of_behind_the_writes_and_keep_their_bytes(tmp_path):
    """Each write's whole pages are unmapped by the thread behind it (the close then has few
    left); pages a later write shares stay mapped; every byte reaches the file."""
    nbytes = 64 * PAGE
    data = np.random.default_rng(1).integers(0, 256, nbytes - 300, dtype=np.uint8)
    fd = _reserved(tmp_path / "f", nbytes)
    try:
        target = FileRange(fd, 300, nbytes - 300, True)
        half = len(data) // 2 + 77  # not on a page: the page it ends in is the next write's too
        target.write(data[:half], 0)
        target._behind.stop()  # the pages given so far are let go of
        view = target._bytes
        written = _mapped(view[:half])
        assert not written[1:-1].any()  # whole pages of the write: unmapped
        assert written[-1]  # shared with the next write: left mapped
        target.write(data[half:], half)
        assert np.array_equal(view[: len(data)], data)  # touched again: mapped again, same bytes
        del view, written
        target.close()
    finally:
        os.close(fd)
    assert np.array_equal(np.fromfile(tmp_path / "f", np.uint8)[300:], data)


def test_a_view_waiting_to_be_let_go_of_keeps_its_mapping(tmp_path, monkeypatch):
    """A FileRange dropped unclosed while its pages wait to be let go of stays mapped until
    they are: a call on a range unmapped meanwhile (and maybe mapped anew) would zero memory
    that is not the file's. After stop() no view is taken."""
    import gc
    import threading

    inside, go, results = threading.Event(), threading.Event(), []
    madvise = libc.madvise()

    def held_up(address, size, advice):
        inside.set()
        go.wait()
        results.append(madvise(address, size, advice))
        return results[-1]

    monkeypatch.setattr(libc, "madvise", lambda: held_up)
    fd = _reserved(tmp_path / "f", 64 * PAGE)
    try:
        target = FileRange(fd, 0, 64 * PAGE, True)
        target.write(np.ones(32 * PAGE, np.uint8), 0)
        inside.wait()  # the thread holds the write's view, in its call
        behind = target._behind
        del target  # never closed
        gc.collect()
        go.set()
        behind.stop()
        assert results == [0]  # its pages were still this mapping's
        behind.written(np.zeros(4 * PAGE, np.uint8))
        assert not behind._views and not behind._running
    finally:
        os.close(fd)
    assert (np.fromfile(tmp_path / "f", np.uint8)[: 32 * PAGE] == 1).all()


def test_the_close_waits_for_every_write_s_pages_to_be_let_go_of(tmp_path, monkeypatch):
    calls, madvise = [], libc.madvise()
    monkeypatch.setattr(libc, "madvise", lambda: lambda *args: calls.append(madvise(*args))
                        or calls[-1])
    fd = _reserved(tmp_path / "f", 64 * PAGE)
    try:
        target = FileRange(fd, 0, 64 * PAGE, True)
        for k in range(4):
            target.write(np.full(16 * PAGE, k, np.uint8), 16 * PAGE * k)
        target.close()
        assert calls == [0] * 4 and not target._behind._running
    finally:
        os.close(fd)
    assert (np.fromfile(tmp_path / "f", np.uint8) == np.repeat(np.arange(4), 16 * PAGE)).all()


@pytest.mark.parametrize("asked", [True, False])
def test_a_writer_faults_its_share_in_ahead_only_where_asked(tmp_path, asked):
    """ShardWriter(ahead=False) (a CPU job's: the faults would take the sort's cores) maps its
    output but starts no faults ahead; either way the file comes out whole."""
    from mpi4py import MPI

    from distsort.io import FileFormat, ShardWriter

    data = np.arange(1 << 20, dtype=np.uint32)
    fmt = FileFormat("npy", np.dtype(np.uint32))
    with ShardWriter(tmp_path / "out.npy", fmt, len(data), MPI.COMM_SELF, ahead=asked) as w:
        if not w._mapped:
            pytest.skip("this file system maps no outputs: nothing is faulted in ahead")
        assert (w._target._ahead is not None) == asked
        w.write(0, data)
        w.commit()
    np.testing.assert_array_equal(np.load(tmp_path / "out.npy"), data)
