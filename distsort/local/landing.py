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

Digits are those of key - low over [0, end_bit), as in radix_sort; at least two passes (the
second is what orders the first pass's blocks). Blocks start 16-byte aligned (the histogram's
vector loads). The second pass's tile descriptors are built on the device (tiles.cu); passes
after it whose digit is the same for every key are skipped (the counts are read to the host
while the second pass runs); the first two always run.
"""

from __future__ import annotations

import numpy as np

from .radix import (
    KEYS_ONLY,
    MAX_N,
    MIN_N,
    WIDE_ROWS,
    _dummy,
    digit_counts,
    digit_passes,
    flag_words,
    onesweep,
    tile_keys,
)
from .tiles import piece_tiles

MIN_ROWS = MIN_N["narrow"]  # where our engine would sort a narrowed range (radix.py)


def usable(rows: int, itemsize: int, end_bit: int, align_rows: int) -> bool:
    """Whether a landing sort can finish `rows` keys of this width received in blocks that
    start at multiples of align_rows: from MIN_ROWS keys on, two passes or more."""
    return (itemsize in (4, 8) and align_rows * itemsize % 16 == 0
            and MIN_ROWS <= rows <= MAX_N and len(digit_passes(0, end_bit)) >= 2)


class LandingSort:
    """The sort of one receive buffer's blocks; `land` each block once, then `finish`.

    counts, starts: rows of each block and where it starts in the receive buffer, in receive
    order (the stable order of equal keys); out_starts: where each block's first pass writes
    its rows in the scratch (regions that do not overlap). The scratch is free to be written
    where a block lands, and holds at least sum(counts) keys.
    """

    def __init__(self, dtype, counts, starts, out_starts, low: int, end_bit: int):
        import cupy

        self.cp, self.dtype = cupy, np.dtype(dtype)
        self.counts = np.asarray(counts, np.int64)
        self.starts, self.out_starts = np.asarray(starts), np.asarray(out_starts)
        self.low = self.dtype.type(low)
        self.passes = digit_passes(0, end_bit)
        self.bits = (0, end_bit, len(self.passes))  # (begin_bit, end_bit, passes): radix.cu
        self.tile = tile_keys(self.dtype.itemsize, "keys")
        blocks, npasses = len(self.counts), len(self.passes)
        self.hist = cupy.zeros((blocks, npasses * 256), dtype=np.uint32)
        self.block_bases = cupy.empty((blocks, npasses * 256), dtype=np.uint32)
        self.counters = cupy.zeros(blocks + npasses, dtype=np.uint32)
        most = int(self.counts.max(initial=0))
        self.flags = cupy.empty(flag_words(-(-most // self.tile), most), dtype=np.uint32)
        self.landed = np.zeros(blocks, dtype=bool)

    def _flags(self, tiles: int, rows: int):
        """The look-back flags of one pass, zeroed (on the current stream)."""
        need = flag_words(tiles, rows)
        if need > self.flags.size:
            self.flags = self.cp.empty(need, dtype=np.uint32)
        flags = self.flags[:need]
        flags.fill(0)
        return flags

    def land(self, b: int, keys, scratch) -> None:
        """Block b's digit counts, then its first pass: keys (the receive buffer) -> its region
        of scratch. On the current stream, which must see the block in."""
        rows, dummy = int(self.counts[b]), _dummy(keys.device.id)
        self.landed[b] = True
        if rows == 0:
            return
        block = keys[int(self.starts[b]) : int(self.starts[b]) + rows]
        digit_counts(block, self.low, self.bits, self.hist[b], self.block_bases[b])
        out = scratch[int(self.out_starts[b]) : int(self.out_starts[b]) + rows]
        tiles = -(-rows // self.tile)
        pass_args = (self.block_bases[b, :256], self.counters[b : b + 1],
                     self._flags(tiles, rows))
        onesweep((block, dummy), (out, dummy), KEYS_ONLY, self.passes[0], self.low, pass_args,
                 rows >= WIDE_ROWS, tiles)

    def finish(self, keys, scratch):
        """The second and later passes, after every block has landed; returns the n sorted keys
        (a view of keys or of scratch, whichever the last pass wrote)."""
        if not self.landed.all():
            raise RuntimeError("LandingSort.finish before every block landed")
        cp, n, blocks = self.cp, int(self.counts.sum()), len(self.counts)
        hist = self.hist.reshape(blocks, len(self.passes), 256).astype(np.int64)
        total = hist.sum(axis=0)
        bases = (cp.cumsum(total, axis=1) - total).astype(np.uint32)
        descriptors, tiles = self._second_pass_tiles(hist[:, 0, :], n)
        pair = (scratch[:n], keys[:n])
        self._pass(0, 1, pair, bases, tiles, descriptors)
        varies = cp.asnumpy(total.max(axis=1)) < n  # read while the second pass runs
        later = [p for p in range(2, len(self.passes)) if varies[p]]
        for i, p in enumerate(later, start=1):
            self._pass(i, p, pair, bases, -(-n // self.tile))
        return pair[(1 + len(later)) % 2]

    def _pass(self, i: int, p: int, pair: tuple, bases, tiles: int, descriptors=()) -> None:
        """Digit pass p, the i-th after the blocks' first passes (from 0): pair[i % 2] ->
        pair[(i + 1) % 2]."""
        n, blocks, dummy = pair[0].size, len(self.counts), _dummy(pair[0].device.id)
        pass_args = (bases[p], self.counters[blocks + p : blocks + p + 1], self._flags(tiles, n))
        onesweep((pair[i % 2], dummy), (pair[(i + 1) % 2], dummy), KEYS_ONLY, self.passes[p],
                 self.low, pass_args, n >= WIDE_ROWS, tiles, descriptors)

    def _second_pass_tiles(self, first, n: int) -> tuple:
        """Tile descriptors (device uint32 start, rows) and how many tiles to launch for the
        second pass: each block's run of digit d (first[b, d] keys in its first-pass output),
        digit-major, blocks in order, cut into tiles (tiles.py); an upper bound of tiles,
        those past the last run empty."""
        cp = self.cp
        starts = cp.asarray(self.out_starts)[:, None] + cp.cumsum(first, axis=1) - first
        bound = n // self.tile + first.size
        return piece_tiles(first.T.reshape(-1), starts.T.reshape(-1), self.tile, bound), bound
