"""The local sort engine interface, and the library engines (NumPy on CPU, CUB through CuPy).

Every engine sorts *unsigned* integer keys (uint8/16/32/64) ascending: keys.py has already turned
signed, float, descending and byte keys into such codes. `argsort` and `sort_pairs` are stable,
which the pipeline relies on to keep equal keys in input order across ranks. begin_bit/end_bit
say which key bits can differ (others are equal across the array); an engine may ignore them.
"""

from __future__ import annotations

from typing import Protocol

import numpy as np


class LocalSortEngine(Protocol):
    name: str

    def sort(self, keys, begin_bit: int = 0, end_bit: int | None = None):
        """Return the keys sorted ascending (a new array)."""

    def argsort(self, keys, begin_bit: int = 0, end_bit: int | None = None):
        """Return the stable permutation (int64) that sorts keys ascending."""

    def sort_pairs(self, keys, values, begin_bit: int = 0, end_bit: int | None = None):
        """Return (sorted keys, values permuted alike), stable; values is 1-D of any dtype."""


class NumpyEngine:
    """CPU engine: NumPy's radix sort (<= 16-bit keys) or timsort, both stable."""

    name = "numpy"

    def sort(self, keys, begin_bit: int = 0, end_bit: int | None = None):
        return np.sort(keys)

    def argsort(self, keys, begin_bit: int = 0, end_bit: int | None = None):
        return np.argsort(keys, kind="stable")

    def sort_pairs(self, keys, values, begin_bit: int = 0, end_bit: int | None = None):
        order = self.argsort(keys)
        return keys[order], values[order]


class CubEngine:
    """GPU engine: cupy.sort / cupy.argsort, CUB's radix sort underneath (stable)."""

    name = "cub"

    def __init__(self):
        import cupy

        self.cp = cupy

    def sort(self, keys, begin_bit: int = 0, end_bit: int | None = None):
        return self.cp.sort(keys)

    def argsort(self, keys, begin_bit: int = 0, end_bit: int | None = None):
        return self.cp.argsort(keys)

    def sort_pairs(self, keys, values, begin_bit: int = 0, end_bit: int | None = None):
        order = self.argsort(keys)
        return keys[order], values[order]


def get_engine(backend: str, name: str | None = None) -> LocalSortEngine:
    """The engine for a backend ('cpu' or 'gpu'); name picks one ('numpy', 'cub', 'radix').

    On GPUs the default is our radix engine (local/radix.py), which itself hands the cases where
    CUB is faster or where it has no kernel to CubEngine.
    """
    if backend == "cpu":
        return NumpyEngine()
    if name == "cub":
        return CubEngine()
    if name in (None, "radix"):
        from .radix import RadixEngine

        return RadixEngine()
    raise ValueError(f"unknown local sort engine {name!r}")
