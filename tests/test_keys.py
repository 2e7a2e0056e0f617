"""Key encodings: exact round trips, the promised order, NaN last, byte keys in memcmp order."""

from __future__ import annotations

import numpy as np
import pytest

from distsort.errors import DistsortError
from distsort.keys import NumericCodec, check_sortable, record_key_words, stand_ins

NUMERIC = ["i1", "u1", "i2", "u2", "i4", "u4", "i8", "u8", "f2", "f4", "f8", ">i4", ">f8", "<u2"]


def sample(dtype: np.dtype, rng) -> np.ndarray:
    x = rng.integers(0, 256, 4000 * dtype.itemsize, dtype=np.uint8).view(dtype).copy()
    if dtype.kind == "f":  # random bits already hold NaNs of both signs; add the named specials
        x[:6] = [np.inf, -np.inf, 0.0, -0.0, np.nan, -np.nan]
    return x


def expected_sorted(x: np.ndarray, descending: bool) -> np.ndarray:
    ref = np.sort(x.astype(x.dtype.newbyteorder("=")), kind="stable")
    if descending:
        nan = np.isnan(ref) if ref.dtype.kind == "f" else np.zeros(len(ref), bool)
        ref = np.concatenate([ref[~nan][::-1], ref[nan]])
    return ref


@pytest.mark.parametrize("dtype", NUMERIC)
@pytest.mark.parametrize("descending", [False, True])
@pytest.mark.parametrize("canonical", [False, True])
def test_codes_sort_like_numpy(dtype, descending, canonical):
    x = sample(np.dtype(dtype), np.random.default_rng(0))
    codec = NumericCodec(np.dtype(dtype), descending, canonical)
    codes = codec.encode(x, np)
    assert codes.dtype.kind == "u" and codes.dtype.itemsize == x.dtype.itemsize
    got = x[np.argsort(codes, kind="stable")]
    np.testing.assert_array_equal(got, expected_sorted(x, descending))


@pytest.mark.parametrize("dtype", NUMERIC)
@pytest.mark.parametrize("descending", [False, True])
def test_plain_codes_round_trip_every_bit(dtype, descending):
    x = sample(np.dtype(dtype), np.random.default_rng(1))
    codec = NumericCodec(np.dtype(dtype), descending)
    assert not codec.lossy
    back = codec.decode(codec.encode(x, np), np)
    assert back.astype(x.dtype).tobytes() == x.tobytes()


@pytest.mark.parametrize("dtype", NUMERIC)
@pytest.mark.parametrize("descending", [False, True])
def test_the_c_pass_codes_as_numpys_steps_do_in_place_too(dtype, descending):
    """codes.c's encode and decode (each of the pool's threads a run) give NumPy's blockwise
    steps' words, across many blocks and runs; decode in place leaves its keys in the codes'
    memory."""
    from distsort.keys import _blockwise
    from distsort.local import clib

    if clib.library() is None:
        pytest.skip("no C compiler: NumPy's steps code alone")
    codec = NumericCodec(np.dtype(dtype), descending)
    x = np.random.default_rng(2).integers(0, 256, 300_001 * codec.word.itemsize,
                                          dtype=np.uint8).view(codec.native)
    codes = codec.encode(x, np)
    np.testing.assert_array_equal(codes, _blockwise(x.view(codec.word), codec._code_block))
    given = codes.copy()
    back = codec.decode(given, np, in_place=True)
    assert back.tobytes() == x.tobytes()
    assert np.shares_memory(back, given) or codec.identity


def test_canonical_codes_make_numpy_ties_equal():
    x = np.array([0.0, -0.0, np.nan, -np.nan, np.float64("nan") * 0], dtype=np.float64)
    codes = NumericCodec(x.dtype, canonical=True).encode(x, np)
    assert codes[0] == codes[1] and codes[2] == codes[3] == codes[4]
    assert NumericCodec(x.dtype, canonical=True).lossy


@pytest.mark.parametrize("dtype", ["float16", "float32", "float64"])
@pytest.mark.parametrize("descending", [False, True])
def test_encode_says_where_canonical_codes_merged_bits(dtype, descending):
    """merged is set exactly where decode cannot give some key's bits back: -0.0, or a NaN
    other than the one NaN; never by plain codes."""
    dt = np.dtype(dtype)
    nan = np.array(np.nan, dt)
    cases = {"plain numbers": (np.array([1.5, 0.0, -2.0, np.inf], dt), 0),
             "the one NaN": (np.array([1.0, nan], dt), 0),
             "-0.0": (np.array([1.0, -0.0], dt), 1),
             "-NaN": (np.array([1.0, -nan], dt), 1),
             "NaN payload": (np.array([1.0, (nan.view(f"u{dt.itemsize}") + 1).view(dt)], dt), 1)}
    for name, (x, want) in cases.items():
        for canonical in (False, True):
            codec, merged = NumericCodec(dt, descending, canonical), np.zeros(1, np.uint32)
            codes = codec.encode(x, np, merged)
            assert merged[0] == (want if canonical else 0), name
            exact = codec.decode(codes, np).astype(dt).tobytes() == x.tobytes()
            assert exact == (merged[0] == 0), name


@pytest.mark.parametrize("where", [None, 0, -1])  # a -0.0 nowhere, in the first, the last block
def test_canonical_codes_of_many_blocks_are_each_keys_own(where):
    """Canonical codes of an array of several blocks (keys.BLOCK; the pool's threads share
    them) are each key's own code, every NaN's the one NaN's, and merged says whether a -0.0
    was merged, in whichever block it is."""
    from distsort import keys

    rng = np.random.default_rng(3)
    x = rng.standard_normal(3 * keys.BLOCK + 5)
    x[rng.integers(0, len(x), 40)] = np.nan
    x[7] = -np.nan
    x[x == 0] = 1.0
    if where is not None:
        x[where] = -0.0
    codec, merged = NumericCodec(x.dtype, canonical=True), np.zeros(1, np.uint32)
    codes = codec.encode(x, np, merged)
    some = np.concatenate([rng.integers(0, len(x), 200), np.flatnonzero(np.isnan(x)), [0, 7, -1]])
    one = [codec.encode(x[[i]], np)[0] for i in some]  # each alone, in one block
    np.testing.assert_array_equal(codes[some], one)
    assert len(set(codes[np.isnan(x)].tolist())) == 1
    assert merged[0] == 1  # the -NaN at 7, in every case
    merged[0] = 0
    codec.encode(np.where(np.isnan(x), np.nan, x)[keys.BLOCK:], np, merged)
    assert merged[0] == (where == -1)


@pytest.mark.parametrize("dtype", ["c8", "O", "U3", "S4", "V8", "f16" if hasattr(np, "float128")
                                   else "c16"])
def test_unsortable_dtypes_are_refused_clearly(dtype):
    with pytest.raises(DistsortError, match="cannot sort"):
        check_sortable(np.dtype(dtype))


@pytest.mark.parametrize("key_size", [1, 2, 3, 5, 8, 10, 13, 16])
@pytest.mark.parametrize("descending", [False, True])
def test_record_words_follow_memcmp(key_size, descending):
    rng = np.random.default_rng(key_size)
    records = rng.integers(0, 3, (600, 17), dtype=np.uint8)
    words = record_key_words(records, key_size, np, descending)
    order = np.lexsort(words[::-1])
    keys = [bytes(r[:key_size]) for r in records[order]]
    assert keys == sorted(keys, reverse=descending)


@pytest.mark.parametrize("dtype", ["M8[ns]", ">m8[s]", "bool"])
@pytest.mark.parametrize("descending", [False, True])
def test_stand_ins_ascend_in_numpys_order_and_give_back_every_bit(dtype, descending):
    """Stand-ins of bool and time keys, sorted as sort_descending says, put the keys in NumPy's
    order (NaT last in both orders) and decode to the exact bits; other dtypes have none."""
    bits = np.array([np.iinfo(np.int64).min, -5, 0, 7, np.iinfo(np.int64).max,
                     np.iinfo(np.int64).min + 1, 7, -5])
    x = (bits % 2).astype(bool) if dtype == "bool" else bits.astype(np.int64).view(dtype)
    stand = stand_ins(x.dtype, descending)
    codes = stand.encode(x.astype(x.dtype.newbyteorder("=")))
    assert codes.dtype.kind == "u" and codes.dtype.itemsize == x.dtype.itemsize
    ordered = np.sort(codes)
    got = stand.decode(ordered[::-1] if stand.sort_descending else ordered)
    if dtype == "bool":
        want = np.sort(x)[::-1] if descending else np.sort(x)
    else:
        native = x.astype(x.dtype.newbyteorder("="))
        nat = np.isnat(native)
        rest = np.sort(native[~nat])
        want = np.concatenate([rest[::-1] if descending else rest, native[nat]])
    assert got.tobytes() == want.tobytes()
    assert stand.decode(codes).tobytes() == x.astype(x.dtype.newbyteorder("=")).tobytes()
    assert stand.sort_descending == (descending and dtype == "bool")
    assert stand_ins(np.dtype("f8"), descending) is None


def test_keys_come_back_as_the_type_they_came_in():
    """np.dtype('l') == np.dtype('q'): the codecs made once per kind still give each its own."""
    import distsort

    for char in ("q", "l", "q"):
        got = distsort.sort(np.arange(5, dtype=char)[::-1], backend="cpu")
        assert got.dtype.char == char and got.tolist() == [0, 1, 2, 3, 4]
