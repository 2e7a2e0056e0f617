"""Host memory page-locked part by part (memory.HostColumns) on GPUs.

`pytest -m gpu tests/test_pinned_gpu.py`; skipped where no GPU is found.
"""

from __future__ import annotations

import numpy as np
import pytest

from distsort import memory
from distsort.errors import DistsortError

cupy = pytest.importorskip("cupy")
pytestmark = pytest.mark.gpu
HOST = 1  # cudaMemoryTypeHost: page-locked host memory CUDA knows of


@pytest.fixture(autouse=True)
def _gpu():
    try:
        cupy.cuda.runtime.getDeviceCount()
    except cupy.cuda.runtime.CUDARuntimeError:
        pytest.skip("no GPU")


def locked(array: np.ndarray) -> bool:
    return cupy.cuda.runtime.pointerGetAttributes(array.ctypes.data).type == HOST


TEMPLATES = [np.empty(0, np.uint32), np.empty((0, 10), np.uint8)]


def test_parts_are_locked_in_turn_and_take_copies():
    rows = 3 * memory.PAGE + 5
    parts = [(0, memory.PAGE), (memory.PAGE, 3 * memory.PAGE), (3 * memory.PAGE, rows)]
    made = memory.HostColumns(TEMPLATES, rows, parts, pinned=True)
    try:
        keys = cupy.arange(rows, dtype=cupy.uint32)[::-1]
        recs = (cupy.arange(10 * rows) % 251).astype(cupy.uint8).reshape(rows, 10)
        for i, (lo, hi) in enumerate(parts):
            made.ready(i)
            assert all(locked(c[lo:hi]) for c in made.columns)
            keys[lo:hi].get(out=made.columns[0][lo:hi])
            recs[lo:hi].get(out=made.columns[1][lo:hi])
    finally:
        made.close()
    assert np.array_equal(made.columns[0], keys.get())
    assert np.array_equal(made.columns[1], recs.get())


def test_parts_off_a_page_are_locked_whole_at_once():
    rows, parts = 1000, [(0, 300), (300, 1000)]  # 300 uint32 rows end mid-page
    made = memory.HostColumns(TEMPLATES, rows, parts, pinned=True)
    assert all(locked(c) and locked(c[-1:]) for c in made.columns)
    made.ready(1)
    made.close()


def test_a_failed_lock_is_one_clear_error_at_its_part(monkeypatch):
    rows = 2 * memory.PAGE
    real, calls = memory.Registered.pin, []

    def pin(self, lo, hi):
        calls.append(lo)
        if len(calls) > 2:  # both columns' first parts lock, the next fails
            raise cupy.cuda.runtime.CUDARuntimeError(2)
        real(self, lo, hi)

    monkeypatch.setattr(memory.Registered, "pin", pin)
    made = memory.HostColumns(TEMPLATES, rows, [(0, memory.PAGE), (memory.PAGE, rows)], True)
    made.ready(0)
    with pytest.raises(DistsortError, match="page-locking .* failed"):
        made.ready(1)
    made.close()

