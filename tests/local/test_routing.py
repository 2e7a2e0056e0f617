"""Where the radix engine runs its own kernels and where it hands a sort to CUB (radix.MIN_N):
decided from the keys' dtype and size alone, so checked here without a GPU."""

from __future__ import annotations

import numpy as np
import pytest

from distsort.local.radix import MIN_N, RadixEngine


def keys(dtype, n: int) -> np.ndarray:
    return np.broadcast_to(np.zeros(1, dtype), (n,))  # n keys' shape, no memory


@pytest.mark.parametrize("dtype,route", [(np.uint32, "coded"), (np.uint64, "coded64")])
def test_coded_sorts_are_ours_sooner_than_plain_ones(dtype, route):
    """Signed and float keys that CUB would have to encode and decode around its sort are ours
    from a smaller size than unsigned keys, which CUB sorts as they are."""
    engine, n = RadixEngine(), MIN_N[route]
    assert MIN_N[route] < MIN_N["sort" if dtype == np.uint32 else "sort64"]
    assert engine._ours(keys(dtype, n), "coded") and not engine._ours(keys(dtype, n // 2), "coded")
    assert not engine._ours(keys(dtype, n), "sort")
