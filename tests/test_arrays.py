"""arrays.py on the host: the helpers the device code uses in place of CuPy's operators."""

import numpy as np
import pytest

from distsort.arrays import ceil_div, module_of
from distsort.transport import aligned_displacements


@pytest.mark.parametrize("d", [1, 3, 64])
def test_ceil_div_is_the_blocks_that_hold_each_count(d):
    counts = np.random.default_rng(d).integers(0, 1000, 257, dtype=np.int64)
    counts[:3] = [0, d, d + 1]
    np.testing.assert_array_equal(ceil_div(counts, d), -(-counts // d))


def test_a_host_array_and_a_numpy_scalar_live_in_numpy():
    assert module_of(np.zeros(3)) is np
    assert module_of(np.int64(3)) is np


def test_aligned_displacements_start_every_block_on_a_multiple():
    counts = np.array([0, 5, 3, 8, 1], dtype=np.int32)
    starts = aligned_displacements(counts, 4)
    np.testing.assert_array_equal(starts, [0, 0, 8, 12, 20])
    assert starts.dtype == np.int64
