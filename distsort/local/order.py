"""Stable ordering by several key words, on top of any engine's stable argsort."""

from __future__ import annotations

from .engine import LocalSortEngine


def stable_order(words: list, engine: LocalSortEngine):
    """The stable permutation that sorts rows by words (most significant word first): LSD."""
    order = engine.argsort(words[-1])
    for word in reversed(words[:-1]):
        order = order[engine.argsort(word[order])]
    return order
