"""Values of any fixed-size dtype as arrays every backend moves, and back (payload.py)."""

from __future__ import annotations

import numpy as np
import pytest

from distsort.errors import DistsortError
from distsort.payload import HELD, check_payload, restored, stored

ODD = [  # kinds CuPy does not hold: they travel as their bytes
    np.arange(7).astype("datetime64[ns]"),
    np.array([1, -2, 3], dtype="timedelta64[ms]"),
    np.array([b"ab", b"c", b""], dtype="S2"),
    np.array(["x", "yz", "uvw"], dtype="<U3"),
    np.array(["x", "yz"], dtype=">U2"),
    np.array([(1, b"q", 2.5), (-3, b"r", 0.5)], dtype=[("a", ">i4"), ("b", "S1"), ("c", "<f8")]),
    np.zeros(4, dtype="V3"),
    np.array([["a", "b"], ["c", "d"], ["e", "f"]], dtype="S1"),  # rows of two
    np.arange(6).astype("datetime64[D]").reshape(3, 2),
    np.array(["abcdefghij"] * 3, dtype="S10"),
]


@pytest.mark.parametrize("values", ODD, ids=lambda v: f"{v.dtype}{v.shape}")
def test_odd_values_travel_as_bytes_and_come_back(values):
    moved = stored(values)
    assert moved.dtype.kind == "u" and len(moved) == len(values)
    width = values.dtype.itemsize * int(np.prod(values.shape[1:]))
    assert moved.ndim == (1 if width in (1, 2, 4, 8) else 2)
    back = restored(moved[::-1].copy(), values)  # a permutation of the rows, as a sort makes
    assert back.dtype == values.dtype.newbyteorder("=") and back.shape == values.shape
    np.testing.assert_array_equal(back, values[::-1])


def test_held_kinds_pass_through():
    for values in (np.arange(3, dtype=np.int16), np.ones(2, bool), np.ones((2, 3), np.float32),
                   np.ones(2, np.complex64)):
        assert values.dtype.kind in HELD
        assert stored(values) is values and restored(values, values) is values
    assert stored(None) is None


def test_a_non_contiguous_view_is_copied_once():
    rows = np.arange(20).astype("datetime64[s]")[::2]
    np.testing.assert_array_equal(restored(stored(rows), rows), rows)


PADDED = np.dtype([("a", "u1"), ("b", "<u4"), ("c", [("d", "u1"), ("e", "<u2")], (2,))],
                  align=True)


def padded_records(n: int) -> np.ndarray:
    """Records with padding, every byte of them (padding too) non-zero."""
    return (np.arange(n * PADDED.itemsize) % 251 + 1).astype(np.uint8).view(PADDED)


@pytest.mark.parametrize("copy", ["strided", "byte-swapped"])
def test_padding_is_zero_in_the_stored_bytes_whatever_copy_made_them(copy):
    """A strided or byte-swapped copy leaves a record's padding unwritten: the stored bytes
    (what the sort moves and the checksum reads) hold zeros there, the fields as they were."""
    records = padded_records(40)
    given = records[::2] if copy == "strided" else records.astype(PADDED.newbyteorder(">"))
    moved = stored(given)
    rows = moved.view(np.uint8).reshape(len(given), PADDED.itemsize)
    assert not rows[:, ~_mask(PADDED)].any() and rows[:, _mask(PADDED)].all()
    np.testing.assert_array_equal(restored(moved, given), given)


def test_the_checksum_of_records_does_not_read_their_padding():
    from distsort.check import checksum, pieces

    keys, records = np.arange(20, dtype=np.uint32), padded_records(20)
    other = records.copy()
    other.view(np.uint8).reshape(20, -1)[:, ~_mask(PADDED)] = 7
    sums = [sum(checksum(k, np, v) for k, v in pieces(keys, r, np)) % 2**64
            for r in (records, other)]
    assert sums[0] == sums[1]


def _mask(dtype) -> np.ndarray:
    """Where the fields of PADDED lie, from NumPy's own offsets."""
    marks = np.zeros(dtype.itemsize, bool)
    for name in ("a", "b"):
        offset = dtype.fields[name][1]
        marks[offset : offset + dtype[name].itemsize] = True
    c, offset = dtype.fields["c"][:2]
    for i in range(2):
        for name in ("d", "e"):
            at = offset + i * c.base.itemsize + c.base.fields[name][1]
            marks[at : at + c.base[name].itemsize] = True
    return marks


def test_padded_values_land_in_the_callers_out():
    """out= takes the sort's values in the caller's own array (their padding zeroed)."""
    import distsort

    keys, values = np.arange(50, dtype=np.uint32)[::-1].copy(), padded_records(50)
    into = np.zeros(50, PADDED)
    assert np.shares_memory(stored(into, into=True), into)
    _, got = distsort.sort_pairs(keys, values, backend="cpu",
                                 out=(np.empty(50, np.uint32), into))
    assert np.shares_memory(got, into)
    np.testing.assert_array_equal(into, values[::-1])


def test_records_without_padding_are_not_copied():
    rows = np.zeros(3, dtype=[("a", "u1"), ("b", "<u4")])  # packed: no padding
    moved = stored(rows)
    assert np.shares_memory(moved, rows)


def test_objects_and_empty_elements_are_refused():
    with pytest.raises(DistsortError, match="Python objects"):
        check_payload(np.dtype(object))
    with pytest.raises(DistsortError, match="Python objects"):
        check_payload(np.dtype([("a", "i4"), ("o", "O")]))
    with pytest.raises(DistsortError, match="no bytes"):
        check_payload(np.dtype("V0"))
    assert check_payload("datetime64[us]") == np.dtype("datetime64[us]")
