"""The data generators: split-independence, each distribution's promise, gensort records."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from mpi4py import MPI

from distsort.check import first_disorder, key_words
from distsort.errors import DistsortError
from distsort.gen import DISTRIBUTIONS, gen_file, gen_format, generate
from distsort.io import FileFormat, detect_format, open_input

DTYPES = ["i1", "i2", "i4", "i8", "u1", "u2", "u4", "u8", "f2", "f4", "f8"]
NUMERIC = [d for d in DISTRIBUTIONS if d != "gensort"]
RANDOM = ["uniform", "normal", "zipf", "equal", "fewdistinct", "specials"]
GENSORT = FileFormat.records(100, 10)


def test_the_cli_distributions_are_all_there():
    cli = {"uniform", "normal", "zipf", "equal", "fewdistinct", "sorted", "reverse", "gensort"}
    assert cli <= set(DISTRIBUTIONS)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("dist", NUMERIC)
def test_numbers_have_the_dtype_and_the_same_bits_however_split(dist, dtype):
    whole = generate(dist, dtype, 0, 3000, seed=7, total=3000)
    assert whole.dtype == np.dtype(dtype) and whole.shape == (3000,)
    cuts = [0, 1, 999, 1000, 2047, 3000]
    pieces = [generate(dist, dtype, a, b, seed=7, total=3000) for a, b in zip(cuts, cuts[1:])]
    assert np.concatenate(pieces).tobytes() == whole.tobytes()


@settings(max_examples=30, deadline=None)
@given(st.lists(st.integers(0, 5000), min_size=1, max_size=5),
       st.sampled_from(NUMERIC + ["gensort"]), st.integers(0, 2**63))
def test_any_split_gives_the_same_data_set(cuts, dist, seed):
    cuts = sorted({0, 5000, *cuts})
    spec = GENSORT if dist == "gensort" else np.dtype("i4")
    whole = generate(dist, spec, 0, 5000, seed=seed, total=5000)
    pieces = [generate(dist, spec, a, b, seed=seed, total=5000) for a, b in zip(cuts, cuts[1:])]
    assert np.concatenate(pieces).tobytes() == whole.tobytes()


@pytest.mark.parametrize("dist", RANDOM)
def test_the_seed_chooses_the_data(dist):
    a = generate(dist, "u8", 0, 100, seed=1)
    assert a.tobytes() == generate(dist, "u8", 0, 100, seed=1).tobytes()
    assert a.tobytes() != generate(dist, "u8", 0, 100, seed=2).tobytes()


def test_big_endian_request_gives_native_arrays_of_the_same_values():
    big = generate("uniform", ">i4", 0, 50, seed=3)
    assert big.dtype.isnative
    assert big.tobytes() == generate("uniform", "<i4", 0, 50, seed=3).tobytes()


def test_positions_beyond_2_to_the_40():
    x = generate("uniform", "u4", 2**40, 2**40 + 10, seed=1)
    assert x.shape == (10,) and len(np.unique(x)) == 10
    s = generate("sorted", "i8", 2**40, 2**40 + 10)
    assert np.all(np.diff(s) == 1)


@pytest.mark.parametrize("dtype", ["i1", "u1"])
def test_uniform_integers_cover_the_whole_range(dtype):
    x = generate("uniform", dtype, 0, 20000, seed=5)
    assert len(np.unique(x)) == 256
    counts = np.bincount(x.view(np.uint8), minlength=256)
    assert counts.min() > 20000 / 256 / 2 and counts.max() < 20000 / 256 * 2


def test_uniform_64_bit_integers_reach_both_halves():
    x = generate("uniform", "i8", 0, 10000, seed=5)
    assert (x < 0).mean() == pytest.approx(0.5, abs=0.03)
    assert np.abs(x.astype(np.float64)).max() > 2.0**62


@pytest.mark.parametrize("dtype", ["f2", "f4", "f8"])
def test_uniform_floats_mix_signs_and_magnitudes(dtype):
    x = generate("uniform", dtype, 0, 20000, seed=5)
    assert np.all(np.isfinite(x)) and np.all(np.abs(x) <= 256)  # float16 may round up to 256
    assert (x < 0).mean() == pytest.approx(0.5, abs=0.03)
    magnitudes = np.floor(np.log2(np.abs(x[x != 0]).astype(np.float64)))
    assert magnitudes.min() <= -9 and magnitudes.max() >= 7


def test_normal_floats_are_standard_normal():
    x = generate("normal", "f8", 0, 200000, seed=11)
    assert x.mean() == pytest.approx(0, abs=0.01)
    assert x.std() == pytest.approx(1, abs=0.01)
    assert (np.abs(x) < 1).mean() == pytest.approx(0.6827, abs=0.005)


@pytest.mark.parametrize("dtype", ["i2", "u2"])
def test_normal_integers_center_on_the_middle_of_the_range(dtype):
    x = generate("normal", dtype, 0, 100000, seed=11).astype(np.float64)
    info = np.iinfo(dtype)
    assert x.mean() == pytest.approx((info.min + info.max + 1) / 2, abs=100)
    assert x.std() == pytest.approx(65536 / 16, rel=0.02)


@pytest.mark.parametrize("dtype", ["u1", "i2", "u8", "f2", "f8"])
def test_zipf_is_a_clipped_power_law(dtype):
    x = generate("zipf", dtype, 0, 100000, seed=13)
    assert np.all(x >= 1) and np.all(np.isfinite(x.astype(np.float64)))
    assert (x == 1).mean() == pytest.approx(1 - 2**-0.2, abs=0.01)
    assert (x >= 32).mean() == pytest.approx(32**-0.2, abs=0.01)
    top = np.iinfo(dtype).max if x.dtype.kind in "iu" else np.finfo(dtype).max
    assert x.max() == top or dtype in ("u8", "f8")


@pytest.mark.parametrize("dtype", DTYPES)
def test_equal_is_one_non_zero_value(dtype):
    x = generate("equal", dtype, 0, 1000, seed=17)
    assert len(np.unique(x)) == 1 and x[0] != 0
    assert generate("equal", dtype, 0, 1, seed=18)[0] != x[0]


@pytest.mark.parametrize("dtype", DTYPES)
def test_fewdistinct_has_at_most_16_values(dtype):
    x = generate("fewdistinct", dtype, 0, 5000, seed=19)
    assert 8 <= len(np.unique(x)) <= 16


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("total", [None, 1000, 10**6])
def test_sorted_and_reverse_follow_the_global_index(dtype, total):
    up = generate("sorted", dtype, 0, 1000, total=total)
    down = generate("reverse", dtype, 0, 1000, total=total)
    assert np.all(np.diff(up.astype(np.float64)) >= 0)
    assert np.all(np.diff(down.astype(np.float64)) <= 0)
    assert np.all(np.isfinite(up.astype(np.float64)))


@pytest.mark.parametrize("dtype", ["i1", "u2", "i8", "u8"])
def test_sorted_integers_span_the_range_when_the_total_is_known(dtype):
    x = generate("sorted", dtype, 0, 4096, total=4096)
    info = np.iinfo(dtype)
    assert x[0] == info.min
    assert float(x[-1]) >= float(info.max) - (float(info.max) - float(info.min)) / 4000
    assert generate("reverse", dtype, 4095, 4096, total=4096)[0] == info.min


@pytest.mark.parametrize("dtype", ["f2", "f4", "f8"])
def test_specials_hold_the_float_edge_cases(dtype):
    x = generate("specials", dtype, 0, 5000, seed=23)
    bits = x.view(f"u{x.dtype.itemsize}")
    sign = np.array(1, bits.dtype) << (8 * x.dtype.itemsize - 1)
    assert np.isnan(x).any() and ((bits & sign) != 0)[np.isnan(x)].any()  # NaN of both signs
    assert np.isposinf(x).any() and np.isneginf(x).any()
    assert ((x == 0) & np.signbit(x)).any() and ((x == 0) & ~np.signbit(x)).any()
    assert (x == np.finfo(dtype).max).any() and (x == np.finfo(dtype).smallest_subnormal).any()
    assert 0.3 < (np.isfinite(x) & (np.abs(x) < 256) & (x != 0)).mean() < 0.8


@pytest.mark.parametrize("dtype", ["i1", "u4", "i8"])
def test_specials_hold_the_integer_extremes(dtype):
    x = generate("specials", dtype, 0, 5000, seed=23)
    info = np.iinfo(dtype)
    assert (x == info.min).any() and (x == info.max).any() and (x == 0).any()


def hex_row(i: int) -> bytes:
    return f"{i:032X}".encode()


def test_gensort_records_have_the_gensort_layout():
    rows = generate("gensort", GENSORT, 1000, 1100, seed=29)
    assert rows.dtype == np.uint8 and rows.shape == (100, 100)
    for k, row in enumerate(rows.tobytes()[i : i + 100] for i in range(0, 10000, 100)):
        assert row[10:12] == b"\x00\x11" and row[12:44] == hex_row(1000 + k)
        assert row[44:48] == b"\x88\x99\xaa\xbb" and row[96:100] == b"\xcc\xdd\xee\xff"
        assert all(row[j : j + 4] == row[j : j + 1] * 4 for j in range(48, 96, 4))
        assert set(row[48:96]) <= set(b"0123456789ABCDEF")
    keys = {bytes(r[:10]) for r in rows}
    assert len(keys) == 100


def test_gensort_keys_are_uniform_bytes():
    rows = generate("gensort", GENSORT, 0, 20000, seed=31)
    counts = np.bincount(rows[:, :10].ravel(), minlength=256)
    assert counts.min() > 200000 / 256 * 0.8 and counts.max() < 200000 / 256 * 1.2


@pytest.mark.parametrize("record_size, key_size", [(7, 3), (10, 10), (64, 12), (250, 20)])
def test_other_record_sizes(record_size, key_size):
    fmt = FileFormat.records(record_size, key_size)
    rows = generate("gensort", fmt, 0, 300, seed=37)
    assert rows.shape == (300, record_size)
    assert len({bytes(r[:key_size]) for r in rows}) == 300
    again = np.concatenate([generate("gensort", fmt, 0, 150, seed=37),
                            generate("gensort", fmt, 150, 300, seed=37)])
    assert again.tobytes() == rows.tobytes()


@pytest.mark.parametrize("dist", ["sorted", "reverse", "equal", "fewdistinct"])
def test_record_keys_follow_the_distribution_in_memcmp_order(dist):
    fmt = FileFormat.records(16, 12)
    rows = generate(dist, fmt, 0, 3000, total=3000, seed=41)
    keys = key_words(rows, key_size=12)
    if dist == "sorted":
        assert first_disorder(keys) is None
    elif dist == "reverse":
        assert first_disorder(key_words(rows, key_size=12, descending=True)) is None
    else:
        assert len({bytes(r[:12]) for r in rows}) == (1 if dist == "equal" else 16)


def test_bad_requests_are_clear_errors():
    with pytest.raises(DistsortError, match="--record-size 100 --key-size 10"):
        generate("gensort", "u4", 0, 10)
    with pytest.raises(DistsortError, match="unknown --dist 'pareto'"):
        generate("pareto", "u4", 0, 10)
    with pytest.raises(DistsortError, match="--dtype"):
        generate("uniform", "complex64", 0, 10)


def test_empty_range():
    assert generate("uniform", "f4", 5, 5).shape == (0,)
    assert generate("gensort", GENSORT, 5, 5).shape == (0, 100)


@pytest.mark.parametrize("fmt, dist", [(FileFormat.npy(">f4"), "normal"),
                                       (FileFormat.raw("u2"), "sorted"),
                                       (GENSORT, "gensort")])
def test_gen_file_writes_the_data_set(tmp_path, fmt, dist):
    path = tmp_path / ("o.npy" if fmt.kind == "npy" else "o.dat")
    gen_file(MPI.COMM_SELF, path, 2500, fmt, dist, seed=43, chunk=1000)
    opts = {"npy": {}, "raw": {"dtype": "u2"}, "records": {"record_size": 100, "key_size": 10}}
    src = open_input(path, detect_format(path, **opts[fmt.kind]))
    expect = generate(dist, fmt, 0, 2500, seed=43, total=2500)
    assert src.count == 2500 and src.read(0, 2500).tobytes() == expect.tobytes()


STOOD_IN = ["?", "M8[ns]", "m8[s]"]  # keys sorted through unsigned stand-ins (keys.StandIns)


@pytest.mark.parametrize("dtype", STOOD_IN)
@pytest.mark.parametrize("dist", NUMERIC)
def test_bool_and_time_keys_are_made_as_their_stand_ins_order(dist, dtype):
    """The distribution's values of the stand-ins' width, as keys in the same order: sorted is
    sorted in NumPy's order (NaT last), however split."""
    whole = generate(dist, dtype, 0, 3000, seed=9, total=3000)
    assert isinstance(whole, np.ndarray) and whole.dtype == np.dtype(dtype)
    pieces = [generate(dist, dtype, a, b, seed=9, total=3000) for a, b in [(0, 999), (999, 3000)]]
    assert np.concatenate(pieces).tobytes() == whole.tobytes()
    ordered = {"sorted": whole, "reverse": whole[::-1]}.get(dist)
    if ordered is not None:
        assert ordered.tobytes() == np.sort(whole, kind="stable").tobytes()
    if dist == "uniform":  # both halves of the stand-ins' range
        assert len(np.unique(whole)) == (2 if dtype == "?" else 3000)
    if dist == "specials" and dtype != "?":
        assert np.isnat(whole).any()


@pytest.mark.gpu
@pytest.mark.parametrize("dist", DISTRIBUTIONS)
def test_gpu_generation_matches_the_cpu(dist):
    cupy = pytest.importorskip("cupy")
    spec = GENSORT if dist == "gensort" else np.dtype("i8")
    cpu = generate(dist, spec, 123, 70000, seed=47, total=70000)
    gpu = generate(dist, spec, 123, 70000, seed=47, xp=cupy, total=70000)
    assert isinstance(gpu, cupy.ndarray)
    if dist != "gensort":  # bool keys on the device too; time keys on the host (CuPy has none)
        flags = generate(dist, "?", 123, 70000, seed=47, xp=cupy, total=70000)
        assert cupy.asnumpy(flags).tobytes() == generate(dist, "?", 123, 70000, seed=47,
                                                         total=70000).tobytes()
        assert isinstance(generate(dist, "M8[ns]", 0, 10, xp=cupy, total=10), np.ndarray)
    if dist in ("normal", "zipf"):  # log, cos and pow may round differently on the GPU
        gpu = cupy.asnumpy(gpu).astype(float)
        np.testing.assert_allclose(gpu, cpu.astype(float), rtol=1e-9, atol=4096)
    else:
        assert cupy.asnumpy(gpu).tobytes() == cpu.tobytes()


@pytest.mark.parametrize("path, dist, opts, expect", [
    ("g.dat", "gensort", {}, FileFormat.records(100, 10)),
    ("g.dat", "gensort", {"record_size": 50, "key_size": 8}, FileFormat.records(50, 8)),
    ("g.npy", "zipf", {"dtype": ">u8"}, FileFormat.npy(">u8")),
    ("g.bin", "sorted", {"dtype": "f2"}, FileFormat.raw("f2")),
])
def test_gen_format(path, dist, opts, expect):
    assert gen_format(path, dist, **opts) == expect


def test_gen_format_errors():
    with pytest.raises(DistsortError, match="--dist gensort makes byte records"):
        gen_format("g.dat", "gensort", dtype="u4")
    with pytest.raises(DistsortError, match="give --dtype"):
        gen_format("g.dat", "uniform")
    with pytest.raises(DistsortError, match="does not end in .npy"):
        gen_format("g.npy", "gensort")
    for dtype in ("U8", "S4", "V2", "complex128", "c8"):
        with pytest.raises(DistsortError, match="not complex numbers, bytes or strings"):
            gen_format("g.npy", "uniform", dtype=dtype)
    with pytest.raises(DistsortError, match="unknown --dtype 'uint33'"):
        gen_format("g.npy", "uniform", dtype="uint33")
