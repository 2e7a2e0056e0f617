"""The finish: each rank sorts what it received, once (a sort begun as the blocks landed only
runs its rest), so the ranks' shards in rank order are the whole data set sorted."""

from __future__ import annotations

import numpy as np

from ..columns import KeyWords, own_key, plain_keys, radix_rows
from ..io import libc
from ..local import landing
from ..local.landing import LandingSort
from ..local.merge import available, merge_runs, worth_merging
from ..local.order import stable_order
from ..local.rows import take
from ..runtime import Runtime
from .chunks import Plan
from .splitters import key_range, outside_key


def landing_sort(rt: Runtime, columns: list, words: list, layout: Plan,
                 splitters) -> LandingSort | None:
    """A sort to start as the blocks land, for plain keys that our radix engine will sort, and
    for pairs (radix_rows) that the senders sorted by their first digit; else None (the finish
    sorts after the exchange)."""
    keys, rank = words[0], rt.comm.Get_rank()
    pairs = len(columns) > 1
    if (not radix_rows(columns, words) or rt.backend.engine.name != "radix"
            or (pairs and not layout.bits)):
        return None
    low, top, end_bit = key_range(splitters, rank, keys.dtype)
    counts, starts = layout.blocks()
    if not landing.usable(
            layout.recv_rows, keys.dtype.itemsize, end_bit, rt.transport.align_rows,
            layout.bits > 0):
        return None
    presorted = (layout.bits, layout.digits.reshape(len(counts), -1)) if layout.bits else None
    return LandingSort(keys.dtype, counts, starts, layout.landing_starts(), low, top - low,
                       presorted, columns[1].dtype if pairs else None)


def finish(rt: Runtime, received, key_words: KeyWords, splitters) -> list:
    """Sort what this rank received (exchange.Received), whose source blocks may have gaps
    between them; a finish begun during the exchange (received.begun) runs its rest.

    Plain keys are sorted in place, over only the bits of key - low that vary in this rank's key
    range, with the sent keys (given up here) as the sort's scratch, so the sort takes no
    memory beyond the two exchange buffers; the gaps are filled with the range's
    largest key, and as many keys are dropped from the end of the result. Pairs (a key column
    and one more) are sorted in the receive buffers too, their gaps' keys just outside the range
    (outside_key), so the gaps sort to one end and are cut off: a copy of both columns less.
    Other rows whose first column is their key (several columns) are ordered by the words of
    the received rows and taken from the receive buffers once, with no packing copy before;
    records, whose key words are no column, were ordered as they arrived (exchange.Ordered).
    """
    columns, blocks = received.columns, received.blocks
    sent, received.sent = received.sent, None  # held here only: given up as soon as may be
    if received.begun is not None:
        return received.begun.finish(columns, sent)
    n, rank = int(blocks[0].sum()), rt.comm.Get_rank()
    words = key_words(columns)
    if received.runs and n == len(columns[0]):
        out = merged(columns, words, blocks[0], sent[0], rt.backend.engine)
        if out is not None:
            return out
    low, top, end_bit = key_range(splitters, rank, words[0].dtype)
    if plain_keys(columns, words):
        _fill_gaps(columns[0], blocks, words[0].dtype.type(top))
        scratch = _fitting_scratch(sent, columns[0])
        out = rt.backend.engine.sort(columns[0], end_bit=end_bit, low=low, overwrite=True,
                                     scratch=scratch)
        if received.placed:
            _let_go_beside(out[:n], sent[0])
        return [out[:n]]
    if received.placed:  # pairs: the sent rows' memory, behind the received rows', is not needed
        for tail in sent:
            libc.let_go(tail.ctypes.data, tail.ctypes.data + tail.nbytes)
    del sent
    if len(columns[0]) == n:  # no gaps
        return local_sort(rt, columns, key_words, end_bit=end_bit, low=low, overwrite=True)
    outside = outside_key(words[0].dtype, low, top)
    if own_key(columns, words) and len(columns) == 2 and outside:
        fill, low, end_bit, last = outside  # pairs: sorted in the receive buffers, gaps and all
        _fill_gaps(columns[0], blocks, fill)
        out = local_sort(rt, columns, key_words, end_bit=end_bit, low=low, overwrite=True)
        first = 0 if last else len(columns[0]) - n
        return [c[first : first + n] for c in out]
    order = received_order(rt, words, blocks, outside)
    return [take(c, order) for c in columns]


def merged(columns: list, words: list, counts, scratch=None, engine=None) -> list | None:
    """Host rows that are sorted runs of counts[i] rows one after another (CPUs: one a source
    rank, partition.sorted_first; a round's slices of the runs out of core), merged by their
    first column (local/merge.py; scratch: an array it may use), the columns given up; None
    where they cannot be (several key words, no compiled merge) or, for plain keys, where the
    engine (given) sorts them faster than they merge (merge.worth_merging)."""
    if not (own_key(columns, words) and available(words[0])):
        return None
    rate = getattr(engine, "seconds_per_key", {}).get(words[0].dtype.itemsize)
    if len(columns) == 1 and not worth_merging(words[0], counts, rate):
        return None
    keys, order = merge_runs(columns[0], counts, positions=len(columns) > 1, overwrite=True,
                             scratch=scratch)
    return [keys] + [take(c, order) for c in columns[1:]]


def received_order(rt: Runtime, words: list, blocks, outside: tuple | None) -> object:
    """The stable order of the received rows by their key words (most significant first), as
    rows of the receive buffers: the blocks (rows, start), not the gaps between them. With
    outside (outside_key of the first word's range: the words are this rank's to change), the
    gaps' first words are set to a key that sorts them to one end, where they are cut off: no
    gathers of the blocks' rows (those took a good part of the sort's time)."""
    counts, starts = blocks
    n = int(counts.sum())
    if n == len(words[0]):  # no gaps
        return stable_order(words, rt.backend.engine)
    if outside is not None:
        fill, _, _, last = outside
        _fill_gaps(words[0], blocks, fill)
        order = stable_order(words, rt.backend.engine)
        return order[:n] if last else order[len(order) - n :]
    rows = rt.xp.concatenate([rt.xp.arange(a, a + k) for a, k in zip(starts, counts)])
    return stable_order(words, rt.backend.engine, rows)


def _fill_gaps(keys, blocks, value) -> None:
    """Set the rows between and after the received blocks (aligned starts leave gaps) to value."""
    counts, starts = blocks
    for start, count, end in zip(starts, counts, list(starts[1:]) + [len(keys)]):
        keys[start + count : end] = value


def _let_go_beside(out, tail) -> None:
    """Keys placed where they landed (exchange._into_place) hold one allocation: the received
    head, the sent tail after it (the sort's scratch). The pages of that allocation outside out
    (in either part, or all of them where out is elsewhere) go back to the system now, not when
    out goes: out would hold all of them. (The head alone is no guide: an empty one is a
    buffer of its own.)"""
    memory = tail
    while isinstance(memory.base, np.ndarray):
        memory = memory.base
    lo = memory.ctypes.data
    hi = lo + memory.nbytes
    start = min(max(out.ctypes.data, lo), hi)
    end = min(max(out.ctypes.data + out.nbytes, start), hi)
    libc.let_go(lo, start)
    libc.let_go(end, hi)


def _fitting_scratch(sent: list, keys):
    """The sent keys' buffer, if it can hold these keys (else None: the engine allocates)."""
    buf = sent[0]
    fits = (buf.dtype == keys.dtype and buf.ndim == 1 and len(buf) >= len(keys)
            and buf.flags.c_contiguous)
    return buf if fits else None


def local_sort(rt: Runtime, columns: list, key_words: KeyWords, **options) -> list:
    """Sort this rank's rows by their key words, stably: plain keys directly; a key column with
    one more column (values, positions, the original floats) as pairs, which our radix engine
    moves with their keys in its passes (several times faster than an order and gathers);
    else by a stable order. options (SortOptions, end_bit)
    are for the engine where the first column is the only key word."""
    words, engine = key_words(columns), rt.backend.engine
    if own_key(columns, words) and len(columns) <= 2:
        if len(columns) == 1:
            return [engine.sort(words[0], **options)]
        return list(engine.sort_pairs(columns[0], columns[1], **options))
    order = stable_order(words, engine)
    return [take(c, order) for c in columns]
