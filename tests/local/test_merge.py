"""Stable merges of sorted runs on CPUs (local/merge.py, merge.c)."""

from __future__ import annotations

import numpy as np
import pytest

from distsort.local import clib, merge, scatter

if not merge.available(np.zeros(1, np.uint32)):
    pytest.skip("no C compiler here to build merge.c", allow_module_level=True)

LAYOUTS = [[5], [3, 4], [0, 7, 2], [10, 0, 3, 8, 1], [100, 200, 300, 50, 7, 1, 1000], [0, 0],
           [1] * 9, [4096, 4096]]


def runs_of(dtype, counts, seed=0, distinct=None):
    """Sorted runs of random keys, one after another (few distinct keys: many ties)."""
    rng = np.random.default_rng(seed)
    top = distinct or np.iinfo(dtype).max
    return np.concatenate([np.sort(rng.integers(0, top, c, dtype=np.uint64).astype(dtype))
                           for c in counts] or [np.empty(0, dtype)])


@pytest.mark.parametrize("dtype", [np.uint8, np.uint16, np.uint32, np.uint64])
@pytest.mark.parametrize("counts", LAYOUTS)
@pytest.mark.parametrize("distinct", [None, 3])
def test_merged_as_a_stable_sort_orders_them(dtype, counts, distinct):
    keys = runs_of(dtype, counts, distinct=distinct)
    before = keys.copy()
    expected = np.argsort(keys, kind="stable")
    merged, positions = merge.merge_runs(keys, counts, positions=True)
    np.testing.assert_array_equal(positions, expected)  # equal keys: the earlier run first
    np.testing.assert_array_equal(merged, keys[expected])
    np.testing.assert_array_equal(keys, before)  # not overwrite: the input is only read
    alone, none = merge.merge_runs(keys, counts)
    assert none is None
    np.testing.assert_array_equal(alone, keys[expected])


@pytest.mark.parametrize("counts", LAYOUTS)
def test_scratch_and_overwrite_give_the_same_keys(counts):
    keys = runs_of(np.uint32, counts, seed=1)
    expected = np.sort(keys)
    for scratch in (None, np.empty(len(keys) + 5, np.uint32), np.empty(1, np.uint32)):
        merged, _ = merge.merge_runs(keys.copy(), counts, overwrite=True, scratch=scratch)
        np.testing.assert_array_equal(merged, expected)


def test_pairs_of_a_pass_run_on_several_threads(three_threads):
    counts = [1000] * 16
    keys = runs_of(np.uint64, counts, distinct=50)
    merged, positions = merge.merge_runs(keys, counts, positions=True)
    np.testing.assert_array_equal(positions, np.argsort(keys, kind="stable"))


@pytest.mark.parametrize("keys", [np.zeros(4, np.int32), np.zeros(4, np.float64),
                                  np.zeros((4, 2), np.uint8)])
def test_only_unsigned_columns_merge(keys):
    assert not merge.available(keys)


def test_a_compiler_that_fails_builds_nothing(tmp_path):
    assert clib._build(["false"], str(tmp_path), "cpu-x.so") is None
    assert clib._build(["no-such-compiler-here"], str(tmp_path), "cpu-x.so") is None
    assert list(tmp_path.iterdir()) == []  # no temporary file left either


def test_the_library_is_built_in_the_kernel_cache_and_found_there(tmp_path, monkeypatch):
    """The first folder that can be written holds it; a later process loads it from there."""
    cache = tmp_path / "cache"
    monkeypatch.setenv("DISTSORT_KERNEL_CACHE", str(cache))
    monkeypatch.setattr(clib, "PACKAGE", str(tmp_path / "package"))  # none built there yet
    clib.library.cache_clear()
    try:
        assert clib.library() is not None
        built = list(cache.iterdir())
        assert len(built) == 1 and built[0].name.startswith("cpu-") and built[0].suffix == ".so"
        made = built[0].stat().st_mtime_ns
        clib.library.cache_clear()
        assert clib.library() is not None  # loaded, not built again
        assert list(cache.iterdir()) == built and built[0].stat().st_mtime_ns == made
    finally:
        clib.library.cache_clear()


def test_the_package_s_own_library_is_found_beside_another_kernel_cache(tmp_path, monkeypatch):
    """The Docker image builds it into the package; a job there may name a mounted folder of
    CUDA kernels as its kernel cache, and still finds the C kernels."""
    package = tmp_path / "package"
    monkeypatch.setattr(clib, "PACKAGE", str(package))
    monkeypatch.setenv("DISTSORT_KERNEL_CACHE", str(package / "kernels"))
    clib.library.cache_clear()
    try:
        assert clib.library() is not None
        monkeypatch.setenv("DISTSORT_KERNEL_CACHE", str(tmp_path / "mounted"))
        clib.library.cache_clear()
        assert clib.library() is not None
        assert not (tmp_path / "mounted").exists()  # found in the package, nothing built
    finally:
        clib.library.cache_clear()


@pytest.mark.parametrize("dtype", [np.uint8, np.uint16, np.uint32, np.uint64])
@pytest.mark.parametrize("overwrite", [False, True])
def test_the_numpy_engine_sorts_in_pieces_on_several_threads(three_threads, monkeypatch, dtype,
                                                             overwrite):
    """A pool of 3 threads: keys of 4 and 8 bytes as 3 key ranges (a sample sort on the
    threads), of 1 and 2 bytes as 3 pieces sorted at once, then merged; the input is left as it
    was unless the caller gave it up."""
    from distsort.local import engine

    monkeypatch.setattr(engine, "PIECES_MIN", 10)
    keys = runs_of(dtype, [10_001], seed=7, distinct=1000)  # one run: sorted...
    keys = np.random.default_rng(7).permutation(keys)  # ...then shuffled
    before = keys.copy()
    out = engine.NumpyEngine().sort(keys, overwrite=overwrite)
    np.testing.assert_array_equal(out, np.sort(before))
    if not overwrite:
        np.testing.assert_array_equal(keys, before)


@pytest.mark.parametrize("dtype", [np.uint32, np.uint64])
@pytest.mark.parametrize("distinct", [None, 1, 3])
@pytest.mark.parametrize("scratch", [False, True])
def test_key_ranges_stay_even_and_land_in_the_scratch(three_threads, monkeypatch, dtype,
                                                      distinct, scratch):
    """Plain keys sorted as key ranges on 3 threads: splitters of (key, position) cut equal keys
    by position, so even keys all alike fill 3 ranges of about a third each; with a scratch that
    fits, the result is in it and the keys are left as they were."""
    from distsort.local import engine, scatter

    monkeypatch.setattr(engine, "PIECES_MIN", 10)
    sizes = []

    class Noted(scatter.Grouping):
        def place(self, *args, **kwargs):
            sizes.append(self.total.copy())
            return super().place(*args, **kwargs)

    monkeypatch.setattr(scatter, "Grouping", Noted)
    rng = np.random.default_rng(11)
    top = distinct or np.iinfo(dtype).max
    keys = rng.integers(0, top, 30_000, dtype=np.uint64, endpoint=distinct is None).astype(dtype)
    before, room = keys.copy(), np.empty(30_000, dtype) if scratch else None
    out = engine.NumpyEngine().sort(keys, overwrite=True, scratch=room)
    np.testing.assert_array_equal(out, np.sort(before))
    (ranges,) = sizes
    assert len(ranges) == 3 and ranges.min() > 0.8 * 10_000
    if scratch:
        assert np.shares_memory(out, room)
        np.testing.assert_array_equal(keys, before)


@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.int64, np.int32, np.int16])
@pytest.mark.parametrize("descending", [False, True])
@pytest.mark.parametrize("ranges", [False, True])
def test_raw_numbers_sort_as_their_codes(three_threads, monkeypatch, dtype, descending, ranges):
    """Raw numbers with their codec: sorted as their codes (NaN last both ways, the input's
    bits given back), coded as the key ranges group them where the threads sort so (no array of
    codes made first: only the sample's rows are coded apart), else coded first; orders and
    pairs alike."""
    from distsort.keys import NumericCodec, numeric_codec
    from distsort.local import engine

    monkeypatch.setattr(engine, "PIECES_MIN", 10 if ranges else 1 << 30)
    encode, encoded = NumericCodec.encode, []

    def noted(self, x, xp, *more):
        encoded.append(len(x))
        return encode(self, x, xp, *more)

    monkeypatch.setattr(NumericCodec, "encode", noted)
    codec = numeric_codec(dtype, descending)
    keys = (np.random.default_rng(5).standard_normal(20_000) * 100).astype(dtype)
    if np.dtype(dtype).kind == "f":
        keys[::37], keys[::41], keys[::43] = np.nan, -0.0, np.inf
    codes = encode(codec, keys, np)
    before, expected = keys.copy(), keys[np.argsort(codes, kind="stable")]
    eng = engine.NumpyEngine()
    encoded.clear()
    out = eng.sort(keys, codec=codec)
    assert eng.used  # the summary names the sort that ran
    assert out.dtype == keys.dtype
    assert encode(codec, out, np).tobytes() == np.sort(codes).tobytes()  # every bit back
    assert keys.tobytes() == before.tobytes()
    ranged = scatter.codes_as_grouped([keys], 3, codec) and ranges
    assert (max(encoded) < len(keys)) == ranged
    np.testing.assert_array_equal(keys[eng.argsort(keys, codec=codec)], expected)
    got, moved = eng.sort_pairs(keys, np.arange(len(keys)), codec=codec)
    np.testing.assert_array_equal(got, keys[moved])
    np.testing.assert_array_equal(got, expected)


@pytest.mark.parametrize("counts", [[1000, 1000], [1, 5000], [5000, 0], [0, 5000], [3000, 17, 900]])
@pytest.mark.parametrize("distinct", [None, 2])
def test_a_pass_of_few_pairs_is_cut_for_every_thread(three_threads, counts, distinct):
    """Two runs on 3 threads: the pair's merge is cut in 3 at merge-path splits, the pieces
    writing apart; still a stable merge, equal keys from the earlier run first."""
    keys = runs_of(np.uint32, counts, seed=4, distinct=distinct)
    merged, positions = merge.merge_runs(keys, counts, positions=True)
    np.testing.assert_array_equal(positions, np.argsort(keys, kind="stable"))
    np.testing.assert_array_equal(merged, np.sort(keys))


@pytest.mark.parametrize("cuts", [1, 2, 3, 7])
def test_pieces_cover_the_output_once(cuts):
    keys = runs_of(np.uint16, [700, 300], seed=5, distinct=4)
    pieces = merge._pieces(keys, [(0, 700), (700, 1000)], cuts)
    assert len(pieces) == cuts
    out = 0
    for (a_lo, a_hi), (b_lo, b_hi), at in pieces:
        assert at == out and 0 <= a_lo <= a_hi <= 700 <= b_lo <= b_hi <= 1000
        if a_hi > a_lo and b_lo > 700:  # what came before this piece is no larger
            assert keys[b_lo - 1] < keys[a_lo]  # b's earlier keys are below: ties go to a
        out += (a_hi - a_lo) + (b_hi - b_lo)
    assert out == 1000


def test_worth_merging_weighs_the_passes_against_a_sort(monkeypatch):
    keys = np.zeros(8, np.uint32)
    monkeypatch.setattr(merge, "_pass_seconds", {4: 4e-9})
    assert merge.worth_merging(keys, [1] * 16, None)  # the sort's rate not known: merge
    assert not merge.worth_merging(keys, [1] * 16, 7e-9)  # 4 passes of 4 ns against 7 ns
    assert merge.worth_merging(keys, [1, 0, 1], 7e-9)  # one pass
    assert merge.worth_merging(keys, [1] * 16, 45e-9)  # no SIMD sort: merging wins
    assert merge.worth_merging(np.zeros(8, np.uint64), [1] * 16, 7e-9)  # no 8-byte pass timed


def test_merges_of_many_keys_are_timed(monkeypatch):
    monkeypatch.setattr(merge, "_pass_seconds", {})
    monkeypatch.setattr(merge, "MEASURED_MIN", 1000)
    counts = [600, 600]
    merge.merge_runs(runs_of(np.uint32, counts, seed=7), counts)
    assert merge._pass_seconds[4] > 0


def test_the_finish_leaves_plain_keys_to_a_faster_sort(monkeypatch):
    from distsort.local.engine import NumpyEngine
    from distsort.steps.finish import merged

    counts = [3000] * 4
    keys = runs_of(np.uint32, counts, seed=6)
    engine = NumpyEngine()
    monkeypatch.setattr(merge, "_pass_seconds", {4: 4e-9})
    engine.seconds_per_key[4] = 1e-9  # sorts faster than two passes merge
    column = keys.copy()
    assert merged([column], [column], counts, engine=engine) is None
    engine.seconds_per_key[4] = 1e-6
    out = merged([column], [column], counts, engine=engine)
    np.testing.assert_array_equal(out[0], np.sort(keys))
    assert engine.sort(np.arange(2**20, dtype=np.uint32)[::-1].copy())[0] == 0
    assert engine.seconds_per_key[4] < 1e-6  # timed again: a sort of MEASURED_MIN keys
