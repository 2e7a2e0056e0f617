"""What a sort's columns are: the rows travel as columns (arrays whose first axis is the row:
encoded keys, records, values, original positions), and key_words(columns) derives the unsigned
key words from them, so records carry their keys inside and nothing is sent twice."""

from __future__ import annotations

from collections.abc import Callable

KeyWords = Callable[[list], list]


def plain_keys(columns: list, words: list) -> bool:
    """Are the data plain keys: one column that is its own and only key word (no payload)?"""
    return len(columns) == 1 and own_key(columns, words)


def radix_rows(columns: list, words: list) -> bool:
    """Are the rows plain keys, or keys with one column of 4- or 8-byte values beside them:
    rows that our radix passes move whole (no gather after)?"""
    if not own_key(columns, words) or len(columns) > 2:
        return False
    return len(columns) == 1 or (columns[1].ndim == 1 and columns[1].dtype.itemsize in (4, 8))


def coded(columns: list, codec, xp) -> list:
    """The columns with the first one's raw numbers replaced by their codes (keys.NumericCodec
    codec; None: the columns as they are)."""
    return columns if codec is None else [codec.encode(columns[0], xp)] + columns[1:]


def own_key(columns: list, words: list) -> bool:
    """Is the first column its own and only key word (whatever columns follow it)?"""
    return len(words) == 1 and words[0] is columns[0]
