"""Plain keys grouped by destination rank on CPUs, in two passes of scatter.c (why: there).

Each of the pool's threads (workers.py) classifies a run of the keys, counting its keys per
destination; each then copies its keys to their destinations' slots, after those of the runs
before it: every destination's keys stay in input order.
"""

from __future__ import annotations

import numpy as np

from ..workers import each, threads
from . import clib

MAX_RANKS = 1 << 16  # destinations are kept as uint16


def available(keys: np.ndarray, ranks: int) -> bool:
    """Can by_rank group these keys (a NumPy column of uint32 or uint64, a compiled library)?"""
    return (isinstance(keys, np.ndarray) and keys.ndim == 1 and keys.dtype in (np.uint32, np.uint64)
            and ranks <= MAX_RANKS and clib.library() is not None)


def by_rank(keys: np.ndarray, offset: int, splitters: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(keys grouped by destination, each group in input order; the int64 count of each). A
    key's destination is the number of splitters (rows of key, global position) at or below
    (key, offset + its index): splitters.classify's."""
    lib, p, keys = clib.library(), len(splitters) + 1, np.ascontiguousarray(keys)
    width, n = 8 * keys.dtype.itemsize, len(keys)
    depth = (p - 1).bit_length()  # the search's steps: 2^depth - 1 keys, the rest the largest
    split_keys = np.full((1 << depth) - 1, np.iinfo(keys.dtype).max, keys.dtype)
    split_keys[: p - 1] = splitters[:, 0].astype(keys.dtype)
    split_at = np.ascontiguousarray(splitters[:, -1].astype(np.int64))
    cuts = [int(c) for c in np.linspace(0, n, max(1, min(threads(), n // (1 << 16))) + 1)]
    dest = np.empty(n, np.uint16)
    counts = np.zeros((len(cuts) - 1, p), np.int64)
    ptr = clib.pointer

    def classify(c: int) -> None:
        lo, hi = cuts[c], cuts[c + 1]
        getattr(lib, f"classify_u{width}")(ptr(keys, lo), hi - lo, int(offset) + lo,
                                           ptr(split_keys), ptr(split_at), p - 1,
                                           1 << (depth - 1), ptr(dest, lo), ptr(counts[c]))

    each([lambda c=c: classify(c) for c in range(len(cuts) - 1)])
    total = counts.sum(axis=0)
    starts = np.cumsum(counts, axis=0) - counts + (np.cumsum(total) - total)  # each run's slots
    out = np.empty_like(keys)

    def scatter(c: int) -> None:
        lo, hi, slots = cuts[c], cuts[c + 1], np.ascontiguousarray(starts[c])
        getattr(lib, f"scatter_u{width}")(ptr(keys, lo), hi - lo, ptr(dest, lo), ptr(slots),
                                          ptr(out))

    each([lambda c=c: scatter(c) for c in range(len(cuts) - 1)])
    return out, total
