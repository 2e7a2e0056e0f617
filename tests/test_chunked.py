"""The chunk and block layout arithmetic of the overlapped partition + exchange (chunked.py)."""

from __future__ import annotations

import numpy as np
import pytest

from distsort.chunked import block_starts, chunk_bounds
from distsort.local.partition import TILE


@pytest.mark.parametrize("n", [0, 1, TILE - 1, TILE, 5 * TILE + 7, 100 * TILE])
@pytest.mark.parametrize("chunks", [1, 2, 4, 7])
@pytest.mark.parametrize("min_chunk", [1, TILE, 10 * TILE])
def test_chunks_cover_the_shard_in_whole_tiles(n, chunks, min_chunk):
    bounds = chunk_bounds(n, chunks, min_chunk)
    assert bounds[0][0] == 0 and bounds[-1][1] == n
    assert all(a[1] == b[0] for a, b in zip(bounds, bounds[1:]))
    assert all(lo % TILE == 0 for lo, _ in bounds)
    assert len(bounds) <= max(1, min(chunks, n // min_chunk))
    assert all(hi > lo for lo, hi in bounds) or bounds == [(0, 0)]


def test_block_starts_are_aligned_and_in_row_major_order():
    counts = np.array([[5, 0, 1030], [0, 2048, 1]], dtype=np.int64)
    starts = block_starts(counts, 1024)
    np.testing.assert_array_equal(starts, [[0, 1024, 1024], [3072, 3072, 5120]])
    assert (starts % 1024 == 0).all()
    np.testing.assert_array_equal(block_starts(counts, 1), [[0, 5, 5], [1035, 1035, 3083]])
