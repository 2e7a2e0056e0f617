"""Structured keys' byte keys (distsort/fields.py) order rows as numpy.sort(a, order=...) does,
on one process."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import STRUCTURED, complex_keys, string_keys, structured_rows

from distsort import fields
from distsort.errors import DistsortError

ORDERS = [None, "b", ["a", "b"], ["t", "s"], ["u", "z", "a"], ["d", "h"]]


def memcmp_order(keys: np.ndarray) -> np.ndarray:
    """The stable order of (n, k) uint8 keys compared like memcmp."""
    return np.lexsort(keys.T[::-1]) if keys.shape[1] else np.arange(len(keys))


@pytest.mark.parametrize("order", ORDERS)
def test_byte_keys_order_rows_as_numpy_does(order):
    rows = structured_rows(5000, 1)
    key = fields.encode(rows, fields.key_fields(rows.dtype, order), False)
    got = rows[memcmp_order(key)]
    assert got.tobytes() == np.sort(rows, order=order, kind="stable").tobytes()


@pytest.mark.parametrize("order", ORDERS)
def test_descending_reverses_every_field_and_keeps_nan_and_nat_last(order):
    rows = structured_rows(3000, 2)
    names = fields.key_fields(rows.dtype, order)
    got = rows[memcmp_order(fields.encode(rows, names, True))]
    first = got[names[0]]
    missing = np.isnat(first) if first.dtype.kind in "Mm" else (
        np.isnan(first) if first.dtype.kind == "f" else np.zeros(len(first), bool))
    assert not missing[: len(first) - missing.sum()].any()  # NaN / NaT at the end
    kept = first[~missing]
    assert (kept[:-1] >= kept[1:]).all()


def test_fields_are_the_named_ones_then_the_rest_in_dtype_order():
    assert fields.key_fields(STRUCTURED, ["t", "a"])[:3] == ["t", "a", "b"]
    assert fields.key_fields(STRUCTURED, "z") == ["z", "a", "b", "t", "s", "u", "d", "h"]


@pytest.mark.parametrize("dtype, order, match", [
    (STRUCTURED, ["nope"], "the keys have no field nope"),
    (STRUCTURED, ["a", "a"], "name each field"),
    (np.dtype([("c", np.clongdouble)]), None, "cannot sort by field 'c'"),
    (np.dtype([("v", "<i4", (2,))]), None, "cannot sort by field 'v'"),
    (np.dtype([("o", "O")]), None, "cannot sort by field 'o'"),
    (np.dtype([("n", [("x", "i4")])]), None, "cannot sort by field 'n'"),
])
def test_fields_that_cannot_be_keys_are_one_clear_error(dtype, order, match):
    with pytest.raises(DistsortError, match=match):
        fields.key_fields(dtype, order)


def test_float16_nan_sorts_last_as_every_nan_does():
    """NumPy's structured sort puts float16 NaN first; distsort keeps its one rule: NaN last."""
    rows = np.zeros(4, [("h", "<f2")])
    rows["h"] = [np.nan, 1, -np.inf, 0]
    order = memcmp_order(fields.encode(rows, ["h"], False))
    np.testing.assert_array_equal(rows["h"][order], [-np.inf, 0, 1, np.nan])


@pytest.mark.parametrize("kind", ["S", "U", "V"])
def test_bytes_strings_and_void_keys_are_keyed_as_one_field_in_numpys_order(kind):
    keys = string_keys(kind, 4000, 3)
    assert fields.by_fields(keys.dtype) and fields.sortable(keys.dtype) == keys.dtype
    records, key_size = fields.keyed(keys, None, False, [keys])
    got = records[memcmp_order(records[:, :key_size])][:, key_size:]
    assert got.tobytes() == np.sort(keys, kind="stable").tobytes()


@pytest.mark.parametrize("dtype, order, match", [
    (np.dtype("U3"), "a", "order= names fields of structured keys"),
    (np.dtype(np.clongdouble), None, f"cannot sort keys of dtype {np.dtype(np.clongdouble)}"),
    (np.dtype("c8"), "a", "order= names fields of structured keys"),
    (np.dtype([("a", "i4")]), ["b"], "the keys have no field b"),
])
def test_what_sorts_by_fields_and_what_not(dtype, order, match):
    with pytest.raises(DistsortError, match=match):
        fields.sortable(dtype, order)


@pytest.mark.parametrize("alphabet, width", [("ab ~", 1), ("a\u00e9\u0101", 2),
                                             ("a\u4e00\uffff", 2), ("a\U0001f600", 3), ("", 1)])
@pytest.mark.parametrize("descending", [False, True])
def test_unicode_keys_as_short_as_their_code_points_keep_numpys_order(alphabet, width,
                                                                       descending):
    """A unicode field's key holds each code point in the fewest bytes that hold them all
    (char_bytes), and orders rows as the full four bytes do."""
    rng = np.random.default_rng(len(alphabet))
    words = [''.join(rng.choice(list(alphabet), rng.integers(0, 4))) if alphabet else ""
             for _ in range(3000)]
    keys = np.array(words, dtype="U3")
    widths = fields.char_bytes(keys)
    assert widths == {"key": width}
    records, key_size = fields.keyed(keys, None, descending, [keys], widths)
    assert key_size == 3 * width
    got = records[memcmp_order(records[:, :key_size])][:, key_size:].copy().view(keys.dtype)
    want = np.sort(keys, kind="stable")
    np.testing.assert_array_equal(got.ravel(), want[::-1] if descending else want)


def test_no_rows_of_unicode_keys_of_any_width():
    none = np.empty(0, "U3")
    for width in (1, 2, 3, 4):
        records, key_size = fields.keyed(none, None, False, [none], {"key": width})
        assert records.shape == (0, 3 * width + 12) and key_size == 3 * width


@pytest.mark.parametrize("kind", ["S", "U", "V"])
@pytest.mark.parametrize("descending", [False, True])
def test_bytes_and_strings_come_back_from_their_keys_bit_for_bit(kind, descending):
    keys = string_keys(kind, 2000, 3)  # unicode: big-endian
    widths = fields.char_bytes(keys)
    key, key_size = fields.keyed(keys, None, descending, [], widths)
    back = fields.decoded(key, keys.dtype, descending, widths)
    assert key_size == key.shape[1] and back.dtype == keys.dtype.newbyteorder("=")
    np.testing.assert_array_equal(back, keys)


@pytest.mark.parametrize("dtype", [np.complex64, np.complex128])
@pytest.mark.parametrize("seed", [0, 1])  # native, big-endian
def test_complex_keys_are_keyed_in_numpys_order(dtype, seed):
    """NumPy's order, stably: numbers by real part then imaginary (-0.0 ties 0.0), then those
    whose imaginary part is NaN (by real part), whose real part is NaN (by imaginary), both."""
    keys = complex_keys(5000, seed, dtype)
    assert fields.by_fields(keys.dtype) and not fields.from_key(keys.dtype)
    records, key_size = fields.keyed(keys, None, False, [keys])
    order = memcmp_order(records[:, :key_size])
    np.testing.assert_array_equal(order, np.argsort(keys, kind="stable"))
    assert records[order][:, key_size:].tobytes() == np.sort(keys, kind="stable").tobytes()


def test_complex_keys_descending_keep_the_nan_groups_last():
    """Descending: each group's numbers reversed (equal ones in input order), the groups with
    a NaN part still after the numbers, in NumPy's order of them."""
    keys = complex_keys(5000, 2)
    got = memcmp_order(fields.encode(keys.view([("key", keys.dtype)]), ["key"], True))
    real, imag = keys.real, keys.imag
    group = 2 * np.isnan(real) + np.isnan(imag)
    down = [np.where(np.isnan(x), 0.0, -x) + 0.0 for x in (real, imag)]  # -0.0 ties 0.0
    np.testing.assert_array_equal(got, np.lexsort((np.arange(len(keys)), down[1], down[0],
                                                   group)))
