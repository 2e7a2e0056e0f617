"""Which bytes of a range the device copies straight out of the page cache (io/direct.py) and
which are left to the reads: the page arithmetic, and the page cache's residency, on CPUs.
The copies themselves: tests/io/test_staging_gpu.py."""

from __future__ import annotations

import mmap
import os
from types import SimpleNamespace

import numpy as np
import pytest

from distsort.io import FileFormat, InputFile, direct

PAGE = mmap.PAGESIZE


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
    left = direct.copy_cached(source, start, stop, SimpleNamespace(data=SimpleNamespace(ptr=0)),
                              None)
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


def test_bytes_to_swap_are_never_copied_as_they_lie(monkeypatch):
    monkeypatch.setattr(direct, "_copy_pages", lambda *args: pytest.fail("copied"))
    source = InputFile("unused", FileFormat.raw(">u4"), 10 * PAGE)
    assert direct.copy_cached(source, 0, 10 * PAGE, None, None) is None


def test_a_file_just_written_is_resident_and_one_dropped_is_not(tmp_path):
    path = tmp_path / "f.bin"
    data = np.arange(64 * PAGE, dtype=np.uint8)
    data.tofile(path)
    with open(path, "rb") as f:
        view = mmap.mmap(f.fileno(), 0, prot=mmap.PROT_READ)
        address = np.frombuffer(view, np.uint8).ctypes.data
        try:
            assert direct._resident(address, len(data))
            os.fsync(f.fileno())  # clean pages may be dropped
            os.posix_fadvise(f.fileno(), 0, 0, os.POSIX_FADV_DONTNEED)
            if direct._resident(address, len(data)):
                pytest.skip("this file system keeps the file's pages (tmpfs)")
            assert not direct._resident(address, len(data))
        finally:
            view.close()
