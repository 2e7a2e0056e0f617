"""The CPU's radix sort (local/lsd.py, lsd.c) against NumPy's stable sort, and the CPU engine
on either side of its choice (lsd.wins)."""

from __future__ import annotations

import json
import os
import time

import numpy as np
import pytest

from distsort.local import clib, lsd
from distsort.local.engine import NumpyEngine

if clib.library() is None:
    pytest.skip("no C compiler here to build the C kernels", allow_module_level=True)


def keys_of(dtype, n: int, spread: str, seed: int) -> np.ndarray:
    """Keys over the whole range, few distinct (ties), or narrow (most passes skipped, so the
    result may end in either buffer)."""
    rng, top = np.random.default_rng(seed), np.iinfo(dtype).max
    if spread == "ties":
        return rng.choice(np.array([0, 7, top], dtype=dtype), n)
    if spread == "narrow":
        return rng.integers(0, 200, n).astype(dtype)  # one pass moves the keys
    return rng.integers(0, top, n, dtype=dtype, endpoint=True)


@pytest.mark.parametrize("dtype", [np.uint32, np.uint64])
@pytest.mark.parametrize("n", [0, 1, 1000, 200_003])
@pytest.mark.parametrize("spread", ["whole", "ties", "narrow"])
def test_keys_pairs_and_orders_as_numpy_stably(dtype, n, spread):
    keys = keys_of(dtype, n, spread, n)
    before = keys.copy()
    order = np.argsort(keys, kind="stable")
    np.testing.assert_array_equal(lsd.sort(keys), keys[order])
    np.testing.assert_array_equal(lsd.argsort(keys), order)
    for vdtype in (np.int32, np.float64, np.int64, np.float32):
        values = np.random.default_rng(1).standard_normal(n).astype(vdtype)
        got_keys, got_values = lsd.sort_pairs(keys, values)
        np.testing.assert_array_equal(got_keys, keys[order])
        np.testing.assert_array_equal(got_values, values[order])
    np.testing.assert_array_equal(keys, before)  # the input untouched
    mine = keys.copy()
    np.testing.assert_array_equal(lsd.sort(mine, overwrite=True), keys[order])


HYBRID_BYTES = 24 << 20  # lsd.c: from here one MSD pass, then each bucket's LSD passes


def hybrid_keys(dtype, n: int, spread: str, seed: int) -> np.ndarray:
    """Keys for the hybrid: a top digit below the word's (a constant digit above the MSD
    pass), or a low digit that is one value within each bucket but not across them (those
    buckets' passes end in the other buffer than the rest's)."""
    rng = np.random.default_rng(seed)
    if spread == "below_top":
        return rng.integers(0, 1 << 20, n).astype(dtype)
    top = rng.integers(0, 256, n).astype(dtype)
    mixed = (top << np.uint8(8 * np.dtype(dtype).itemsize - 8)) | top  # low digit = top's
    some = rng.random(n) < 0.5  # and half the buckets with a middle digit that varies
    return np.where(some & (top % 2 == 0), mixed | (rng.integers(0, 256, n).astype(dtype)
                                                     << np.uint8(8)), mixed).astype(dtype)


@pytest.mark.parametrize("dtype", [np.uint32, np.uint64])
@pytest.mark.parametrize("spread", ["whole", "ties", "below_top", "bucket_constant"])
def test_arrays_beyond_the_caches_sort_by_the_hybrid_as_numpy_stably(dtype, spread):
    n = HYBRID_BYTES // np.dtype(dtype).itemsize + 5
    keys = (keys_of(dtype, n, spread, 3) if spread in ("whole", "ties")
            else hybrid_keys(dtype, n, spread, 3))
    order = np.argsort(keys, kind="stable")
    np.testing.assert_array_equal(lsd.sort(keys), keys[order])
    np.testing.assert_array_equal(lsd.argsort(keys), order)  # pairs: 8-byte values
    values = np.arange(n, dtype=np.uint32)  # 4-byte values (their pairs' hybrid from fewer rows)
    got_keys, got_values = lsd.sort_pairs(keys, values)
    np.testing.assert_array_equal(got_keys, keys[order])
    np.testing.assert_array_equal(got_values, order.astype(np.uint32))


@pytest.mark.parametrize("dtype", [np.uint32, np.uint64])
def test_a_fitting_scratch_is_the_second_buffer_and_others_are_not_used(dtype):
    """lsd.sort takes a scratch that fits (dtype, length, contiguous, writable, apart from the
    keys) as its passes' second buffer, so the result is the keys' memory or the scratch's; a
    scratch that does not fit is left untouched, the result right either way."""
    keys = keys_of(dtype, 100_003, "whole", 5)
    keys >>= np.uint8(8 * keys.itemsize - 24)  # 3 digits vary: an odd number of passes
    want = np.sort(keys)
    scratch = np.zeros(len(keys) + 7, dtype)
    mine = keys.copy()
    got = lsd.sort(mine, overwrite=True, scratch=scratch)
    np.testing.assert_array_equal(got, want)
    assert np.shares_memory(got, scratch)  # the passes ended in the scratch
    unfit = [np.zeros(len(keys) - 1, dtype), np.zeros(len(keys), np.int8 if dtype == np.uint32
                                                                    else np.uint32),
             np.zeros(2 * len(keys), dtype)[::2],
             np.zeros(2 * len(keys), dtype)]  # far larger: a result in it would keep it all
    read_only = np.zeros(len(keys), dtype)
    read_only.flags.writeable = False
    for bad in unfit + [read_only]:
        got = lsd.sort(keys, scratch=bad)
        np.testing.assert_array_equal(got, want)
        assert not bad.any() and not np.shares_memory(got, bad)
    mine = keys.copy()  # a scratch that is the keys' own memory is not used as the other
    np.testing.assert_array_equal(lsd.sort(mine, overwrite=True, scratch=mine), want)


@pytest.mark.parametrize("radix", [True, False])
def test_the_engine_sorts_alike_on_either_side_of_the_choice(monkeypatch, radix):
    monkeypatch.setattr(lsd, "wins", lambda itemsize, value_bytes=0: radix)
    engine, rng = NumpyEngine(), np.random.default_rng(5)
    for dtype in (np.uint32, np.uint64):
        keys = rng.integers(0, 1000, 300_000).astype(dtype)  # ties: the order must be stable
        values = np.arange(len(keys), dtype=np.int64)
        order = np.argsort(keys, kind="stable")
        assert lsd.available(keys, values) == radix
        np.testing.assert_array_equal(engine.sort(keys), keys[order])
        np.testing.assert_array_equal(engine.argsort(keys), order)
        got_keys, got_values = engine.sort_pairs(keys, values)
        np.testing.assert_array_equal(got_values, order)
        np.testing.assert_array_equal(engine.sort(keys.copy(), overwrite=True), keys[order])


@pytest.mark.parametrize("radix", [True, False])
def test_the_engine_sorts_in_pieces_on_threads_alike(monkeypatch, three_threads, radix):
    """Several threads: pieces sorted at once (each in its own memory, or with its positions),
    then merged; equal keys (many here) keep their input order in orders and pairs."""
    from distsort.local.engine import PIECES_MIN

    monkeypatch.setattr(lsd, "wins", lambda itemsize, value_bytes=0: radix)
    engine = NumpyEngine()
    for dtype in (np.uint32, np.uint64):
        keys = keys_of(dtype, PIECES_MIN + 12_345, "narrow", 3)  # a pass that ends elsewhere
        order = np.argsort(keys, kind="stable")
        np.testing.assert_array_equal(engine.sort(keys), keys[order])
        scratch = np.zeros(len(keys), dtype)  # the pieces' second buffers, then the merge's
        got = engine.sort(keys.copy(), overwrite=True, scratch=scratch)
        np.testing.assert_array_equal(got, keys[order])
        assert scratch.any()
        np.testing.assert_array_equal(engine.argsort(keys), order)
        floats = np.random.default_rng(4).standard_normal((len(keys), 2))
        # rows of 2 floats (gathered by the order), 8-byte values (carried through the merge)
        for values in (floats, floats[:, 0], floats[:, 1].astype(">f8"),
                       np.arange(len(keys)).astype("datetime64[ns]")):
            got_keys, got_values = engine.sort_pairs(keys, values)
            np.testing.assert_array_equal(got_keys, keys[order])
            np.testing.assert_array_equal(got_values, values[order])
            assert got_values.dtype == values.dtype


def test_the_choice_is_measured_once_a_width():
    lsd.wins.cache_clear()
    first = lsd.wins(8)
    assert isinstance(first, bool) and lsd.wins(8) == first and lsd.wins.cache_info().hits == 1
    assert not lsd.available(np.zeros(lsd.SMALL - 1, np.uint32))  # few keys: NumPy's sort
    assert not lsd.available(np.zeros(lsd.SMALL, np.int32))  # codes only: unsigned keys


def test_pairs_are_chosen_against_numpy_pairs_not_its_key_sort(monkeypatch, store):
    """Where NumPy's key sort wins (an AVX-512 machine's; here our key sort is slowed down),
    pairs and orders still go to the radix sort: their rival is NumPy's stable argsort and the
    gathers, which no SIMD sort speeds up."""
    real = lsd.sort

    def slow(keys, overwrite=False):
        time.sleep(0.05)
        return real(keys, overwrite)

    monkeypatch.setattr(lsd, "sort", slow)
    assert not lsd.wins(8)
    assert lsd.wins(8, 8) and lsd.wins(4, 8)


@pytest.mark.parametrize("radix", [False, True])
def test_the_engine_notes_which_sort_ran(monkeypatch, radix):
    """What a job's summary names: our radix sort where it ran, NumPy's where it did (few keys
    always: lsd.SMALL), for keys, orders and pairs alike."""
    monkeypatch.setattr(lsd, "wins", lambda itemsize, value_bytes=0: radix)
    engine, many = NumpyEngine(), keys_of(np.uint32, 2 * lsd.SMALL, "whole", 3)
    for call in (engine.sort, engine.argsort, lambda k: engine.sort_pairs(k, k.astype(np.int64))):
        engine.used.clear()
        call(many[:100])
        assert engine.used == {"numpy"}
        engine.used.clear()
        call(many)
        assert engine.used == {"radix" if radix else "numpy"}


@pytest.mark.parametrize("overwrite", [False, True])
def test_keys_numpy_sorts_given_up_are_sorted_in_their_own_memory(monkeypatch, overwrite):
    """Where NumPy's sort runs (lsd.wins says so), sort(overwrite=True) sorts the keys where
    they are (np.sort would copy them first); without it the caller's keys are left alone."""
    monkeypatch.setattr(lsd, "wins", lambda itemsize, value_bytes=0: False)
    keys = keys_of(np.uint32, 4 * lsd.SMALL, "whole", 5)
    given = keys.copy()
    got = NumpyEngine().sort(keys, overwrite=overwrite)
    np.testing.assert_array_equal(got, np.sort(given))
    assert np.shares_memory(got, keys) is overwrite
    if not overwrite:
        np.testing.assert_array_equal(keys, given)


@pytest.mark.parametrize("overwrite", [False, True])
def test_pairs_given_up_are_sorted_in_their_own_memory(monkeypatch, overwrite):
    """sort_pairs(overwrite=True) (the finish's received rows) sorts keys and values where they
    are, no copies first; without it the caller's arrays are left as they were."""
    monkeypatch.setattr(lsd, "wins", lambda itemsize, value_bytes=0: True)
    keys = keys_of(np.uint32, 4 * lsd.SMALL, "whole", 4)
    values = np.arange(len(keys), dtype=np.uint64)
    given_keys, given_values = keys.copy(), values.copy()
    order = np.argsort(keys, kind="stable")
    got_keys, got_values = NumpyEngine().sort_pairs(keys, values, overwrite=overwrite)
    np.testing.assert_array_equal(got_keys, given_keys[order])
    np.testing.assert_array_equal(got_values, given_values[order])
    assert np.shares_memory(got_keys, keys) is overwrite  # 4 passes end where they began
    if not overwrite:
        np.testing.assert_array_equal(keys, given_keys)
        np.testing.assert_array_equal(values, given_values)


def test_pairs_given_up_that_share_memory_or_cannot_be_written_are_copied_first():
    """The passes read one array and write the other: keys and values in the same memory, or
    an array that cannot be written, are sorted from copies, overwrite or not."""
    n = 2 * lsd.SMALL
    memory = np.random.default_rng(8).integers(0, 2**32, 2 * n, dtype=np.uint64)
    memory = memory.astype(np.uint32)
    keys, values = memory[:n], memory[n // 2 : n // 2 + n]  # overlapping
    want_keys, want_values = keys.copy(), values.copy()
    order = np.argsort(want_keys, kind="stable")
    got = lsd.sort_pairs(keys, values, overwrite=True)
    np.testing.assert_array_equal(got[0], want_keys[order])
    np.testing.assert_array_equal(got[1], want_values[order])
    frozen = want_keys.copy()
    frozen.flags.writeable = False
    got = lsd.sort_pairs(frozen, want_values.copy(), overwrite=True)
    np.testing.assert_array_equal(got[0], want_keys[order])
    assert lsd.sort(frozen, overwrite=True) is not frozen


@pytest.fixture
def store(tmp_path, monkeypatch):
    """The calibration's answers kept in a file of the test's own; the process's answers
    forgotten before and after."""
    path = tmp_path / "cpu.wins.json"
    monkeypatch.setattr(lsd, "_store_path", lambda: str(path))
    lsd.stored_answers.cache_clear()
    lsd.wins.cache_clear()
    yield path
    lsd.stored_answers.cache_clear()
    lsd.wins.cache_clear()


def test_answers_stored_for_this_machine_are_taken_without_timing(store, monkeypatch):
    store.write_text(json.dumps({"machine": lsd._machine(), "wins": {"4,0": False, "8,8": True}}))
    monkeypatch.setattr(lsd, "_best", lambda call: pytest.fail("timed despite the answers"))
    assert lsd.wins(4) is False and lsd.wins(8, 8) is True


@pytest.mark.parametrize("text", ["not json", json.dumps([1]),
                                  json.dumps({"machine": "another CPU", "wins": {"4,0": False}})])
def test_answers_of_another_machine_or_unreadable_are_timed_anew(store, monkeypatch, text):
    store.write_text(text)
    times = iter([1.0, 2.0])  # ours, then NumPy's: the radix sort 2x the faster
    monkeypatch.setattr(lsd, "_best", lambda call: next(times))
    assert lsd.wins(4) is True


def test_measure_all_stores_every_kind_for_the_next_process(store):
    lsd.measure_all()
    lsd.stored_answers.cache_clear()
    assert set(lsd.stored_answers()) == {f"{k},{v}" for k, v in lsd.KINDS}
    assert all(isinstance(answer, bool) for answer in lsd.stored_answers().values())
    assert not [p for p in store.parent.iterdir() if p.name.startswith(".wins-")]
    assert store.stat().st_mode & 0o044 == 0o044  # others' jobs read it too
    stored = store.read_text()
    store.write_text(stored.replace("true", "false"))  # answers there: not measured again
    lsd.stored_answers.cache_clear()
    lsd.measure_all()
    assert store.read_text() == stored.replace("true", "false")


def test_machines_of_two_kinds_keep_their_answers_apart(monkeypatch):
    """Nodes of several kinds may share one kernel cache: each kind's answers in a file of
    its own, beside the one C library."""
    paths = set()
    for machine in ("one CPU; 2 cores; NumPy 2", "another CPU; 64 cores; NumPy 2"):
        monkeypatch.setattr(lsd, "_machine", lambda machine=machine: machine)
        paths.add(lsd._store_path())
    assert len(paths) == 2 and len({os.path.dirname(p) for p in paths}) == 1
