"""Rows grouped by destination rank on CPUs, in two passes of scatter.c (why: there): plain
keys, or keys and one column of values; or plain keys pushed straight into their receivers'
memory by push.c's second pass (why: there).

Each of the pool's threads (workers.py) classifies a run of the keys, counting its keys per
destination; once the caller has said where each destination's rows go, each copies its keys
(and their values) to their destinations' slots, after those of the runs before it: every
destination's rows stay in input order.
"""

from __future__ import annotations

import os

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


def codes_as_grouped(columns: list, ranks: int, codec) -> bool:
    """Can Grouping take these raw numbers (keys.NumericCodec codec, or None) and the column
    of values after them, if any, and code the keys as it groups them: keys of 4 or 8 bytes
    in the CPU's byte order (scatter.c's _coded passes), a codec that loses no bits?"""
    keys = columns[0]
    return (codec is not None and not codec.lossy and len(columns) <= 2 and _column(keys)
            and keys.dtype == codec.native and keys.dtype.itemsize in WORDS
            and available(keys.view(WORDS[keys.dtype.itemsize]), ranks, *columns[1:]))


def _column(a) -> bool:
    return isinstance(a, np.ndarray) and a.ndim == 1


class Grouping:
    """Keys (and a column of values) counted per destination rank (the first pass: total[j]
    rows for rank j), to be placed by destination where the caller wants them (place). A key's
    destination is the number of splitters (rows of key, global position) at or below (key,
    offset + its index): splitters.classify's. few: whether plain keys take scatter.c's passes
    for a few destinations (None: where this CPU has them; the tests ask for either way).
    codec: the keys are raw numbers (codes_as_grouped), compared and placed as their codes.
    pushed: plain keys (pushes) that push writes where they land, not place."""

    def __init__(self, keys: np.ndarray, offset: int, splitters: np.ndarray,
                 values: np.ndarray | None = None, few: bool | None = None, codec=None,
                 pushed: bool = False):
        lib, p, keys = clib.library(), len(splitters) + 1, np.ascontiguousarray(keys)
        n = len(keys)
        self.cuts = [int(c) for c in
                     np.linspace(0, n, max(1, min(threads(), n // (1 << 16))) + 1)]
        self.columns = [keys] if values is None else [keys, np.ascontiguousarray(values)]
        self.word = np.dtype(WORDS[keys.dtype.itemsize])  # the grouped keys': codes if coded
        if few is None:
            few = values is None and p <= lib.scatter_few_max()
        if pushed:
            count, self._place = _push_passes(lib, keys, offset, splitters)
        else:
            count, self._place = (_few_passes if few else _two_passes)(lib, keys, offset,
                                                                       splitters, codec)
        self.counts = np.zeros((len(self.cuts) - 1, p), np.int64)  # of each thread's run
        each([lambda c=c: count(self.cuts[c], self.cuts[c + 1], self.counts[c])
              for c in range(len(self.cuts) - 1)])
        self.total = self.counts.sum(axis=0)

    def place(self, starts: np.ndarray, rows: int, key_rows: int,
              keys_into: np.ndarray | None = None) -> list[np.ndarray]:
        """New columns of rows rows (the keys' of key_rows: rows past those written cost no
        memory until written; or keys_into, given) with destination j's keys (and values) from
        row starts[j] on, in input order."""
        runs = np.cumsum(self.counts, axis=0) - self.counts + np.asarray(starts, np.int64)
        keys = np.empty(key_rows, self.word) if keys_into is None else keys_into
        grouped = [keys] + [
            np.empty(rows, c.dtype) for c in self.columns[1:]]
        pairs = [(c.view(WORDS[c.dtype.itemsize]), out.view(WORDS[c.dtype.itemsize]))
                 for c, out in zip(self.columns, grouped)]
        each([lambda c=c: self._place(self.cuts[c], self.cuts[c + 1], runs[c], pairs)
              for c in range(len(self.cuts) - 1)])
        return grouped

    def push(self, pids: list[int], addresses: np.ndarray) -> None:
        """Write destination j's keys (pushed: plain keys, pushes) to address addresses[j] and
        on of process pids[j] (0: this one), in input order; raises OSError where a write
        fails."""
        starts = np.asarray(addresses, np.uint64)
        before = (np.cumsum(self.counts, axis=0) - self.counts).astype(np.uint64)
        runs = starts + before * np.uint64(self.word.itemsize)  # each thread's first byte
        each([lambda c=c: self._place(self.cuts[c], self.cuts[c + 1], runs[c], pids)
              for c in range(len(self.cuts) - 1)])


def pushes(keys: np.ndarray, ranks: int) -> bool:
    """Does Grouping push these plain keys (a compiled library) to this many ranks
    (push.c's push_min_ranks to push_max_ranks)?"""
    if not available(keys, ranks):
        return False
    lib = clib.library()
    return lib.push_min_ranks() <= ranks <= lib.push_max_ranks()


def _push_passes(lib, keys: np.ndarray, offset: int, splitters: np.ndarray):
    """count(lo, hi, counts) and place(lo, hi, addresses, pids) of plain keys for push.c:
    counted by blocks whose destinations stay in L1, then written straight to the addresses
    (of other processes too)."""
    split_keys, split_at, steps = _splitters(keys.dtype, splitters)
    ptr, ns, width = clib.pointer, len(splitters), 8 * keys.dtype.itemsize
    count_blocks, push = getattr(lib, f"count_u{width}_blocks"), getattr(lib, f"push_u{width}")

    def count(lo: int, hi: int, counts: np.ndarray) -> None:
        count_blocks(ptr(keys, lo), hi - lo, int(offset) + lo, ptr(split_keys), ptr(split_at),
                     ns, steps, ptr(counts))

    def place(lo: int, hi: int, addresses: np.ndarray, pids: list[int]) -> None:
        to = np.array(addresses, np.uint64)  # the kernel moves them on
        where = np.array(pids, np.int64)
        stage = np.empty((ns + 1) * lib.push_stage_bytes(), np.uint8)
        err = push(ptr(keys, lo), hi - lo, int(offset) + lo, ptr(split_keys), ptr(split_at),
                   ns, steps, ptr(where), ptr(to), ptr(stage))
        if err:
            raise OSError(err, f"writing a peer rank's memory: {os.strerror(err)}")

    return count, place


def _two_passes(lib, keys: np.ndarray, offset: int, splitters: np.ndarray, codec=None):
    """count(lo, hi, counts) and place(lo, hi, slots, pairs) for any destinations, keys and
    values: classify stores each key's destination, scatter moves each column's rows (pairs:
    (column, its grouped array)) by them; codec: the keys are raw numbers, classified by their
    codes and written as them (scatter.c's _coded pair)."""
    classify = _classifier(lib, keys, offset, splitters, codec=codec)
    dest, coder = np.empty(len(keys), np.uint16), _coder(keys, codec)

    def place(lo: int, hi: int, slots: np.ndarray, pairs: list) -> None:
        ptr = clib.pointer
        for i, (column, out) in enumerate(pairs):
            moved = np.array(slots)  # the kernel moves them on: a copy for each column
            width = 8 * column.dtype.itemsize
            if i == 0 and codec is not None:
                getattr(lib, f"scatter_u{width}_coded")(ptr(column, lo), hi - lo, ptr(dest, lo),
                                                        ptr(moved), ptr(out), ptr(coder))
            else:
                getattr(lib, f"scatter_u{width}")(ptr(column, lo), hi - lo, ptr(dest, lo),
                                                  ptr(moved), ptr(out))

    return (lambda lo, hi, counts: classify(lo, hi, dest, counts)), place


def _few_passes(lib, keys: np.ndarray, offset: int, splitters: np.ndarray, codec=None):
    """count(lo, hi, counts) and place(lo, hi, slots, pairs) of plain keys for a few
    destinations (scatter.c's _few passes: no destination stored between them); codec: of
    raw numbers, coded by the passes (their _coded pair) as they read them."""
    split_keys, split_at, steps = _splitters(WORDS[keys.dtype.itemsize], splitters)
    ptr, ns, width = clib.pointer, len(splitters), 8 * keys.dtype.itemsize
    coded, coder = "" if codec is None else "_coded", _coder(keys, codec)
    count_few = getattr(lib, f"count_u{width}_few{coded}")
    scatter_few = getattr(lib, f"scatter_u{width}_few{coded}")

    def count(lo: int, hi: int, counts: np.ndarray) -> None:
        count_few(ptr(keys, lo), hi - lo, int(offset) + lo, ptr(split_keys), ptr(split_at), ns,
                  steps, ptr(counts), ptr(coder))

    def place(lo: int, hi: int, slots: np.ndarray, pairs: list) -> None:
        (_, out), = pairs
        moved = np.array(slots)  # the kernel moves them on
        scatter_few(ptr(keys, lo), hi - lo, int(offset) + lo, ptr(split_keys), ptr(split_at),
                    ns, steps, ptr(moved), ptr(out), ptr(coder))

    return count, place


def _coder(keys: np.ndarray, codec) -> np.ndarray:
    """The _coded kernels' words of codec (code.h) as words of the keys' width (zeros for
    none: the plain kernels ignore them)."""
    return np.array(codec.c_words() if codec else [0] * 5, WORDS[keys.dtype.itemsize])


def _splitters(word, splitters: np.ndarray) -> tuple:
    """scatter.c's view of the splitters: their keys as words of type word (padded with the
    largest word to the binary search's 2^depth - 1 rows), their int64 global positions, the
    search's first step."""
    depth = len(splitters).bit_length()  # the search's steps: 2^depth - 1 keys
    split_keys = np.full((1 << depth) - 1, np.iinfo(word).max, word)
    split_keys[: len(splitters)] = splitters[:, 0].astype(word)
    split_at = np.ascontiguousarray(splitters[:, -1].astype(np.int64))
    return split_keys, split_at, 1 << (depth - 1)


def _classifier(lib, keys: np.ndarray, offset: int, splitters: np.ndarray, way: str = "",
                codec=None):
    """classify(lo, hi, dest, counts): the destinations of keys[lo:hi] into dest[lo:hi], their
    number per destination added to counts (way: scatter.c's choice, or one of its ways,
    "_compare", "_search" or "_permute", for the tests; codec: raw numbers, by their codes)."""
    width, ns = 8 * keys.dtype.itemsize, len(splitters)
    split_keys, split_at, steps = _splitters(WORDS[keys.dtype.itemsize], splitters)
    ptr, coder = clib.pointer, _coder(keys, codec)
    kernel = getattr(lib, f"classify_u{width}{way or ('' if codec is None else '_coded')}")
    more = () if codec is None else (ptr(coder),)

    def classify(lo: int, hi: int, dest: np.ndarray, counts: np.ndarray) -> None:
        kernel(ptr(keys, lo), hi - lo, int(offset) + lo, ptr(split_keys), ptr(split_at), ns,
               steps, ptr(dest, lo), ptr(counts), *more)

    return classify
