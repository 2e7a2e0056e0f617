"""Stages 2 and 3: the splitters from every rank's run samples, and where they cut each run.
"""

from __future__ import annotations

import numpy as np
from mpi4py import MPI

from ..columns import plain_keys
from ..transport import displacements
from .layout import Layout


def pick_splitters(comm, sample, buckets: int) -> tuple[np.ndarray, np.ndarray]:
    """All ranks' samples in (key, run, index) order, and the ranks of the buckets-1 splitters.

    The samples are gathered into one array (no per-rank copies) and put in order by one
    gather through their sorted positions: host memory about 56 bytes a sample row.
    """
    width = comm.allreduce(0 if sample is None else sample.shape[1], op=MPI.MAX) or 2
    mine = np.zeros((0, width), np.uint64) if sample is None else sample
    counts = np.array(comm.allgather(mine.size), np.int64)
    rows = np.empty((int(counts.sum()) // width, width), np.uint64)
    comm.Allgatherv(mine, [rows, (counts, displacements(counts)), MPI.UINT64_T])
    rows = rows[np.lexsort(rows.T[::-1])]
    return rows, np.arange(1, buckets, dtype=np.int64) * len(rows) // buckets


def cut_runs(store: list, key_words, layout: Layout, samples: np.ndarray,
             picks: np.ndarray) -> list[np.ndarray]:
    """For each of this rank's runs, its bucket boundaries: 0, one cut per splitter, length."""
    cuts, plain = [], _plain(store, key_words)
    for i, (lo, hi) in enumerate(layout.runs()):
        run = layout.first_run + i
        columns = [c[lo:hi] for c in store]
        if plain:
            inner = cut_plain(columns[0], run, samples[picks])
        else:
            own = np.flatnonzero(samples[:, -2] == run)  # ranks of the run's samples
            below = np.searchsorted(own, picks)  # of them, how many lie below each splitter
            inner = [cut_run(columns, key_words, run, int(c), samples[r], layout.stride)
                     for c, r in zip(below, picks)]
        cuts.append(np.array([0, *inner, hi - lo], dtype=np.int64))
    return cuts


def _plain(columns: list, key_words) -> bool:
    """Is the first column the only key word (numeric keys), so that it can be searched?"""
    empty = [c[:0] for c in columns]
    return plain_keys(empty, key_words(empty))


def cut_plain(keys: np.ndarray, run: int, splitters: np.ndarray) -> np.ndarray:
    """cut_run for every splitter at once where a run's keys are its only key word: a binary
    search of the whole sorted run (a few dozen page reads per splitter, and no Python
    loop: searched one by one, every splitter in every run, they took a costly share of a
    merge)."""
    key = splitters[:, 0].astype(keys.dtype)
    theirs = splitters[:, -2].astype(np.int64)
    ties_before = run < theirs  # the run's elements equal to the key come before the splitter
    cut = np.where(ties_before, np.searchsorted(keys, key, "right"),
                   np.searchsorted(keys, key, "left"))
    return np.where(theirs == run, splitters[:, -1].astype(np.int64), cut)


def cut_run(columns: list, key_words, run: int, below: int, splitter: np.ndarray,
            stride: int) -> int:
    """Elements of a sorted run that come before the splitter (key, run, index) in the
    (key, global position) order, given that `below` of the run's samples do."""
    if int(splitter[-2]) == run:
        return int(splitter[-1])
    if below == 0:
        return 0
    lo, hi = (below - 1) * stride + 1, min(below * stride, len(columns[0]))
    if lo >= hi:
        return lo
    words = key_words([c[lo:hi] for c in columns])
    return lo + rank_in_sorted(words, splitter[:-2], inclusive=run < int(splitter[-2]))


def rank_in_sorted(words: list, key, inclusive: bool) -> int:
    """Rows of lexicographically sorted host words before `key` (or not after it, inclusive)."""
    lo, hi = 0, len(words[0])
    for word, k in zip(words, key):
        k = word.dtype.type(k)
        part = word[lo:hi]
        lo, hi = (lo + int(np.searchsorted(part, k, "left")),
                  lo + int(np.searchsorted(part, k, "right")))
    return hi if inclusive else lo


def bucket_sizes(cuts: list[np.ndarray], buckets: int) -> np.ndarray:
    """Elements of this rank's runs in each bucket."""
    sizes = np.zeros(buckets, np.int64)
    for cut in cuts:
        sizes += np.diff(cut)
    return sizes
