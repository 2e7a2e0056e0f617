"""The local sort engine interface (the seam), NumPy's engine on CPUs, and the choice of engine.

Every engine sorts *unsigned* integer keys (uint8/16/32/64) ascending: keys.py has already turned
signed, float, descending and byte keys into such codes. `argsort` and `sort_pairs` are stable,
which the pipeline relies on to keep equal keys in input order across ranks. begin_bit/end_bit
say which key bits can differ (others are equal across the array); an engine may ignore them.

Keyword-only options every engine takes (and may ignore), SortOptions:
- low: the smallest key there can be (every key >= low). begin_bit/end_bit are then bits of
  key - low: keys in [low, high] differ only below end_bit = (high - low).bit_length().
- overwrite: the caller gives up its keys (and sort_pairs' values): the engine MAY overwrite them
  and use them as working memory; afterwards their contents are unspecified unless they are what
  was returned. Default False: the input is left untouched.
- scratch: a 1-D array of at least n keys of the keys' dtype the engine MAY use as working memory
  (and return a view of); its contents afterwards are unspecified.
- codec (only for engines with orders_numbers = True): the keys are raw numbers of the codec's
  dtype (keys.NumericCodec), to be ordered as their codes are; the keys come back as numbers.
  A rank that sorts alone passes them so (api.py): the radix engine makes no encode or decode
  pass, NumPy's engine codes them as its threads group them (or first) and decodes in place.
Whatever an engine returns, use what it returns: with overwrite or scratch it may be the input,
a view of the scratch or a new array.
"""

from __future__ import annotations

import functools
import time
from typing import TYPE_CHECKING, Protocol, TypedDict

import numpy as np

from ..mix import splitmix64
from ..transport import displacements
from ..workers import each, threads
from . import clib, lsd, merge, scatter
from .rows import take

PIECES_MIN = 1 << 20  # keys: fewer are sorted by one thread before several would have started
SAMPLE_PER_RANGE = 256  # sampled keys a key range, for a thread's sample sort's splitters

if TYPE_CHECKING:
    from typing_extensions import Unpack


class SortOptions(TypedDict, total=False):
    """The keyword-only options of sort, argsort and sort_pairs (see above)."""

    low: int
    overwrite: bool
    scratch: object
    codec: object


class LocalSortEngine(Protocol):
    name: str
    used: set[str]  # the sorts that ran since it was last cleared ('radix', 'cub', 'numpy'):
    # what a job's summary names (report.py), since an engine hands some calls to another sort

    def sort(self, keys, begin_bit: int = 0, end_bit: int | None = None,
             **options: Unpack[SortOptions]):
        """Return the keys sorted ascending: a new array, or with overwrite/scratch possibly
        keys or a view of scratch (the engine MAY overwrite keys when overwrite is True)."""

    def argsort(self, keys, begin_bit: int = 0, end_bit: int | None = None,
                **options: Unpack[SortOptions]):
        """Return the stable permutation (int64) that sorts keys ascending (the engine MAY
        overwrite keys when overwrite is True)."""

    def sort_pairs(self, keys, values, begin_bit: int = 0, end_bit: int | None = None,
                   **options: Unpack[SortOptions]):
        """Return (sorted keys, values permuted alike), stable; values is 1-D of any dtype (the
        engine MAY overwrite keys and values when overwrite is True)."""

    def workspace_bytes(self, rows: int, row_bytes: int) -> int:
        """The memory a sort of `rows` rows of row_bytes bytes takes beyond its input: the
        result and every temporary (CUB's temp-storage query, for the plan: plan.py)."""


class NumpyEngine:
    """CPU engine: 32- and 64-bit keys, their pairs and orders by our radix sort (local/lsd.py)
    where it beats NumPy's on this machine; else plain keys by NumPy's default sort (SIMD where
    the CPU has it: equal plain keys are alike, so it need not be stable), orders and pairs by
    its stable sort (radix for keys of 16 bits or fewer, else timsort). It ignores the bit range
    and the option low; a scratch that fits (clib.fitting) is its radix sort's and merge's
    second buffer. Where the process's pool has several threads
    (workers.py), plain keys are sorted in as many pieces at once (both let go of the GIL while
    they sort) and the sorted pieces merged (local/merge.py); with overwrite, in the keys' own
    memory (pairs by the radix sort in the keys' and values' own). Raw numbers (codec) are
    sorted as their codes, coded as they are grouped into the key ranges where the threads
    sort them so (no encode pass), else coded first, and decoded in place."""

    name = "numpy"
    orders_numbers = True

    def __init__(self):
        self.used: set[str] = set()
        # a key's share of the last sort of at least merge.MEASURED_MIN keys, by key bytes: the
        # finish merges received runs only where that is faster (merge.worth_merging)
        self.seconds_per_key: dict[int, float] = {}

    def workspace_bytes(self, rows: int, row_bytes: int) -> int:
        return 2 * rows * row_bytes  # the result and the radix sort's second buffer

    def sort(self, keys, begin_bit: int = 0, end_bit: int | None = None,
             overwrite: bool = False, scratch=None, codec=None, **ignored: object):
        if codec is not None and not codec.identity:
            if _in_ranges(keys, codec):
                # which sort the threads run (radix or NumPy's) chosen now, and noted
                self._note(lsd.available(keys.view(codec.word)))
                out = _sorted_in_ranges(keys, threads(), codec=codec)
            else:
                out = self.sort(codec.encode(keys, np), overwrite=True)
            return codec.decode(out, np, in_place=True)
        started = time.perf_counter()
        radix = self._note(lsd.available(keys))
        if _in_ranges(keys):
            out = _sorted_in_ranges(keys, threads(), scratch)
        elif _in_pieces(keys):
            out = _sorted_in_pieces(keys, threads(), overwrite, scratch)
        else:
            out = lsd.sort(keys, overwrite, scratch) if radix else _numpy_sorted(keys, overwrite)
        if len(keys) >= merge.MEASURED_MIN:
            self.seconds_per_key[keys.dtype.itemsize] = (time.perf_counter() - started) / len(keys)
        return out

    def argsort(self, keys, begin_bit: int = 0, end_bit: int | None = None, codec=None,
                **ignored: object):
        if codec is not None and not codec.identity:
            return self.argsort(codec.encode(keys, np))
        radix = self._note(lsd.available(keys, positions=True))
        if _orders_in_pieces(keys):
            return _ordered_in_pieces(keys, threads())[1]
        return lsd.argsort(keys) if radix else np.argsort(keys, kind="stable")

    def sort_pairs(self, keys, values, begin_bit: int = 0, end_bit: int | None = None,
                   overwrite: bool = False, codec=None, **ignored: object):
        if codec is not None and not codec.identity:
            keys, values = self.sort_pairs(codec.encode(keys, np), values, overwrite=overwrite)
            return codec.decode(keys, np, in_place=True), values
        if _orders_in_pieces(keys):
            self._note(lsd.available(keys, positions=True))
            if values.ndim == 1 and values.dtype.itemsize == 8:  # carried: no gather after
                keys, words = _ordered_in_pieces(keys, threads(), values.view(np.int64))
                return keys, words.view(values.dtype)
            keys, order = _ordered_in_pieces(keys, threads())
            return keys, take(values, order)
        if lsd.available(keys, values):
            self._note(True)
            return lsd.sort_pairs(keys, values, overwrite)  # given up: no copies first
        order = self.argsort(keys)
        return keys[order], take(values, order)

    def _note(self, radix: bool) -> bool:
        """Note which sort runs (our radix sort or NumPy's); returns radix."""
        self.used.add("radix" if radix else "numpy")
        return radix


def _in_ranges(keys: np.ndarray, codec=None) -> bool:
    """Are these plain keys (codec: raw numbers, as their codes) sorted as key ranges on the
    pool's threads (_sorted_in_ranges)?"""
    groups = (scatter.available(keys, threads()) if codec is None
              else scatter.codes_as_grouped([keys], threads(), codec))
    return threads() > 1 and len(keys) >= PIECES_MIN and groups


def _sorted_in_ranges(keys: np.ndarray, ranges: int, scratch: np.ndarray | None = None,
                      codec=None) -> np.ndarray:
    """keys sorted as a sample sort on the pool's threads: grouped into `ranges` key ranges by
    splitters from a sample (local/scatter.py, on the threads), into the scratch where it fits,
    else new memory (the copy a sort that may not overwrite makes anyway), then each range
    sorted in place on a thread. No merge pass: where pieces are sorted and merged, every key
    moves once more (bench/RESULTS.md, session 49). Splitters are (key, position) rows, so
    equal keys are cut by position and the ranges stay even whatever the keys. codec: the keys
    are raw numbers, grouped (and returned) as their codes."""
    grouping = scatter.Grouping(keys, 0, _range_splitters(keys, ranges, codec), codec=codec)
    counts = grouping.total
    starts = displacements(counts)
    room = clib.fitting(scratch, keys)
    out = grouping.place(starts, len(keys), len(keys), room)[0]
    each([functools.partial(_sort_in_place, out[a : a + c]) for a, c in zip(starts, counts) if c])
    return out


def _range_splitters(keys: np.ndarray, ranges: int, codec=None) -> np.ndarray:
    """ranges - 1 splitters (key, position), uint64, in that order, from SAMPLE_PER_RANGE random
    rows a range (splitmix64 of a counter from the length: the same rows for the same length,
    the sort repeatable, and no NumPy generator to import: 11 ms of a rank's start); codec: the
    keys are raw numbers, the splitters' keys their codes."""
    counter = np.arange(SAMPLE_PER_RANGE * ranges, dtype=np.uint64) + np.uint64(len(keys))
    picks = (splitmix64(counter) % np.uint64(len(keys))).astype(np.int64)
    picked = keys[picks] if codec is None else codec.encode(keys[picks], np)
    rows = np.stack([picked.astype(np.uint64), picks.astype(np.uint64)], axis=1)
    rows = rows[np.lexsort((rows[:, 1], rows[:, 0]))]
    return rows[np.arange(1, ranges) * len(rows) // ranges]


def _in_pieces(keys: np.ndarray, positions: bool = False) -> bool:
    """Are these keys (positions: with their positions) sorted in pieces on the pool's
    threads, then merged?"""
    if not (threads() > 1 and len(keys) >= PIECES_MIN and merge.available(keys)):
        return False
    lsd.available(keys, positions=positions)  # the choice made now, not by the threads at once
    return True


def _orders_in_pieces(keys: np.ndarray) -> bool:
    """Are these keys' order (and pairs) made in pieces on the pool's threads? Not for keys of
    16 bits or fewer: NumPy's stable sort of those is a radix sort already, faster alone."""
    return keys.dtype.itemsize >= 4 and _in_pieces(keys, positions=True)


def _ordered_in_pieces(keys: np.ndarray, pieces: int,
                       carried: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(keys sorted, stably; and the int64 positions that sort them, or, given carried (int64
    words, one a key), those words in their keys' order): pieces sorted with them at once on
    the pool's threads, then merged with them (the merge moves 8 bytes beside each key)."""
    cuts = np.linspace(0, len(keys), pieces + 1).astype(np.int64)
    out = np.empty_like(keys)
    at = np.arange(len(keys), dtype=np.int64) if carried is None else carried.copy()

    def piece(lo: int, hi: int) -> None:
        these, where = out[lo:hi], at[lo:hi]
        if lsd.available(keys[lo:hi], where):
            these[:] = keys[lo:hi]
            got, got_where = lsd.sort_pairs(these, where, overwrite=True)
            if got is not these:  # the passes ended in the scratch
                these[:], where[:] = got, got_where
        else:
            order = np.argsort(keys[lo:hi], kind="stable")
            these[:], where[:] = keys[lo:hi][order], where[order]

    each([functools.partial(piece, int(lo), int(hi)) for lo, hi in zip(cuts[:-1], cuts[1:])])
    return merge.merge_runs(out, np.diff(cuts), positions=at, overwrite=True)


def _sorted_in_pieces(keys: np.ndarray, pieces: int, overwrite: bool,
                      scratch: np.ndarray | None = None) -> np.ndarray:
    """keys sorted as `pieces` pieces at once on the pool's threads, then merged; a scratch that
    fits (clib.fitting) is the pieces' second buffers, then the merge's."""
    out = keys if overwrite else keys.copy()
    room = clib.fitting(scratch, out)
    cuts = np.linspace(0, len(out), pieces + 1).astype(np.int64)
    each([functools.partial(_sort_in_place, out[lo:hi], None if room is None else room[lo:hi])
          for lo, hi in zip(cuts[:-1], cuts[1:])])
    return merge.merge_runs(out, np.diff(cuts), overwrite=True, scratch=room)[0]


def _numpy_sorted(keys: np.ndarray, overwrite: bool) -> np.ndarray:
    """keys by NumPy's sort, in their own memory where overwrite allows: np.sort copies first,
    a pass over new memory that cost 16 CPU ranks a fifth of their finish."""
    if overwrite and keys.flags.writeable:
        keys.sort()
        return keys
    return np.sort(keys)


def _sort_in_place(keys: np.ndarray, scratch: np.ndarray | None = None) -> None:
    if not lsd.available(keys):
        keys.sort()
    elif (done := lsd.sort(keys, True, scratch)) is not keys:  # the passes ended elsewhere
        keys[:] = done


def get_engine(backend: str, name: str | None = None) -> LocalSortEngine:
    """The engine for a backend ('cpu' or 'gpu'); name picks one ('numpy', 'cub', 'radix').

    On GPUs the default is our radix engine (local/radix.py), which itself hands the cases where
    CUB is faster or where it has no kernel to CubEngine.
    """
    if backend == "cpu":
        return NumpyEngine()
    if name == "cub":
        from .cub import CubEngine

        return CubEngine()
    if name in (None, "radix"):
        from .radix import RadixEngine

        return RadixEngine()
    raise ValueError(f"unknown local sort engine {name!r}")
