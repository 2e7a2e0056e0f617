"""splitmix64 on the host, for NumPy or CuPy arrays: the numbers mix.cuh computes on the device.

The checksum hashes words with it (check.py), the generator draws its bits from it (gen.py) and
the sample its random fractions (steps/sample.py), so host and device agree bit for bit.
"""

from __future__ import annotations

import numpy as np

from .arrays import module_of

GOLDEN = np.uint64(0x9E3779B97F4A7C15)  # 2^64 / the golden ratio: splitmix64's step
_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)
_S30, _S27, _S31 = np.uint64(30), np.uint64(27), np.uint64(31)


def mix64(x):
    """splitmix64's finalizer on a uint64 array (a bijection with good avalanche). By ufuncs:
    CuPy's operators with a NumPy scalar import cupyx (arrays.py)."""
    xp = module_of(x)
    x = xp.bitwise_xor(x, xp.right_shift(x, _S30))  # a new array: the input stays as it was
    x = xp.multiply(x, _M1, out=x)
    x = xp.bitwise_xor(x, xp.right_shift(x, _S27), out=x)
    x = xp.multiply(x, _M2, out=x)
    return xp.bitwise_xor(x, xp.right_shift(x, _S31), out=x)


def splitmix64(z):
    """splitmix64 of every uint64 of z (wrapping arithmetic): mix64(z + GOLDEN)."""
    return mix64(module_of(z).add(z, GOLDEN))
