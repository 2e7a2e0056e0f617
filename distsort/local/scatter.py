"""Rows grouped by destination rank on CPUs, in two passes of scatter.c (why: there): plain
keys, or keys and one column of values.

Each of the pool's threads (workers.py) classifies a run of the keys, counting its keys per
destination; each then copies its keys (and their values) to their destinations' slots, after
those of the runs before it: every destination's rows stay in input order.
"""

from __future__ import annotations

import numpy as np

from ..workers import each, threads
from . import clib

MAX_RANKS = 1 << 16  # destinations are kept as uint16
WORDS = {4: np.uint32, 8: np.uint64}  # the scatter's element types, by size


def available(keys: np.ndarray, ranks: int, values: np.ndarray | None = None) -> bool:
    """Can by_rank group these keys (a NumPy column of uint32 or uint64, a compiled library)
    and values (a NumPy column of 4- or 8-byte elements, or None)?"""
    return (_column(keys) and keys.dtype in (np.uint32, np.uint64) and ranks <= MAX_RANKS
            and (values is None or (_column(values) and values.dtype.itemsize in WORDS))
            and clib.library() is not None)


def _column(a) -> bool:
    return isinstance(a, np.ndarray) and a.ndim == 1


def by_rank(keys: np.ndarray, offset: int, splitters: np.ndarray,
            values: np.ndarray | None = None, room: int = 0) -> tuple[list[np.ndarray], np.ndarray]:
    """([keys grouped by destination, each group in input order] (and the values alike); the
    int64 count of each destination). A key's destination is the number of splitters (rows of
    key, global position) at or below (key, offset + its index): splitters.classify's. The
    keys' array holds max(len(keys), room) rows, the grouped keys first: rows past them cost
    no memory until written (a later sort's second buffer, where a rank receives more)."""
    lib, p, keys = clib.library(), len(splitters) + 1, np.ascontiguousarray(keys)
    n = len(keys)
    cuts = [int(c) for c in np.linspace(0, n, max(1, min(threads(), n // (1 << 16))) + 1)]
    dest = np.empty(n, np.uint16)
    counts = np.zeros((len(cuts) - 1, p), np.int64)
    classify = _classifier(lib, keys, offset, splitters)
    each([lambda c=c: classify(cuts[c], cuts[c + 1], dest, counts[c])
          for c in range(len(cuts) - 1)])
    total = counts.sum(axis=0)
    starts = np.cumsum(counts, axis=0) - counts + (np.cumsum(total) - total)  # each run's slots
    columns = [keys] if values is None else [keys, np.ascontiguousarray(values)]
    grouped = [np.empty(max(n, room), keys.dtype)] + [np.empty_like(c) for c in columns[1:]]
    moves = [(getattr(lib, f"scatter_u{8 * c.dtype.itemsize}"), c.view(WORDS[c.dtype.itemsize]),
              out.view(WORDS[c.dtype.itemsize])) for c, out in zip(columns, grouped)]

    def scatter(c: int) -> None:
        lo, hi = cuts[c], cuts[c + 1]
        for move, column, out in moves:
            slots = np.array(starts[c])  # the kernel moves them on: a copy for each column
            move(clib.pointer(column, lo), hi - lo, clib.pointer(dest, lo), clib.pointer(slots),
                 clib.pointer(out))

    each([lambda c=c: scatter(c) for c in range(len(cuts) - 1)])
    return grouped, total


def _classifier(lib, keys: np.ndarray, offset: int, splitters: np.ndarray, way: str = ""):
    """classify(lo, hi, dest, counts): the destinations of keys[lo:hi] into dest[lo:hi], their
    number per destination added to counts (way: scatter.c's choice, or one of its ways,
    "_compare", "_search" or "_permute", for the tests)."""
    width, p = 8 * keys.dtype.itemsize, len(splitters) + 1
    depth = (p - 1).bit_length()  # the search's steps: 2^depth - 1 keys, the rest the largest
    split_keys = np.full((1 << depth) - 1, np.iinfo(keys.dtype).max, keys.dtype)
    split_keys[: p - 1] = splitters[:, 0].astype(keys.dtype)
    split_at = np.ascontiguousarray(splitters[:, -1].astype(np.int64))
    ptr = clib.pointer

    def classify(lo: int, hi: int, dest: np.ndarray, counts: np.ndarray) -> None:
        getattr(lib, f"classify_u{width}{way}")(ptr(keys, lo), hi - lo, int(offset) + lo,
                                           ptr(split_keys), ptr(split_at), p - 1,
                                           1 << (depth - 1), ptr(dest, lo), ptr(counts))

    return classify
