"""Which bytes of a range the device copies straight out of the page cache (io/direct.py) and
which are left to the reads: the page arithmetic, and the page cache's residency, on CPUs.
The copies themselves: tests/io/test_staging_gpu.py."""

from __future__ import annotations

import mmap
import os
from types import SimpleNamespace

import numpy as np
import pytest

from distsort.io import FileFormat, InputFile, direct, libc

PAGE = mmap.PAGESIZE


@pytest.fixture(autouse=True)
def any_size(monkeypatch):
    """Ranges of every size take the page cache's way here (MIN_BYTES: a speed threshold)."""
    monkeypatch.setattr(direct, "MIN_BYTES", 0)


def _device_bytes(n: int, contiguous: bool = True) -> SimpleNamespace:
    """What copy_cached reads of a CuPy uint8 array: its address, size and layout."""
    return SimpleNamespace(data=SimpleNamespace(ptr=0), size=n,
                           flags=SimpleNamespace(c_contiguous=contiguous))


@pytest.mark.parametrize("itemsize, offset, start, stop", [
    (4, 128, 0, 10_000),  # an .npy header: the first page partial
    (10, 0, 3, 5_001),  # records across page ends
    (100, 80, 41, 41 + 3 * PAGE),
    (8, 0, 512, 1536),  # page-aligned both ends: nothing left to read
    (12, 7, 0, PAGE // 12),  # less than a whole page: nothing copied
])
def test_the_copied_pages_and_the_ranges_left_cover_the_range_once(monkeypatch, itemsize,
                                                                    offset, start, stop):
    copied = []

    def copy_pages(path, lo, hi, target, stream):
        copied.append((lo, hi, target))
        return True

    monkeypatch.setattr(direct, "_copy_pages", copy_pages)
    fmt = FileFormat.records(itemsize, 1) if itemsize in (10, 100) else FileFormat.raw(
        {4: "u4", 8: "u8", 12: "S12"}[itemsize], payload=itemsize == 12)
    source = InputFile("unused", fmt, stop + 10, offset)
    left = direct.copy_cached(source, start, stop, _device_bytes((stop - start) * itemsize), None)
    first, last = offset + start * itemsize, offset + stop * itemsize
    covered = np.zeros(last - first, bool)
    if left is None:  # nothing whole to copy
        assert not copied and last // PAGE * PAGE <= -(-first // PAGE) * PAGE
        return
    (lo, hi, target), = copied
    assert lo % PAGE == 0 and hi % PAGE == 0 and target == lo - first  # into its bytes of out
    covered[lo - first : hi - first] = True
    for a, b in left:
        assert start <= a <= b <= stop
        covered[(a - start) * itemsize : (b - start) * itemsize] = True
    assert covered.all()
    assert sum(b - a for a, b in left) * itemsize < 2 * (PAGE + itemsize)  # the ends only


@pytest.mark.parametrize("case", ["bytes to swap", "past the end", "out too short",
                                  "out not contiguous", "small"])
def test_what_the_reads_must_swap_or_refuse_is_never_copied_as_it_lies(monkeypatch, case):
    """Byte orders to swap, ranges or arrays the reads would refuse (with their error), and
    ranges below MIN_BYTES."""
    monkeypatch.setattr(direct, "_copy_pages", lambda *args: pytest.fail("copied"))
    if case == "small":
        monkeypatch.setattr(direct, "MIN_BYTES", 40 * PAGE + 1)
    n = 10 * PAGE
    source = InputFile("unused", FileFormat.raw(">u4" if case == "bytes to swap" else "u4"), n)
    stop = n + PAGE if case == "past the end" else n
    out = _device_bytes(4 * stop - 4 * (case == "out too short"), case != "out not contiguous")
    assert direct.copy_cached(source, 0, stop, out, None) is None


def test_a_file_this_process_may_not_see_the_residency_of_is_left_to_the_reads(tmp_path,
                                                                                monkeypatch):
    """mincore says every page of a file the process neither owns nor may write is in memory
    (Linux 5.2 on): such a file's pages, maybe on disk, are not locked to be copied."""
    path = tmp_path / "f.bin"
    np.zeros(16 * PAGE, np.uint8).tofile(path)
    monkeypatch.setattr(libc, "resident", lambda *args: pytest.fail("asked mincore"))
    monkeypatch.setattr(direct.os, "geteuid", lambda: os.stat(path).st_uid + 1)
    monkeypatch.setattr(direct.os, "access", lambda *args: False)
    source = InputFile(path, FileFormat.raw("u1"), 16 * PAGE)
    assert direct.copy_cached(source, 0, 16 * PAGE, _device_bytes(16 * PAGE), None) is None


def test_a_file_just_written_is_resident_and_one_dropped_is_not(tmp_path):
    path = tmp_path / "f.bin"
    data = np.arange(64 * PAGE, dtype=np.uint8)
    data.tofile(path)
    with open(path, "rb") as f:
        view = mmap.mmap(f.fileno(), 0, prot=mmap.PROT_READ)
        address = np.frombuffer(view, np.uint8).ctypes.data
        try:
            assert libc.resident(address, len(data))
            os.fsync(f.fileno())  # clean pages may be dropped
            os.posix_fadvise(f.fileno(), 0, 0, os.POSIX_FADV_DONTNEED)
            if libc.resident(address, len(data)):
                pytest.skip("this file system keeps the file's pages (tmpfs)")  # or hides them
            assert not libc.resident(address, len(data))
        finally:
            view.close()
