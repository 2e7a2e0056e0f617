"""splitmix64 on the host, for NumPy or CuPy arrays: the numbers mix.cuh computes on the device.

The checksum hashes words with it (check.py), the generator draws its bits from it (gen.py) and
the sample its random fractions (steps/sample.py), so host and device agree bit for bit.
"""

from __future__ import annotations

import numpy as np

GOLDEN = np.uint64(0x9E3779B97F4A7C15)  # 2^64 / the golden ratio: splitmix64's step
_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)


def mix64(x):
    """splitmix64's finalizer on a uint64 array (a bijection with good avalanche)."""
    x = x ^ (x >> np.uint64(30))  # a new array: the in-place steps below do not touch the input
    x *= _M1
    x ^= x >> np.uint64(27)
    x *= _M2
    x ^= x >> np.uint64(31)
    return x


def splitmix64(z):
    """splitmix64 of every uint64 of z (wrapping arithmetic): mix64(z + GOLDEN)."""
    return mix64(z + GOLDEN)
