"""Splitter sampling and classification on one process (no MPI needed)."""

from __future__ import annotations

import numpy as np
import pytest

from distsort.backend import Backend
from distsort.steps.sample import (
    local_sample,
    sample_sizes,
    samples_per_bucket,
    stream_base,
    uniforms,
)
from distsort.steps.splitters import classify, key_order, selected


def test_sample_size_grows_with_ranks_and_stays_small():
    assert samples_per_bucket(2) < samples_per_bucket(64) < 60_000


def test_small_data_is_sampled_whole_with_global_positions():
    words = [np.array([5, 3, 9], dtype=np.uint32)]
    rows = local_sample(words, [4, 3], rank=1, backend=Backend())
    np.testing.assert_array_equal(rows, [[5, 4], [3, 5], [9, 6]])


def test_large_data_sample_is_proportional_to_the_share():
    words = [np.arange(10**6, dtype=np.uint64)]
    rows = local_sample(words, [10**6, 3 * 10**6], rank=0, backend=Backend(),
                        per_bucket=1000)
    assert abs(len(rows) - 500) <= 1
    np.testing.assert_array_equal(rows[:, 0], rows[:, 1])  # key i sits at global position i


def test_every_rank_knows_every_rank_s_sample_size():
    """choose_splitters receives sample_sizes(counts) rows from each rank without asking: they
    must be what local_sample gives there, exact or drawn, with empty ranks."""
    for counts in ([4, 3], [0, 5, 2], [10**5, 3 * 10**5, 0, 7], [999, 1000, 1001]):
        sizes = sample_sizes(counts, per_bucket=50)
        for rank, n in enumerate(counts):
            words = [np.arange(n, dtype=np.uint32)]
            got = local_sample(words, counts, rank, Backend(), per_bucket=50)
            assert len(got) == sizes[rank]
        want = 50 * len(counts)
        assert sizes == counts if sum(counts) <= want else want <= sum(sizes) < want + len(counts)


def test_classify_breaks_ties_by_global_position():
    keys = np.array([1, 7, 7, 7, 7, 9], dtype=np.uint32)  # global positions 10..15
    splitters = np.array([[7, 12], [7, 14]], dtype=np.uint64)
    buckets = classify([keys], 10, splitters, np)
    np.testing.assert_array_equal(buckets, [0, 0, 1, 1, 2, 2])  # a splitter opens its bucket


def test_classify_compares_every_key_word():
    hi = np.array([1, 1, 1, 2], dtype=np.uint64)
    lo = np.array([3, 5, 5, 0], dtype=np.uint16)
    splitters = np.array([[1, 5, 0], [1, 5, 102]], dtype=np.uint64)
    buckets = classify([hi, lo], 100, splitters, np)  # positions 100..103
    np.testing.assert_array_equal(buckets, [0, 1, 2, 2])


def test_no_splitters_means_one_bucket():
    assert classify([np.arange(5, dtype=np.uint8)], 0, np.zeros((0, 2), np.uint64), np).max() == 0


def test_key_range_covers_every_key_between_the_bounds():
    from distsort.steps.splitters import key_range

    rng = np.random.default_rng(0)
    for _ in range(200):
        bounds = np.sort(rng.integers(0, 2**32, 3, dtype=np.uint64))
        splitters = np.stack([bounds, np.zeros(3, np.uint64)], axis=1)
        for rank in range(4):
            low = int(splitters[rank - 1, 0]) if rank else 0
            high = int(splitters[rank, 0]) if rank < 3 else 2**32 - 1
            base, top, end = key_range(splitters, rank, np.uint32)
            keys = np.array([low, high, (low + high) // 2], dtype=np.uint64)
            assert (base, top) == (low, high)
            assert ((keys - np.uint64(base)) >> np.uint64(end) == 0).all()  # key - low < 2^end
            assert end <= 32


def test_sample_draws_one_row_from_each_stratum():
    n, take = 10_000, 64  # 2 ranks of n keys: this rank's share is half the sample
    words = [np.arange(n, dtype=np.uint32)]
    rows = local_sample(words, [n, n], rank=0, backend=Backend(), per_bucket=take)
    edges = np.arange(take + 1) * n // take  # stratum j: [edges[j], edges[j + 1])
    strata = np.searchsorted(edges, rows[:, 1].astype(np.int64), side="right") - 1
    np.testing.assert_array_equal(strata, np.arange(take))
    assert len(local_sample(words[:0] + [words[0][:0]], [0, n], 0, Backend(), per_bucket=8)) == 0


def _splitmix64(z: int) -> int:
    """Reference splitmix64 on Python integers."""
    m = 2**64 - 1
    z = (z + 0x9E3779B97F4A7C15) & m
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & m
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & m
    return z ^ (z >> 31)


def test_sample_fractions_are_splitmix64_of_counters():
    """The host's fractions are the ones sample.cu computes: splitmix64(base + i), 53 bits,
    with 64-bit wrap-around."""
    base = stream_base(7, 3)
    assert base == _splitmix64((7 << 32) | 3)
    for start in (base, 2**64 - 3):
        want = [(_splitmix64((start + i) % 2**64) >> 11) * 2.0**-53 for i in range(6)]
        np.testing.assert_array_equal(uniforms(start, 6), want)
    u = uniforms(base, 100_000)
    assert 0 <= u.min() and u.max() < 1 and abs(u.mean() - 0.5) < 0.01


@pytest.mark.parametrize("spread", [3, 5000, 2**40])  # many ties across runs / some / none
@pytest.mark.parametrize("runs", [1, 2, 5, 16])
@pytest.mark.parametrize("rows", [200, 20_000])  # a run's most: few marks / many (STRIDE)
def test_selected_rows_are_those_of_the_stable_order_of_the_runs(spread, runs, rows):
    """The CPU splitters' rows picked from p sorted runs without merging them: the same rows
    as the stable order of all the runs (equal keys in run order) puts at the picks, empty
    runs and ties across runs included."""
    rng = np.random.default_rng(runs)
    counts = rng.integers(0, rows, runs)
    counts[0] = 0 if runs > 1 else counts[0]  # an empty run
    keys = np.concatenate([np.sort(rng.integers(0, spread, c, dtype=np.uint64))
                           for c in counts])
    picks = np.arange(1, 16, dtype=np.int64) * len(keys) // 16
    want = np.argsort(keys, kind="stable")[picks]
    np.testing.assert_array_equal(selected(keys, counts, picks), want)
    assert selected(keys, counts, picks[:0]).size == 0


@pytest.mark.parametrize("top", [0, 3, 2**32 - 1, 2**64 - 1])  # all equal / ties / 32 bits / 64
def test_key_order_is_the_stable_argsort(top):
    """The sample's order before it is sent: equal keys in row order, by the packed sort where
    keys fit 32 bits, by the stable argsort where they do not; no rows, one row."""
    rng = np.random.default_rng(top % 1000)
    for n in (0, 1, 1000):
        keys = rng.integers(0, top, n, dtype=np.uint64, endpoint=True)
        order = key_order(keys)
        assert order.dtype == np.int64
        np.testing.assert_array_equal(order, np.argsort(keys, kind="stable"))
