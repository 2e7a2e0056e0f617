"""The chunk and block layout of the overlapped partition + exchange (steps/chunks.py)."""

from __future__ import annotations

import numpy as np
import pytest

from distsort.local import landing
from distsort.local.partition import TILE
from distsort.steps.chunks import (
    Plan,
    block_starts,
    buffer_rows,
    chunk_bounds,
    landed_rows,
    send_starts,
)
from distsort.transport import aligned_displacements


@pytest.mark.parametrize("n", [0, 1, TILE - 1, TILE, 5 * TILE + 7, 100 * TILE])
@pytest.mark.parametrize("chunks", [1, 2, 4, 7])
@pytest.mark.parametrize("min_chunk", [1, TILE, 10 * TILE])
def test_chunks_cover_the_shard_in_whole_tiles(n, chunks, min_chunk):
    bounds = chunk_bounds(n, chunks, min_chunk)
    assert bounds[0][0] == 0 and bounds[-1][1] == n
    assert all(a[1] == b[0] for a, b in zip(bounds, bounds[1:]))
    assert all(lo % TILE == 0 for lo, _ in bounds)
    assert len(bounds) <= max(1, min(chunks, n // min_chunk))
    assert all(hi > lo for lo, hi in bounds) or bounds == [(0, 0)]


def test_block_starts_are_aligned_and_in_row_major_order():
    counts = np.array([[5, 0, 1030], [0, 2048, 1]], dtype=np.int64)
    starts = block_starts(counts, 1024)
    np.testing.assert_array_equal(starts, [[0, 1024, 1024], [3072, 3072, 5120]])
    assert (starts % 1024 == 0).all()
    np.testing.assert_array_equal(block_starts(counts, 1), [[0, 5, 5], [1035, 1035, 3083]])
    assert aligned_displacements(np.zeros(0, dtype=np.int64), 1024).shape == (0,)


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("align", [1, 1024])
def test_sent_chunks_start_above_what_earlier_chunks_landed(seed, align):
    """The landing sort writes chunk c's received rows, packed, at [landed[c], landed[c+1]) of
    the send buffer while later chunks are sent: no later chunk's block may lie below that."""
    rng = np.random.default_rng(seed)
    chunks, ranks = int(rng.integers(1, 5)), int(rng.integers(1, 5))
    sent = rng.integers(0, 5000, (chunks, ranks)) * rng.integers(0, 2, (chunks, ranks))
    received = rng.integers(0, 9000, (ranks, chunks))
    starts = send_starts(sent, received, align)
    landed = landed_rows(received)
    ends = starts + sent
    assert (starts % align == 0).all()
    flat_starts, flat_ends = starts.reshape(-1), ends.reshape(-1)
    assert (flat_starts[1:] >= flat_ends[:-1]).all()  # chunk-major, no overlap
    for c in range(chunks):  # chunk c is in flight or waiting while chunk c-1 lands
        assert (starts[c] >= landed[c]).all()
    assert landed[-1] == received.sum()


def test_landing_starts_pack_chunk_after_chunk():
    received = np.array([[3, 10], [4, 20], [5, 30]])  # (source, chunk)
    none = np.zeros((2, 3), np.int64)
    plan = Plan([], [], none[..., None], none, none, received, block_starts(received, 1),
                received[..., None])
    # buffer order: source-major; chunk 0 lands at 0.., sources in order; chunk 1 after 12 rows
    np.testing.assert_array_equal(plan.landing_starts(), [0, 12, 3, 22, 7, 42])


def test_a_left_over_last_bit_rides_clamped_on_the_pass_before():
    whole = [(6, 8), (14, 8), (22, 8)]
    assert landing.plan_passes(6, 2**30 - 1, False) == (whole, False)
    assert landing.plan_passes(6, 2**30 + 2**20, False) == (whole[:2] + [(22, 9)], True)
    assert landing.plan_passes(6, 2**31 - 1, False) == (whole + [(30, 1)], False)  # too wide
    assert landing.plan_passes(0, 2**8, True) == ([(0, 8), (8, 1)], False)  # 2 with landing
    assert landing.plan_passes(0, 2**16 + 5, True) == ([(0, 8), (8, 9)], True)
    assert landing.plan_passes(6, 3, False) == ([(6, 1)], False)  # one pass orders the runs


def test_landing_is_used_where_it_can_run():
    big = landing.MIN_ROWS
    assert landing.usable(big, 4, 30, 1024)
    assert landing.usable(big, 8, 62, 1024)
    assert not landing.usable(big, 4, 8, 1024)  # one pass: nothing to order the blocks
    assert not landing.usable(big - 1, 4, 30, 1024)
    assert not landing.usable(big, 4, 30, 1)  # blocks not 16-byte aligned
    assert not landing.usable(big, 2, 16, 1024)
    assert not landing.usable(1 << 32, 4, 32, 1024)


def test_senders_sort_by_digit_only_where_every_buffer_offset_fits_32_bits():
    """partition.digit_bits: plain 4/8-byte keys on the radix engine, 2-16 ranks, from
    landing.MIN_ROWS keys a rank on, and no shard past digit_partition.MAX_ROWS rows (the bucket
    scatter's 32-bit offsets); the same answer from global facts on every rank."""
    from types import SimpleNamespace

    from distsort.local import digit_partition
    from distsort.steps import partition

    def bits(ranks=4, dtype=np.uint32, largest=1 << 30, engine="radix", columns=None):
        rt = SimpleNamespace(comm=SimpleNamespace(Get_size=lambda: ranks),
                             backend=SimpleNamespace(engine=SimpleNamespace(name=engine)))
        keys = np.zeros(4, dtype)
        cols = [keys] if columns is None else columns
        return partition.digit_bits(rt, cols, [keys], ranks << 30, largest)

    assert bits() == 6 and bits(ranks=2) == 7 and bits(ranks=16, dtype=np.uint64) == 4
    assert bits(largest=digit_partition.MAX_ROWS) == 6
    assert bits(largest=digit_partition.MAX_ROWS + 1) == 0  # P=2, 8x2^30 keys: 2^32 a rank
    assert bits(ranks=17) == 0 and bits(dtype=np.uint16) == 0 and bits(engine="cub") == 0
    assert bits(columns=[np.zeros(4, np.uint32), np.zeros(4)]) == 0  # keys with values


def test_buffer_rows_hold_what_is_needed_and_stay_put_across_sorts():
    even = 2**30
    sizes = {buffer_rows(even + d, even) for d in range(-10**6, 10**7, 997)}
    assert len(sizes) == 1  # every sort within 1/64 of an even shard asks the pool for as much
    assert sizes.pop() >= even + 10**7
    big = buffer_rows(2 * even + 3, even)
    assert big >= 2 * even + 3 and big % (even // 64) == 0
    assert buffer_rows(7, 0) == 7


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("align", [1, 1024])
def test_chunk_zero_is_laid_out_by_its_sender_alone(seed, align):
    """plan() scatters chunk 0 before any rank knows what it receives: its blocks start where
    send_starts, told everything, puts them (aligned_displacements, on the device there)."""
    rng = np.random.default_rng(seed)
    chunks, ranks = int(rng.integers(1, 5)), int(rng.integers(1, 5))
    sent = rng.integers(0, 5000, (chunks, ranks)) * rng.integers(0, 2, (chunks, ranks))
    received = rng.integers(0, 9000, (ranks, chunks))
    np.testing.assert_array_equal(aligned_displacements(sent[0], align),
                                  send_starts(sent, received, align)[0])
