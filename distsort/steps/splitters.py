"""The splitters: p-1 rows of the (key words, global position) order picked from every rank's
sample, the same on every rank; each row's destination among them, and each rank's key range.

Every element is ordered by the tuple (key words..., global position), a strict total order that
agrees with the key order and, among equal keys, with the input order. Splitters are elements of
that order, so a run of equal keys is cut across ranks like any other run: no rank can be flooded
by one repeated value, and a stable sort stays stable across ranks.
"""

from __future__ import annotations

import numpy as np

from ..local.order import stable_order

STRIDE = 64  # sample rows a run between the marks that bracket each splitter's key


def choose_splitters(rt, sample, sizes: list[int]) -> np.ndarray:
    """Every rank's sample (sizes: its rows on every rank, sample_sizes) to every rank, ordered
    there, p-1 evenly spaced rows: the splitters, (p-1, columns) uint64 on the host, the same on
    every rank without a broadcast.

    One all-to-all in which each rank sends its whole sample to every rank (all its send blocks
    start at row 0) moves it over the transport, device to device. The received rows run in
    global-position order (ranks in order, each sample in position order), so a stable sort by
    the key words alone, on the device, leaves them in (key words, position) order; the sort is
    deterministic, so every rank picks the same rows. On CPUs, for one key word, each rank
    orders its sample by key (stably) before sending it, and every rank selects the picked
    rows from the p sorted runs it receives (selected) without ordering them all (a merge of
    16 ranks' samples was most of the sample phase).
    """
    p = rt.comm.Get_size()
    runs = rt.backend.name == "cpu" and sample.shape[1] == 2  # one key word
    if runs:
        sample = sample[key_order(sample[:, 0])]
    counts = np.full(p, len(sample), dtype=np.int64)
    recv = np.asarray(sizes, dtype=np.int64)
    rows = rt.transport.alltoallv([sample], counts, recv, np.zeros(p, np.int64))[0]
    if len(rows) == 0:
        return np.zeros((p - 1, sample.shape[1]), np.uint64)
    picks = np.arange(1, p, dtype=np.int64) * len(rows) // p
    if runs:
        return rows[selected(np.ascontiguousarray(rows[:, 0]), recv, picks)]
    keys = [rt.xp.ascontiguousarray(rows[:, c]) for c in range(rows.shape[1] - 1)]
    order = stable_order(keys, rt.backend.engine)
    return rt.backend.to_host(rows[order[rt.backend.from_host(picks)]])


def key_order(keys: np.ndarray) -> np.ndarray:
    """The stable order (int64) of a host sample's key words: where every key and row number
    fits 32 bits, by NumPy's sort of (key, row) packed in one word, several times faster
    than its stable argsort (timsort for 64-bit words: 2.2 against 0.3 ms for 28k rows on the
    2-core machine, bench/RESULTS.md, session 47)."""
    n = len(keys)
    if n == 0 or n >= 2**32 or int(keys.max()) >= 2**32:
        return np.argsort(keys, kind="stable")
    packed = (keys.astype(np.uint64) << np.uint64(32)) | np.arange(n, dtype=np.uint64)
    return (np.sort(packed) & np.uint64(2**32 - 1)).astype(np.int64)


def selected(keys: np.ndarray, counts: np.ndarray, picks: np.ndarray) -> np.ndarray:
    """The rows of keys (runs of counts[i] rows one after another, each sorted, stably) that
    stand at places `picks` of their stable order (equal keys in run order, then row order):
    each pick's key from the few rows that bracket it (_picked_keys), its place among the rows
    of that key by a search in every run. Where a merge moves every row log2(runs) times, this
    orders one row in STRIDE and the few rows between each pick's two marks."""
    if len(picks) == 0:
        return picks
    starts = np.concatenate(([0], np.cumsum(counts)[:-1]))
    runs = [keys[a : a + c] for a, c in zip(starts, counts)]
    values = _picked_keys(keys, runs, picks)
    first = np.array([np.searchsorted(r, values, "left") for r in runs])  # (run, pick)
    equal = np.array([np.searchsorted(r, values, "right") for r in runs]) - first
    before = np.cumsum(equal, axis=0) - equal  # equal keys in the runs before each run
    nth = picks - first.sum(axis=0)  # the pick's place among the rows of its key
    run = np.argmax(nth < before + equal, axis=0)  # the run that holds it
    cols = np.arange(len(picks))
    return starts[run] + first[run, cols] + nth - before[run, cols]


def _picked_keys(keys: np.ndarray, runs: list, picks: np.ndarray) -> np.ndarray:
    """The key at each place `picks` of the sorted keys (runs: its sorted runs), each from the
    few rows between two of the runs' every STRIDE-th keys that must hold it, not by a partial
    sort of all the keys (most of the 16-rank sample phase's own work, bench/RESULTS.md,
    session 51); where ties make those rows many, by that partial sort."""
    marks = np.sort(np.concatenate([r[STRIDE - 1 :: STRIDE] for r in runs]))
    if len(marks) == 0:
        return np.partition(keys, picks)[picks]
    # a mark of rank i has >= STRIDE * (i + 1) keys at or below it, and fewer than
    # STRIDE * i + len(runs) * STRIDE keys below it: the pick lies between these two marks
    low = marks[np.clip((picks - len(runs) * STRIDE) // STRIDE, 0, len(marks) - 1)]
    high = marks[np.minimum(picks // STRIDE, len(marks) - 1)]
    below = sum(np.searchsorted(r, low, "left") for r in runs)
    upto = sum(np.searchsorted(r, high, "right") for r in runs)
    low = np.where(below <= picks, low, np.iinfo(keys.dtype).min)  # else (near the ends) wider
    below = np.where(below <= picks, below, 0)
    high = np.where(upto > picks, high, np.iinfo(keys.dtype).max)
    if int(np.sum(np.where(upto > picks, upto, len(keys)) - below)) > len(keys):
        return np.partition(keys, picks)[picks]  # ties: the brackets hold most rows
    firsts = [np.searchsorted(r, low, "left") for r in runs]
    ends = [np.searchsorted(r, high, "right") for r in runs]
    values = np.empty(len(picks), keys.dtype)
    for i, nth in enumerate(picks - below):
        rows = np.concatenate([r[a[i] : b[i]] for r, a, b in zip(runs, firsts, ends)])
        values[i] = np.partition(rows, nth)[nth]
    return values


def classify(words, offset: int, splitters: np.ndarray, xp):
    """Bucket of every element = number of splitters <= (its key words, its global position).

    The first word is located by binary search (searchsorted); only elements whose first word
    equals some splitter's go on to a vectorised binary search over the remaining columns
    (on GPUs too: ufuncs, not operators with numbers, as arrays.py says).
    """
    n = len(words[0])
    if len(splitters) == 0:
        return xp.zeros(n, dtype=np.int64)
    first = xp.asarray(splitters[:, 0].astype(words[0].dtype))
    lo = xp.searchsorted(first, words[0], side="left")
    hi = xp.searchsorted(first, words[0], side="right")
    tied = xp.nonzero(hi > lo)[0]
    if tied.size:
        rest = [w[tied] for w in words[1:]] + [xp.add(tied.astype(np.uint64), np.uint64(offset))]
        table = [xp.asarray(splitters[:, c + 1].astype(r.dtype)) for c, r in enumerate(rest)]
        lo[tied] = _search_ties(table, rest, lo[tied], hi[tied], len(splitters), xp)
    return lo


def _search_ties(table, rest, lo, hi, count: int, xp):
    """Per element, the first index in [lo, hi) whose splitter's remaining columns exceed it."""
    for _ in range(count.bit_length()):
        active = lo < hi
        mid = xp.minimum(xp.floor_divide(lo + hi, 2), count - 1)
        below = _tuple_le([t[mid] for t in table], rest, xp)
        lo = xp.where(active & below, xp.add(mid, 1), lo)
        hi = xp.where(active & ~below, mid, hi)
    return lo


def _tuple_le(a, b, xp):
    """Lexicographic a <= b over parallel lists of word arrays."""
    less = xp.zeros(len(b[0]), dtype=bool)
    equal = xp.ones(len(b[0]), dtype=bool)
    for x, y in zip(a, b):
        less |= equal & (x < y)
        equal &= x == y
    return less | equal


def key_range(splitters: np.ndarray, rank: int, word) -> tuple[int, int, int]:
    """(low, top, end_bit): this rank's first key words after the exchange lie in [low, top],
    the first words of splitters rank-1 and rank (0 and the word's maximum at the ends), so key
    - low fits in end_bit bits."""
    low = int(splitters[rank - 1, 0]) if rank > 0 else 0
    top = int(splitters[rank, 0]) if rank < len(splitters) else int(np.iinfo(word).max)
    return low, top, (top - low).bit_length()


def outside_key(dtype, low: int, top: int) -> tuple | None:
    """A key just outside the rank's key range [low, top] for the gaps between received pairs,
    so that they sort after (top + 1) or before (low - 1) every received key, with the (low,
    end_bit) that cover it: (fill, low, end_bit, whether the gaps sort last), or None where
    the range holds every key of the dtype."""
    if top < np.iinfo(dtype).max:
        return dtype.type(top + 1), low, (top + 1 - low).bit_length(), True
    if low > 0:
        return dtype.type(low - 1), low - 1, (top - low + 1).bit_length(), False
    return None
