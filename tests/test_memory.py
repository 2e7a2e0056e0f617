"""Host memory helpers: what is left (cgroup-aware), the page-lock refusal, first touch."""

from __future__ import annotations

import sys

import numpy as np
import pytest

from distsort import memory
from distsort.errors import DistsortError


def test_available_memory_is_positive_and_within_the_cgroup():
    assert 0 < memory.available_host_memory() <= memory.cgroup_room() <= sys.maxsize


def test_page_locking_more_than_is_left_is_one_clear_error(monkeypatch):
    monkeypatch.setattr(memory, "available_host_memory", lambda: 3 << 30)
    with pytest.raises(DistsortError, match="cannot page-lock 4.29 GB.*2.15 GB are left"):
        memory.host_empty((1 << 30,), np.uint32, pinned=True)  # refused before CuPy is asked


def test_first_touch_writes_every_page():
    raw = np.full(10 * memory.PAGE + 5, 7, np.uint8)
    memory.first_touch(raw, threads=3)
    step = -(-len(raw) // 3)
    starts = [lo + k for lo in range(0, len(raw), step) for k in range(0, step, memory.PAGE)]
    assert not raw[[i for i in starts if i < len(raw)]].any()


def test_huge_page_bytes_reads_anon_huge_pages(tmp_path, monkeypatch):
    smaps = tmp_path / "smaps_rollup"
    smaps.write_text("Rss:  9000 kB\nAnonymous:  8192 kB\nAnonHugePages:  6144 kB\n")
    monkeypatch.setattr(memory, "SMAPS", str(smaps))
    assert memory.huge_page_bytes() == 6144 * 1024
    monkeypatch.setattr(memory, "SMAPS", str(tmp_path / "missing"))
    assert memory.huge_page_bytes() == 0
