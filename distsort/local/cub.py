"""The CUB engine: cupy.sort / cupy.argsort (CUB's radix sort underneath), on one GPU; the radix
engine (radix.py) hands it the sorts it has no kernel for or where CUB is faster."""

from __future__ import annotations

from .rows import take


class CubEngine:
    """GPU engine: cupy.sort / cupy.argsort, CUB's radix sort underneath (stable). It ignores
    the bit range and the keyword options (low, overwrite, scratch): its results are new arrays."""

    name = "cub"

    def __init__(self):
        import cupy

        self.cp = cupy
        self.used: set[str] = set()

    def workspace_bytes(self, rows: int, row_bytes: int) -> int:
        return 2 * rows * row_bytes  # the result and CUB's double buffer

    def sort(self, keys, begin_bit: int = 0, end_bit: int | None = None, **ignored: object):
        self.used.add("cub")
        return self.cp.sort(keys)

    def argsort(self, keys, begin_bit: int = 0, end_bit: int | None = None, **ignored: object):
        self.used.add("cub")
        return self.cp.argsort(keys)

    def sort_pairs(
        self, keys, values, begin_bit: int = 0, end_bit: int | None = None, **ignored: object
    ):
        order = self.argsort(keys)
        return keys[order], take(values, order)
