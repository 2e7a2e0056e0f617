"""An LSD radix sort of keys that land in blocks: each block's first digit pass runs as soon as
the block is in, the rest once every block is (the GPU finish of the chunked exchange).

Why: the finish after an exchange is one radix sort of everything received, and it waits for the
last block. Here the first pass of a block sorts that block alone by the first digit, into the
block's own region of the output (`out_starts`), while later blocks are still in flight. The
second pass then reads, digit by digit, every block's run of that digit in block order (tile
descriptors, radix.cu): the order in which one first pass over all blocks would have left them,
so the sort stays a stable LSD sort, and the later passes are the usual ones. Each block's
digit counts of every pass come from one histogram read of the block when it lands, so none is
left to read after the last block.

Presorted blocks: where the senders' partition already sorted every block by the low `bits`
bits of key - low (steps/chunks.ByDigit), with the counts of each digit, landing only counts the
later digits, and every pass of [bits, end_bit) runs after the last block, the first of them reading
the blocks' runs in the receive buffer: one pass fewer for the receiver. Key-value pairs (a
column of 4 or 8 bytes beside the keys) land presorted only, and those passes move the values
with their keys, out of the receive buffers with their gaps: no packing copy of either column.

A clamped last pass: where the key range (span = the largest key - low) is a little wider than
the passes' whole 8-bit digits -- 2^30 and a little on 4 ranks, 6 bits of it sorted by the
senders -- the one bit left over would take a pass of its own. Instead, the last pass takes it
too, its digit clamped to 255 (radix.cu), so that only the keys of digit 255 are out of order
after it: a suffix, at most the top TAIL_BINS / 256 of the range and for evenly spread keys
under 1/8 of them, which one small radix sort of its own puts in order.

Digits are those of key - low over [0, end_bit), as in radix_sort; at least two passes (the
second is what orders the first pass's blocks), or one after presorted blocks. Blocks start
16-byte aligned (the histogram's vector loads). The tile descriptors of the pass over the
blocks' runs are built on the device (tiles.cu); passes after it whose digit is the same for
every key are skipped (the counts are read to the host while that pass runs); it always runs,
and so does a landing first pass.
"""

from __future__ import annotations

import numpy as np

from ..arrays import pooled_pinned
from .radix import (
    KEYS_ONLY,
    MAX_N,
    MIN_N,
    WIDE_ROWS,
    WORD_NAME,
    digit_counts,
    digit_passes,
    flag_words,
    onesweep,
    placeholder,
    radix_sort,
    tile_keys,
    value_words,
)
from .tiles import piece_tiles

MIN_ROWS = MIN_N["narrow"]  # where our engine would sort a narrowed range (radix.py)
TAIL_BINS = 32  # the last pass is clamped where its digit would reach 256 + at most this


def plan_passes(first_bits: int, span: int, landing: bool) -> tuple[list, bool]:
    """The (shift, bits) of the passes over [first_bits, end_bit) of key - low (end_bit: that of
    span, one bit at least), and whether the last is clamped: a left-over last bit rides on the
    pass before it where span >> that pass's shift stays below 256 + TAIL_BINS, keeping two
    passes at least with a landing first pass (one otherwise)."""
    passes = digit_passes(first_bits, max(span.bit_length(), first_bits + 1))
    if (len(passes) >= 2 + int(landing) and passes[-1][1] == 1
            and span >> passes[-2][0] < 256 + TAIL_BINS):
        return passes[:-2] + [(passes[-2][0], 9)], True
    return passes, False


def usable(rows: int, itemsize: int, end_bit: int, align_rows: int, presorted: bool = False
           ) -> bool:
    """Whether a landing sort can finish `rows` keys of this width received in blocks that
    start at multiples of align_rows: from MIN_ROWS keys on, two passes or more (or presorted
    blocks)."""
    return (itemsize in (4, 8) and align_rows * itemsize % 16 == 0
            and MIN_ROWS <= rows <= MAX_N
            and (presorted or len(digit_passes(0, end_bit)) >= 2))


class LandingSort:
    """The sort of one receive buffer's blocks; `land` each block once, then `finish` (after
    `prepare`, where the host has time to queue it before the blocks are in).

    counts, starts: rows of each block and where it starts in the receive buffer, in receive
    order (the stable order of equal keys); out_starts: where each block's first pass writes
    its rows in the scratch (regions that do not overlap). The scratch is free to be written
    where a block lands, and holds at least sum(counts) keys. presorted (or None): (bits,
    digit counts (blocks, 2^bits)) of blocks that arrive sorted by their first digit, bits wide
    (out_starts is then unused: no pass runs before the last block is in). values (or None):
    the dtype of a column of 4 or 8 bytes that rides with the keys (presorted blocks only: the
    passes after the last block move it; landing moves nothing).
    """

    def __init__(self, dtype, counts, starts, out_starts, low: int, span: int,
                 presorted: tuple | None = None, values=None):
        import cupy

        if values is not None and presorted is None:
            raise ValueError("LandingSort: values ride on presorted blocks only")
        self.cp, self.dtype = cupy, np.dtype(dtype)
        self.counts = np.asarray(counts, np.int64)
        self.starts, self.out_starts = np.asarray(starts), np.asarray(out_starts)
        self.low = self.dtype.type(low)
        first_bits, self.first = presorted or (0, None)
        self.passes, self.clamped = plan_passes(first_bits, span, self.first is None)
        end_bit = sum(self.passes[-1])
        self.bits = (first_bits, end_bit, len(self.passes))  # (begin_bit, end_bit, passes)
        self.tile = tile_keys(self.dtype.itemsize, "keys" if values is None else "pairs")
        word = None if values is None else WORD_NAME[np.dtype(values).itemsize]
        self.kinds = KEYS_ONLY if word is None else (word, word, 1)  # onesweep's value kind
        blocks, npasses = len(self.counts), len(self.passes)
        self.hist = cupy.zeros((blocks, npasses * 256), dtype=np.uint32)
        self.block_bases = cupy.empty((blocks, npasses * 256), dtype=np.uint32)
        self.counters = cupy.zeros(blocks + npasses, dtype=np.uint32)
        self.flags = cupy.empty(0, dtype=np.uint32)  # grown by the first pass that needs more
        self.landed = np.zeros(blocks, dtype=bool)
        self.ready = None  # prepare()'s bases, host counts (and copy event), run tiles

    def _flags(self, tiles: int, rows: int):
        """The look-back flags of one pass, zeroed (on the current stream)."""
        need = flag_words(tiles, rows)
        if need > self.flags.size:
            self.flags = self.cp.empty(need, dtype=np.uint32)
        flags = self.flags[:need]
        flags.fill(0)
        return flags

    def land(self, b: int, keys, scratch) -> None:
        """Block b's digit counts, then (unless presorted) its first pass: keys (the receive
        buffer) -> its region of scratch. On the current stream, which must see the block in."""
        rows, dummy = int(self.counts[b]), placeholder(keys.device.id)
        self.landed[b] = True
        if rows == 0:
            return
        block = keys[int(self.starts[b]) : int(self.starts[b]) + rows]
        digit_counts(block, self.low, self.bits, self.hist[b], self.block_bases[b])
        if self.first is not None:  # sorted by the sender: no pass runs before the last block
            return
        out = scratch[int(self.out_starts[b]) : int(self.out_starts[b]) + rows]
        tiles = -(-rows // self.tile)
        pass_args = (self.block_bases[b, :256], self.counters[b : b + 1],
                     self._flags(tiles, rows))
        onesweep((block, dummy), (out, dummy), KEYS_ONLY, self.passes[0], self.low, pass_args,
                 rows >= WIDE_ROWS, tiles)

    def prepare(self) -> None:
        """Queue what the passes after the last block need (every pass's bases, the tile
        descriptors of the pass over the blocks' runs, the digit counts' copy to the host) once
        every block has landed: device work only, so the host can queue it while the last
        transfers run, not after them."""
        if self.ready is not None:
            return
        if not self.landed.all():
            raise RuntimeError("LandingSort: passes queued before every block landed")
        cp, n, blocks = self.cp, int(self.counts.sum()), len(self.counts)
        hist = self.hist.reshape(blocks, len(self.passes), 256).astype(np.int64)
        total = hist.sum(axis=0)
        bases = (cp.cumsum(total, axis=1) - total).astype(np.uint32)
        counts = pooled_pinned(total.shape, np.int64)  # read by finish() as passes run
        total.get(out=counts, blocking=False)
        read = cp.cuda.get_current_stream().record()
        if self.first is None:  # pass 0 ran as the blocks landed: its runs are in the scratch
            runs, run_starts = hist[:, 0, :], self.out_starts
        else:  # the blocks are the runs of their first digit, in the receive buffer (with gaps)
            runs, run_starts = self.first, self.starts
        self.ready = (bases, (counts, read)) + self._run_tiles(runs, run_starts, n)

    def finish(self, columns: list, scratch: list) -> list:
        """Every pass not yet run, after every block has landed: columns are the receive
        buffers (keys, then the values where they ride), scratch as many buffers of at least n
        rows (the first as given to land); returns the n sorted rows of each column (views of
        columns or of scratch, whichever the last pass wrote)."""
        self.prepare()
        bases, (counts, read), descriptors, tiles = self.ready
        n = int(self.counts.sum())
        pair = ([s[:n] for s in scratch], [c[:n] for c in columns])  # the later passes' buffers
        if self.first is None:  # pass 0's runs are in the scratch
            done, source = 1, pair[0]
        else:  # the runs are the blocks in the receive buffer
            done, source = 0, columns
            pair = pair[::-1]
        self._pass(source, pair[1], done, bases, tiles, descriptors)
        read.synchronize()  # the digit counts, copied before that pass: read while it runs
        later = [p for p in range(done + 1, len(self.passes)) if counts[p].max() < n]
        for i, p in enumerate(later, start=1):
            self._pass(pair[i % 2], pair[(i + 1) % 2], p, bases, -(-n // self.tile))
        done, spare = pair[(1 + len(later)) % 2], pair[len(later) % 2]
        if self.clamped:
            self._sort_tail(done, spare, int(counts[-1, 255]))
        return list(done)

    def _sort_tail(self, columns: list, spare: list, rows: int) -> None:
        """After a clamped last pass: the rows of its digit 255, the last `rows` (in order on
        the bits below that pass's), sorted in place on the rest (spare: as many keys to write
        on). The suffix starts 16 bytes aligned, a few rows early (the sort's vector loads):
        those are in order already."""
        keys, n, per = columns[0], columns[0].size, 16 // self.dtype.itemsize
        start = (n - rows) // per * per
        if n - start < 2:
            return
        shift, bits = self.passes[-1]
        vals = value_words(columns[1])[start:] if len(columns) > 1 else None
        out, out_vals = radix_sort(keys[start:], vals, "keys" if vals is None else "pairs",
                                   begin_bit=shift, end_bit=shift + bits, low=self.low,
                                   overwrite=True, scratch=spare[0][start:])
        if out.data.ptr != keys[start:].data.ptr:
            keys[start:] = out
        if vals is not None and out_vals.data.ptr != vals.data.ptr:
            vals[...] = out_vals

    def _pass(self, src: list, dst: list, p: int, bases, tiles: int, descriptors=()) -> None:
        """Digit pass p: src -> dst (all of it: the n rows of every column), through
        descriptors where given."""
        n, blocks, dummy = dst[0].size, len(self.counts), placeholder(dst[0].device.id)
        pass_args = (bases[p], self.counters[blocks + p : blocks + p + 1], self._flags(tiles, n))
        src, dst = [(c[0], value_words(c[1]) if len(c) > 1 else dummy) for c in (src, dst)]
        onesweep(src, dst, self.kinds, self.passes[p], self.low, pass_args, n >= WIDE_ROWS,
                 tiles, descriptors)

    def _run_tiles(self, runs, run_starts, n: int) -> tuple:
        """Tile descriptors (device uint32 start, rows) and how many tiles to launch for the
        pass over the blocks' runs: each block's run of first digit d (runs[b, d] keys, the
        block sorted by that digit from run_starts[b] on), digit-major, blocks in order, cut into
        tiles (tiles.py); an upper bound of tiles, those past the last run empty."""
        cp = self.cp
        runs = cp.asarray(runs)
        starts = cp.asarray(run_starts)[:, None] + cp.cumsum(runs, axis=1) - runs
        bound = n // self.tile + runs.size
        return piece_tiles(runs.T.reshape(-1), starts.T.reshape(-1), self.tile, bound), bound
