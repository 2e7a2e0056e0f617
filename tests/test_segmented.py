"""The segmented exchange's host-side planning (distsort/segmented.py), without a GPU."""

from __future__ import annotations

import numpy as np
import pytest

from distsort import segmented
from distsort.local import segments, tiles


def test_segment_heads_mark_each_segments_first_nonempty_piece():
    head = tiles.SEG_HEAD
    got = tiles.segment_heads([0, 5, 3, 0, 0, 2, 4], [0, 0, 0, 1, 2, 2, 2])
    np.testing.assert_array_equal(got, [0, head, 0, 1, 2, 2 | head, 2])


@pytest.mark.parametrize("rows, chunks, want", [
    ([5, 0, 3, 9, 1, 1, 0, 4], 2, [0, 3, 8]),
    ([1] * 64, 4, [0, 16, 32, 48, 64]),
    ([0, 0, 0], 2, [0, 0, 3]),
    ([7], 3, [0, 0, 1, 1]),
])
def test_chunk_cuts_balance_rows_over_whole_segments(rows, chunks, want):
    np.testing.assert_array_equal(segmented.chunk_cuts(np.array(rows), chunks), want)


@pytest.mark.parametrize("dtype", [np.uint32, np.uint64])
@pytest.mark.parametrize("ranks", [2, 3, 4, 16])
def test_ranges_fit_every_key_of_a_destination_in_its_buckets(dtype, ranks):
    """Every key of [low, high] gets a sub-range below 2^sbits, at most one merged at the
    bottom, and the sub-ranges are no wider than needed (a shift less would not fit)."""
    rng = np.random.default_rng(ranks)
    top = int(np.iinfo(dtype).max)
    cuts = np.sort(rng.integers(0, top, ranks - 1, dtype=dtype, endpoint=True))
    cuts[0] = cuts[0] >> 40 << 40 if dtype == np.uint64 else cuts[0]  # some aligned bounds
    splitters = np.stack([cuts.astype(np.uint64), np.zeros(ranks - 1, np.uint64)], axis=1)
    sbits = segments.bucket_bits(ranks)
    for (base, shift, extra), low, high in zip(segmented.ranges(splitters, dtype, sbits),
                                               [0] + list(map(int, cuts)), list(map(int, cuts))
                                               + [top]):
        base, shift, extra = int(base), int(shift), int(extra)
        assert base <= low and base >> shift << shift == base and extra in (0, 1)
        assert ((high - base) >> shift) - extra < 1 << sbits
        if shift:
            assert ((high - (low >> (shift - 1) << (shift - 1))) >> (shift - 1)) >= (1 << sbits) + 1
