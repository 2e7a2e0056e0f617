"""The finish of rows placed where they landed (partition.scattered, exchange._into_place):
the pages of their one allocation that the sorted result does not hold go back at once."""

from __future__ import annotations

import mmap

import numpy as np
import pytest

from distsort.io import libc
from distsort.steps import finish


@pytest.mark.parametrize("where", ["head", "tail", "elsewhere"])
def test_the_pages_beside_the_result_go_back_and_the_result_stays(where):
    """Whole pages outside the result read zero (given back: private pages come back as zeros);
    the result, and rows that share a page with it, keep their values; a result in memory of
    its own (an empty head is a buffer of its own too) leaves none of the rows' pages, and
    nothing beyond them is touched."""
    if libc.madvise() is None:
        pytest.skip("no madvise here: the pages go with the result")
    page, words = mmap.PAGESIZE, mmap.PAGESIZE // 4
    memory = np.ones(64 * words, np.uint32)
    head, tail = memory[: 30 * words + 5], memory[30 * words + 5 :]
    if where == "elsewhere":
        out = np.ones(20 * words, np.uint32)
    else:  # the radix sort's passes may end in either part
        out = (head if where == "head" else tail)[3 * words + 7 : 20 * words + 9]
    finish._let_go_beside(out, tail)
    assert (out == 1).all()
    base, top = memory.ctypes.data, memory.ctypes.data + memory.nbytes
    start, end = (top, top) if where == "elsewhere" else (out.ctypes.data,
                                                          out.ctypes.data + out.nbytes)
    first = (base + 4 * np.arange(len(memory))) // page * page  # each row's page
    gone = ((first >= base) & (first + page <= start)) | ((first >= end) & (first + page <= top))
    assert gone.sum() >= 30 * words  # most of the memory was outside the result
    np.testing.assert_array_equal(memory, np.where(gone, 0, 1))
