"""Stable ordering by several key words, on top of any engine's stable sorts."""

from __future__ import annotations

import numpy as np

from .engine import LocalSortEngine


def stable_order(words: list, engine: LocalSortEngine, rows=None):
    """The stable permutation that sorts rows by words (most significant word first), LSD: of
    all rows, or of the given rows (positions in the words, in their stable order), returned
    as positions. Each word after the last sorts the order so far as its values (pairs), which
    our radix engine moves in its passes: one gather a word fewer than a permutation of the
    order after an argsort; 4-byte positions where they fit."""
    last = words[-1] if rows is None else words[-1][rows]
    order = engine.argsort(last)
    if rows is not None:
        order = rows[order]
    if len(words) > 1 and len(words[0]) < 2**32:
        order = order.astype(np.uint32)
    for word in reversed(words[:-1]):
        order = engine.sort_pairs(word[order], order, overwrite=True)[1]
    return order
