"""Stable merges of sorted runs on CPUs (merge.c, in clib.py's library): a rank that receives
one sorted run from every rank merges them in log2(runs) passes instead of sorting them again,
where that is faster (worth_merging). Where no C compiler works, available() is False and
callers sort."""

from __future__ import annotations

import functools
import math
import time

import numpy as np

from ..workers import each, threads
from . import clib

MEASURED_MIN = 1 << 20  # merges and sorts of this many keys on are timed (worth_merging)
_pass_seconds: dict[int, float] = {}  # a key's share of the last timed merge pass, by key bytes


def available(keys: np.ndarray) -> bool:
    """Can merge_runs merge these keys (a NumPy column of unsigned integers, a compiled
    library)?"""
    return (isinstance(keys, np.ndarray) and keys.ndim == 1 and keys.dtype.kind == "u"
            and clib.library() is not None)


def merge_runs(keys: np.ndarray, counts, positions: bool | np.ndarray = False,
               overwrite: bool = False, scratch: np.ndarray | None = None):
    """keys: sorted runs of counts[i] keys, one after another. Returns (the keys merged, stably,
    the earlier run's first among equal keys; with `positions`, the int64 position in keys of
    each merged key (where positions is an int64 array beside keys, its entry for each merged
    key, the array used up), else None). overwrite: keys may be used as scratch; scratch: an
    array to use as well where it fits (clib.fitting; else one is made)."""
    lib, width = clib.library(), 8 * keys.dtype.itemsize
    bounds = np.concatenate([[0], np.cumsum(counts, dtype=np.int64)])
    runs = [(int(lo), int(hi)) for lo, hi in zip(bounds[:-1], bounds[1:]) if hi > lo]
    source, target = keys, clib.second_buffer(scratch, keys)
    at = positions if isinstance(positions, np.ndarray) else (
        np.arange(len(keys), dtype=np.int64) if positions else None)
    at_target = None if at is None else np.empty_like(at)
    while len(runs) > 1:
        started = time.perf_counter()
        pairs = [runs[i : i + 2] for i in range(0, len(runs), 2)]
        cuts = -(-threads() // len(pairs))  # the last passes' few pairs: cut to use every thread
        each([functools.partial(_merge_pair, lib, width, piece, source, target, at, at_target)
              for pair in pairs for piece in _pieces(source, pair, cuts)])
        runs = [(pair[0][0], pair[-1][1]) for pair in pairs]
        if source is keys and not overwrite:  # the input is only read
            source, target = target, np.empty_like(keys)
        else:
            source, target = target, source
        at, at_target = at_target, at
        if len(keys) >= MEASURED_MIN:
            _pass_seconds[keys.dtype.itemsize] = (time.perf_counter() - started) / len(keys)
    return (keys.copy() if source is keys and not overwrite else source), at


def worth_merging(keys: np.ndarray, counts, sort_seconds: float | None) -> bool:
    """Would merging these runs (keys of their length and dtype) take no longer than sorting
    them anew, which takes sort_seconds a key (None: not known)? From the last timed merge pass
    of such keys in this process; where either is not known, merge (and so time it). Why:
    machines differ: where NumPy sorts with AVX-512 (x86-simd-sort) a sort costs less than two
    merge passes, so 16 runs (4 passes) sort faster than they merge; where it has no SIMD sort,
    merging wins at any count (bench/RESULTS.md, runs 239-241)."""
    per_pass = _pass_seconds.get(keys.dtype.itemsize)
    runs = sum(1 for c in counts if c)
    if per_pass is None or sort_seconds is None or runs < 2:
        return True
    return math.ceil(math.log2(runs)) * per_pass <= sort_seconds


def _pieces(keys: np.ndarray, pair: list, cuts: int) -> list:
    """The merge of a pair of runs as `cuts` merges of their parts that write apart: each
    ((a_lo, a_hi), (b_lo, b_hi), out_lo), equal shares of the output (merge path: the output's
    first d keys are the first i of run a and the first d - i of run b, i found by binary
    search). An odd run out is one piece, run b empty."""
    if len(pair) == 1:
        (lo, hi), = pair
        return [((lo, hi), (hi, hi), lo)]
    (a_lo, a_hi), (b_lo, b_hi) = pair
    n = b_hi - a_lo
    diagonals = [n * k // cuts for k in range(cuts + 1)]
    splits = [_split(keys, (a_lo, a_hi), (b_lo, b_hi), d) for d in diagonals]
    return [((a_lo + i0, a_lo + i1), (b_lo + d0 - i0, b_lo + d1 - i1), a_lo + d0)
            for (d0, i0), (d1, i1) in zip(zip(diagonals, splits), zip(diagonals[1:], splits[1:]))
            if d1 > d0]


def _split(keys: np.ndarray, a: tuple, b: tuple, d: int) -> int:
    """How many of run a's keys are among the merge's first d: the least i with
    b[d - i - 1] < a[i] (ties take run a's keys first, as merge.c does)."""
    na, nb = a[1] - a[0], b[1] - b[0]
    lo, hi = max(0, d - nb), min(d, na)
    while lo < hi:
        i = (lo + hi) // 2
        if keys[b[0] + d - i - 1] < keys[a[0] + i]:
            hi = i
        else:
            lo = i + 1
    return lo


def _merge_pair(lib, width: int, piece: tuple, source, target, at, at_target) -> None:
    """Merge source's parts a and b of one piece (_pieces) into target from out_lo on."""
    (a_lo, a_hi), (b_lo, b_hi), out = piece
    p = clib.pointer
    if b_hi == b_lo:  # a part alone: copied as it is
        target[out : out + a_hi - a_lo] = source[a_lo:a_hi]
        if at is not None:
            at_target[out : out + a_hi - a_lo] = at[a_lo:a_hi]
        return
    if at is None:
        getattr(lib, f"merge_u{width}")(p(source, a_lo), a_hi - a_lo, p(source, b_lo),
                                        b_hi - b_lo, p(target, out))
    else:
        getattr(lib, f"merge_positions_u{width}")(
            p(source, a_lo), p(at, a_lo), a_hi - a_lo, p(source, b_lo), p(at, b_lo),
            b_hi - b_lo, p(target, out), p(at_target, out))
