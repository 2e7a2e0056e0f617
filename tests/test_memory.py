"""Host memory helpers: what is left (cgroup-aware), the page-lock refusal, first touch."""

from __future__ import annotations

import sys

import numpy as np
import pytest

from distsort import memory, workers
from distsort.errors import DistsortError


def test_available_memory_is_positive_and_within_the_cgroup():
    assert 0 < memory.available_host_memory() <= memory.cgroup_room() <= sys.maxsize


def test_page_locking_more_than_is_left_is_one_clear_error(monkeypatch):
    monkeypatch.setattr(memory, "available_host_memory", lambda: 3 << 30)
    with pytest.raises(DistsortError, match="cannot page-lock 4.29 GB.*2.15 GB are left"):
        memory.host_empty((1 << 30,), np.uint32, pinned=True)  # refused before CuPy is asked


@pytest.mark.parametrize("threads", [1, 3])
def test_first_touch_writes_every_page(monkeypatch, threads):
    """However the pieces fall on the pool's threads, no page-long stretch goes unwritten."""
    monkeypatch.setattr(memory, "TOUCH_PIECE", 3 * memory.PAGE + 1)
    workers.use_threads(threads)
    try:
        raw = np.full(40 * memory.PAGE + 5, 7, np.uint8)
        memory.first_touch(raw)
    finally:
        workers.use_threads(8)
    written = np.flatnonzero(raw == 0)
    assert written[0] == 0 and len(raw) - written[-1] <= memory.PAGE
    assert np.diff(written).max() <= memory.PAGE


def test_huge_page_bytes_reads_anon_huge_pages(tmp_path, monkeypatch):
    smaps = tmp_path / "smaps_rollup"
    smaps.write_text("Rss:  9000 kB\nAnonymous:  8192 kB\nAnonHugePages:  6144 kB\n")
    monkeypatch.setattr(memory, "SMAPS", str(smaps))
    assert memory.huge_page_bytes() == 6144 * 1024
    monkeypatch.setattr(memory, "SMAPS", str(tmp_path / "missing"))
    assert memory.huge_page_bytes() == 0
