"""Raw numbers sorted in their codes' order by the radix engine (its codec option): our passes
take each key's code as they load it and give back its bits as they store it; where CUB sorts,
the codes are made before and undone after. Checked against NumPy's stable sort of the codes
(keys.NumericCodec on the host), bit for bit."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import COMM, bits, keys_with_specials, reference, reference_order, same_bits

import distsort
from distsort.keys import NumericCodec
from distsort.local import radix
from distsort.local.radix import SYNC_MIN, RadixEngine

pytestmark = pytest.mark.gpu

DTYPES = ["int32", "int64", "float32", "float64", "uint32", "uint64", "int16", "float16"]
SIZES = [2, 4609, (1 << 20) + 3]  # 4609: a tile and one more, for 4-byte keys
LARGE = ["int32", "float32", "float64"]  # from SYNC_MIN keys on: passes skipped where constant


@pytest.fixture(scope="module")
def cp():
    return pytest.importorskip("cupy")


@pytest.fixture(params=["ours", "cub"], scope="module")
def engine(request):
    """Our passes at every size, or CUB at every size (the codes made and undone around it)."""
    return RadixEngine(min_n=0 if request.param == "ours" else 1 << 40)


def code_order(x: np.ndarray, codec: NumericCodec) -> np.ndarray:
    return np.argsort(codec.encode(x, np), kind="stable")


@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("descending", [False, True])
@pytest.mark.parametrize("dtype", DTYPES)
def test_sort_and_pairs_in_code_order(cp, engine, dtype, descending, n):
    x = keys_with_specials(dtype, n)
    codec = NumericCodec(x.dtype, descending)
    want = x[code_order(x, codec)]
    given = cp.asarray(x)
    got = engine.sort(given, codec=codec)
    assert got.dtype == x.dtype
    np.testing.assert_array_equal(bits(got.get()), bits(want))
    np.testing.assert_array_equal(bits(given.get()), bits(x))  # the input is left as it was
    np.testing.assert_array_equal(reference(x, descending), got.get())  # NumPy's order too
    for vdtype in ("uint32", "int64", "uint16"):  # the last: taken by the order afterwards
        values = np.arange(n).astype(vdtype)
        out_k, out_v = engine.sort_pairs(given, cp.asarray(values), codec=codec)
        np.testing.assert_array_equal(bits(out_k.get()), bits(want))
        np.testing.assert_array_equal(out_v.get(), values[code_order(x, codec)])


@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("descending", [False, True])
@pytest.mark.parametrize("dtype", DTYPES)
def test_argsort_keeps_ties_in_input_order(cp, engine, dtype, descending, n):
    """A canonical codec (-0.0 is 0.0, every NaN one NaN): NumPy's stable order."""
    x = keys_with_specials(dtype, n)
    if x.dtype.kind == "f":  # many ties between -0.0 and 0.0 and between NaNs of all payloads
        x[::7], x[3::11], x[5::13], x[6::17] = -0.0, 0.0, np.nan, -np.nan
    codec = NumericCodec(x.dtype, descending, canonical=True)
    got = engine.argsort(cp.asarray(x), codec=codec)
    np.testing.assert_array_equal(got.get(), reference_order(x, descending))


@pytest.mark.parametrize("descending", [False, True])
@pytest.mark.parametrize("dtype", LARGE)
def test_from_sync_min_on(cp, dtype, descending):
    x = keys_with_specials(dtype, SYNC_MIN + 5)
    engine, codec = RadixEngine(min_n=0), NumericCodec(x.dtype, descending)
    got = engine.sort(cp.asarray(x), codec=codec)
    np.testing.assert_array_equal(bits(got.get()), bits(x[code_order(x, codec)]))
    codec = NumericCodec(x.dtype, descending, canonical=True)
    got = engine.argsort(cp.asarray(x), codec=codec)
    np.testing.assert_array_equal(got.get(), reference_order(x, descending))


def test_lossy_codec_is_for_argsort_only(cp):
    codec = NumericCodec(np.float32, canonical=True)
    with pytest.raises(ValueError, match="argsort only"):
        RadixEngine(min_n=0).sort(cp.arange(10, dtype=cp.float32), codec=codec)


@pytest.mark.parametrize("high", [200, 1000])
@pytest.mark.parametrize("descending", [False, True])
@pytest.mark.parametrize("dtype", ["int32", "int64"])
def test_constant_code_digits_are_skipped(cp, dtype, descending, high):
    """Small non-negative ints: their codes' high digits never vary, so those passes are
    skipped (from SYNC_MIN keys on), the first of them after it was queued. Below 256 the
    first pass, queued before the others were known to be skipped, is the only one: it
    writes the keys' bits back, not their codes."""
    rng = np.random.default_rng(5)
    x = rng.integers(0, high, SYNC_MIN + 7).astype(dtype)
    codec = NumericCodec(x.dtype, descending)
    got = RadixEngine(min_n=0).sort(cp.asarray(x), codec=codec)
    np.testing.assert_array_equal(got.get(), np.sort(x)[::-1] if descending else np.sort(x))


@pytest.mark.parametrize("dtype", ["int32", "float32", "float64", "int64"])
def test_api_alone_sorts_raw_numbers(cp, monkeypatch, dtype):
    """The public calls on one rank take this route once our passes run (sizes lowered here);
    a stable float sort still encodes (its canonical codes lose bits) and carries the keys."""
    for op in radix.MIN_N:
        monkeypatch.setitem(radix.MIN_N, op, 2)
    x = keys_with_specials(dtype, 70_001)
    data = np.concatenate(COMM.allgather(x))
    for descending in (False, True):
        shard = distsort.sort(cp.asarray(x), descending=descending)
        got = np.concatenate(COMM.allgather(shard.get()))
        same_bits(got, reference(data, descending), exact=False)
        stable = distsort.sort(cp.asarray(x), descending=descending, stable=True)
        got = np.concatenate(COMM.allgather(stable.get()))
        same_bits(got, data[reference_order(data, descending)], exact=True)
        order = distsort.argsort(cp.asarray(x), descending=descending)
        got = np.concatenate(COMM.allgather(order.get()))
        np.testing.assert_array_equal(got, reference_order(data, descending))
        keys, values = distsort.sort_pairs(cp.asarray(x), cp.arange(len(x), dtype=cp.int64)
                                           + (COMM.exscan(len(x)) or 0), descending=descending)
        got_k = np.concatenate(COMM.allgather(keys.get()))
        got_v = np.concatenate(COMM.allgather(values.get()))
        same_bits(got_k, reference(data, descending), exact=False)
        np.testing.assert_array_equal(bits(got_k), bits(data[got_v]))  # each value with its key
