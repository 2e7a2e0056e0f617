"""Checksum, order and verdicts of distsort.check on one process (COMM_SELF)."""

from __future__ import annotations

import sys

import numpy as np
import pytest
from helpers import string_keys
from mpi4py import MPI

from distsort import check
from distsort.check import checksum, first_disorder, key_words, run_check, verify
from distsort.errors import DistsortError
from distsort.io import FileFormat, write_shards

COMM = MPI.COMM_SELF
DTYPES = ["i1", "i2", "i4", "i8", "u1", "u2", "u4", "u8", "f2", "f4", "f8"]


def random_values(dtype, n: int = 500, seed: int = 1) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return rng.integers(0, 256, n * np.dtype(dtype).itemsize, dtype=np.uint8).view(dtype)


def records(n: int = 300, width: int = 100, seed: int = 2) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 256, (n, width), dtype=np.uint8)


def bitwise_sorted(data: np.ndarray) -> np.ndarray:
    """NumPy's order, keeping every element's bits (np.sort rewrites NaN payloads and signs)."""
    return data[np.argsort(data, kind="stable")]


def memcmp_sorted(rows: np.ndarray, key_size: int) -> np.ndarray:
    return rows[np.lexsort(rows[:, :key_size].T[::-1])]


# ---- checksum -----------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", DTYPES)
def test_checksum_ignores_order_and_splitting(dtype):
    data = random_values(dtype)
    shuffled = np.random.default_rng(5).permutation(data)
    parts = sum(checksum(p) for p in np.array_split(shuffled, 7)) % 2**64
    assert checksum(data) == checksum(shuffled) == parts
    assert 0 <= checksum(data) < 2**64


@pytest.mark.parametrize("dtype", DTYPES)
def test_checksum_sees_every_changed_bit(dtype):
    data = random_values(dtype, 64)
    base = checksum(data)
    raw = data.view(np.uint8)
    for byte in range(0, raw.size, 13):
        for bit in (0, 7):
            changed = raw.copy()
            changed[byte] ^= 1 << bit
            assert checksum(changed.view(dtype)) != base


def test_checksum_of_records_sees_bytes_past_the_key_and_swapped_halves():
    rows = records(40, 13)
    base = checksum(rows)
    changed = rows.copy()
    changed[7, 12] ^= 1
    assert checksum(changed) != base
    # the second halves of two records exchanged: same multiset of words, different records
    swapped = rows.copy()
    swapped[[0, 1], 8:] = rows[[1, 0], 8:]
    assert checksum(swapped) != base
    assert checksum(rows[::-1]) == base


def test_checksum_sees_duplicates_replacing_elements():
    data = np.arange(100, dtype=np.uint32)
    dup = data.copy()
    dup[3] = dup[4]
    assert checksum(dup) != checksum(data)
    assert checksum(np.zeros(0, np.float64)) == 0


def test_checksum_works_on_strided_and_big_endian_views():
    data = random_values("u4", 100)
    assert checksum(data[::2]) == checksum(data[::2].copy())
    big = data.astype(">u4")
    assert checksum(big.astype("<u4")) == checksum(data)


def test_checksum_is_pinned():
    """The value is part of the contract between NumPy and CuPy runs: pin it."""
    assert checksum(np.arange(10, dtype=np.uint64)) == checksum(np.arange(10, dtype=np.uint64))
    assert checksum(np.array([0], np.uint64)) == 0xE220A8397B1DCDAF
    assert checksum(np.array([1], np.uint8)) == checksum(np.array([1], np.uint64))


@pytest.mark.parametrize("values_dtype", [None, "u1", ">i2", "f4", "S8", "S3", "V16", "i4,u1"])
@pytest.mark.parametrize("dtype", ["u1", "i2", ">f4", "u8", "M8[ns]", "S4", "S5", "rows100",
                                   "rows3f8"])
def test_the_c_hashes_sum_as_numpys_steps(monkeypatch, dtype, values_dtype):
    """check's C kernels (local/hash.c: 1-D keys and values of 1, 2, 4 or 8 bytes; rows of any
    width, records and wide or odd values) give the checksum NumPy's steps give, in pieces of
    several threads, on strided views too."""
    from distsort import check

    if check._host_part(np.zeros(1, np.uint32), None) is None:
        pytest.skip("no C compiler: NumPy's steps only")
    monkeypatch.setattr(check, "_HOST_TASK", 1000)  # several pieces
    n, raw = 5001, np.random.default_rng(4).integers(0, 256, 5001 * 200, dtype=np.uint8)
    if dtype == "rows100":  # records of 100 bytes
        keys = raw[: n * 100].reshape(n, 100)
    elif dtype == "rows3f8":  # rows of 3 floats
        keys = raw[: n * 24].view("f8").reshape(n, 3)
    else:
        keys = raw[: n * np.dtype(dtype).itemsize].view(dtype)
    values = None if values_dtype is None else raw[-n * np.dtype(values_dtype).itemsize:
                                                  ].view(values_dtype)

    def sums() -> list:
        return [checksum(keys, values=values), checksum(keys[::3], values=values
                                                        if values is None else values[::3]),
                checksum(keys[::-1][:1], values=values if values is None else values[::-1][:1])]

    if sys.byteorder == "little":  # else rows of bytes keep NumPy's steps
        assert check._host_part(keys[::3], None if values is None else values[::3]) is not None
    fast = sums()
    monkeypatch.setattr(check, "_host_part", lambda data, values: None)
    assert fast == sums()


def test_checksum_refuses_values_of_another_length():
    """One value per element: a shorter or longer values column is an error, not a sum over
    memory past its end (the C kernels read as many values as there are elements)."""
    for values in (np.arange(5, dtype=np.uint64), np.arange(11, dtype=np.uint8)):
        with pytest.raises(ValueError, match="one each"):
            checksum(np.arange(10, dtype=np.uint64), values=values)


# ---- order --------------------------------------------------------------------------------------


def test_first_disorder_finds_the_first_bad_pair():
    assert first_disorder([np.array([1, 2, 2, 3], np.uint32)]) is None
    assert first_disorder([np.array([1, 3, 2, 1], np.uint32)]) == 1
    assert first_disorder([np.zeros(0, np.uint8)]) is None
    two_words = [np.array([1, 1, 2], np.uint64), np.array([5, 4, 0], np.uint64)]
    assert first_disorder(two_words) == 0


@pytest.mark.parametrize("kind", ["S", "U"])
@pytest.mark.parametrize("descending", [False, True])
def test_strings_first_descent_by_numpys_comparison_is_their_keys(kind, descending):
    """Bytes (NUL bytes inside and at the end) and strings (beyond the BMP, big-endian too)
    are checked by NumPy's comparison of the strings themselves: the first bad pair their keys
    find, sorted and with two rows swapped."""
    rng = np.random.default_rng([ord(kind), descending])
    for seed in range(4):
        keys = np.sort(string_keys(kind, 3000, seed), kind="stable")
        keys = keys[::-1].copy() if descending else keys
        for swaps in range(12):
            rows = keys.copy()
            if swaps:
                i, j = rng.integers(0, len(rows), 2)
                rows[[i, j]] = rows[[j, i]]
            assert (check._text_disorder(rows, descending)
                    == first_disorder(key_words(rows, np, descending)))


@pytest.mark.parametrize("dtype", [np.uint8, np.uint16, np.uint32, np.uint64])
def test_the_c_kernel_finds_the_first_descent_as_numpy_s_steps_do(dtype):
    """local/descent.c against NumPy's steps (the path for several words), a descent at a
    block's edges, inside one, at the ends, several, none; and only its first reported."""
    if check._host_descent([np.zeros(2, dtype)]) is None:
        pytest.skip("no C compiler here to build the C kernels")
    n = 3 * 4096 + 5
    for places in ([], [0], [4095], [4096], [8191], [n - 2], [5000, 6000], [n // 2, 1]):
        codes = np.arange(n, dtype=np.uint64).astype(dtype)  # narrow types wrap: repeats
        codes = np.sort(codes)
        codes[places] = np.iinfo(dtype).max
        two_words = [codes, np.zeros(n, np.uint8)]  # NumPy's steps, the same order
        got = first_disorder([codes])
        assert got == first_disorder(two_words), places
        if np.dtype(dtype).itemsize >= 4:  # distinct codes: each place is a descent
            assert got == (min(places) if places else None)


def test_the_threads_pieces_find_the_first_descent_across_their_edges(monkeypatch):
    """The order check's pieces of pairs on several threads: a descent at a piece's last pair
    (which reads the next piece's first row), at its first, in two pieces (the first reported)."""
    from distsort import workers

    if check._host_descent([np.zeros(2, np.uint32)]) is None:
        pytest.skip("no C compiler here to build the C kernels")
    monkeypatch.setattr(check, "_HOST_TASK", 1000)
    before = workers.threads()
    workers.use_threads(3)
    try:
        n = 10_000
        for places in ([], [999], [1000], [999, 5000], [7000, 2500], [n - 2]):
            codes = np.arange(n, dtype=np.uint32)
            codes[places] = np.uint32(2**32 - 1)
            assert first_disorder([codes]) == (min(places) if places else None), places
        codes = np.arange(n, dtype=np.uint32)
        codes[1000] = 0  # row 1000 below row 999: pair 999, the first piece's last
        assert first_disorder([codes]) == 999
    finally:
        workers.use_threads(before)


def test_nan_last_and_signed_zeros_equal_in_both_orders():
    up = np.array([-np.inf, -1.0, -0.0, 0.0, -0.0, 2.0, np.inf, np.nan, -np.nan], np.float32)
    assert first_disorder(key_words(up)) is None
    down = np.array([np.inf, 2.0, 0.0, -0.0, 0.0, -1.0, -np.inf, np.nan, np.nan], np.float32)
    assert first_disorder(key_words(down, descending=True)) is None
    assert first_disorder(key_words(up, descending=True)) is not None


NUMBERS = [np.uint8, np.uint16, np.uint32, np.uint64, np.int8, np.int16, np.int32, np.int64,
           np.float32, np.float64]


@pytest.mark.parametrize("descending", [False, True])
@pytest.mark.parametrize("dtype", NUMBERS)
def test_one_read_of_the_output_sums_and_orders_as_the_two_passes_do(monkeypatch, dtype,
                                                                     descending):
    """local/sorted.c (the checksum and the order test of a column of numbers in one read)
    against checksum and first_disorder of the codes: sorted columns with ties, -0.0 beside
    0.0 and NaNs (last in both orders), descents at the threads' pieces' edges and inside."""
    from distsort import workers

    if check._sorted_sum(np.zeros(2, dtype), descending) is None:
        pytest.skip("no C compiler here to build the C kernels")
    monkeypatch.setattr(check, "_HOST_TASK", 1000)
    before, rng, n = workers.threads(), np.random.default_rng(7), 10_007
    workers.use_threads(3)
    try:
        for places in ([], [0], [999], [1000], [4095], [4096, 7000], [n - 2], "shuffled"):
            data = rng.integers(0, 200, n).astype(dtype)
            if np.dtype(dtype).kind == "f":
                data[rng.integers(0, n, 40)] = np.array([np.nan, -0.0, 0.0, -np.nan])[
                    rng.integers(0, 4, 40)]
            data = np.sort(data)  # NaN last
            if descending:
                data = np.concatenate([np.sort(data[~np.isnan(data)])[::-1], data[np.isnan(
                    data)]]) if np.dtype(dtype).kind == "f" else data[::-1].copy()
            if places == "shuffled":
                rng.shuffle(data)
            else:
                for at in places:  # a descent at pair `at` in either order
                    low, high = np.nanmin(data), np.nanmax(data)
                    data[at], data[at + 1] = (low, high) if descending else (high, low)
            want = (checksum(data), first_disorder(key_words(data, np, descending)))
            assert (want[1] is None) == (places == []), places
            assert check._sorted_sum(data, descending) == want, places
            assert check._sorted_sum(data, descending, hashed=False) == (0, want[1]), places
    finally:
        workers.use_threads(before)


# ---- verify -------------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("descending", [False, True])
def test_verify_accepts_numpy_sorted_data(dtype, descending):
    data = random_values(dtype)
    out = bitwise_sorted(data)
    if descending:
        nan = np.isnan(out) if out.dtype.kind == "f" else np.zeros(len(out), bool)
        out = np.concatenate([out[~nan][::-1], out[nan]])
    verdict = verify(COMM, data, out, descending=descending)
    assert verdict.ok and verdict.order_ok, verdict.message
    assert verdict.count_in == verdict.count_out == len(data)
    assert verdict.checksum_in == verdict.checksum_out == checksum(data)
    assert verdict.first_bad_rank is None and verdict.message.startswith("OK")


def test_verify_catches_a_swapped_element():
    data = random_values("i4")
    out = np.sort(data)
    out[[10, 11]] = out[[11, 10]]
    verdict = verify(COMM, data, out)
    assert not verdict.ok and not verdict.order_ok and verdict.first_bad_rank == 0
    assert verdict.checksum_in == verdict.checksum_out
    a, b = out[10].item(), out[11].item()
    assert f"out of order at positions 10 and 11: {a!r} then {b!r}" in verdict.message
    assert "other way" not in verdict.message


def test_verify_catches_a_changed_byte_even_when_order_survives():
    data = np.arange(0, 1000, 2, dtype=np.uint16)
    out = data.copy()
    out[5] += 1  # still sorted, same count
    verdict = verify(COMM, data, out)
    assert not verdict.ok and verdict.order_ok
    assert "checksum" in verdict.message and "permutation" in verdict.message


@pytest.mark.parametrize("descending", [False, True])
def test_an_output_sorted_the_other_way_gets_a_hint(descending):
    data = random_values("f8")
    out = np.sort(data)[::-1] if not descending else np.sort(data)
    says = verify(COMM, data, out, descending=descending).message
    assert says.startswith("FAILED: out of order at positions 0 and 1")
    flag = "without --descending" if descending else "with --descending"
    assert f"its first element sorts after its last: was it sorted {flag}?" in says


def test_verify_catches_a_missing_element():
    data = random_values("f8")
    verdict = verify(COMM, data, np.sort(data)[1:])
    assert not verdict.ok and verdict.count_out == len(data) - 1
    assert "holds 499 elements, the input 500" in verdict.message


def test_verify_records_by_key_prefix():
    rows = records()
    out = memcmp_sorted(rows, 10)
    assert verify(COMM, rows, out, key_size=10).ok
    # ties in the key may come in any order of the rest of the record
    rows[:, :10] = rows[0, :10]
    assert verify(COMM, rows, rows[::-1].copy(), key_size=10).ok
    assert not verify(COMM, rows, rows[::-1].copy(), key_size=11).order_ok


def test_verify_records_descending():
    rows = records()
    out = memcmp_sorted(rows, 10)[::-1].copy()
    assert verify(COMM, rows, out, key_size=10, descending=True).ok
    assert not verify(COMM, rows, out, key_size=10).order_ok


def test_verify_empty():
    empty = np.zeros(0, np.int64)
    verdict = verify(COMM, empty, empty)
    assert verdict.ok and verdict.count_out == 0


# ---- run_check on files -------------------------------------------------------------------------


def test_run_check_files(tmp_path):
    data = random_values(">f4", 1000)
    np.save(tmp_path / "in.npy", data)
    fmt = FileFormat.npy(">f4")
    out = bitwise_sorted(data.astype("f4"))
    write_shards(COMM, tmp_path / "out.npy", fmt, out)
    assert run_check(COMM, tmp_path / "in.npy", tmp_path / "out.npy", chunk=97).ok
    write_shards(COMM, tmp_path / "bad.npy", fmt, out[::-1].copy())
    verdict = run_check(COMM, tmp_path / "in.npy", tmp_path / "bad.npy", chunk=97)
    assert not verdict.order_ok and verdict.first_bad_rank == 0
    assert verdict.checksum_in == verdict.checksum_out


def test_run_check_records_and_chunk_boundaries(tmp_path):
    rows = records(500)
    rows.tofile(tmp_path / "in.dat")
    out = memcmp_sorted(rows, 10)
    out[[96, 97]] = out[[97, 96]]  # disorder exactly across a chunk boundary
    out.tofile(tmp_path / "out.dat")
    fmt = FileFormat.records(100, 10)
    verdict = run_check(COMM, tmp_path / "in.dat", tmp_path / "out.dat", fmt, chunk=97)
    assert not verdict.order_ok and "out of order at positions 96 and 97: " in verdict.message
    assert f"then {out[97, :16].tobytes().hex()}..." in verdict.message  # the record's bytes
    memcmp_sorted(rows, 10).tofile(tmp_path / "out.dat")
    assert run_check(COMM, tmp_path / "in.dat", tmp_path / "out.dat", fmt, chunk=97).ok


def test_run_check_fails_an_output_of_another_type(tmp_path):
    np.save(tmp_path / "in.npy", np.arange(10, dtype=np.int32))
    np.save(tmp_path / "out.npy", np.arange(10, dtype=np.int64))
    verdict = run_check(COMM, tmp_path / "in.npy", tmp_path / "out.npy")
    assert not verdict.ok and verdict.message.startswith("FAILED: ")
    assert "holds npy int64 but the input holds npy int32" in verdict.message
    with pytest.raises(DistsortError, match="does not exist"):
        run_check(COMM, tmp_path / "in.npy", tmp_path / "missing.npy")


# ---- key-value pairs ----------------------------------------------------------------------------


@pytest.mark.parametrize("values", [np.arange(300, dtype=np.complex128) * 1j,
                                    np.arange(900, dtype=np.uint8).reshape(300, 3),
                                    np.arange(300, dtype=np.int16)])
def test_values_are_checked_with_their_keys(values):
    keys = random_values("u2", 300, seed=8)
    order = np.argsort(keys, kind="stable")
    assert checksum(keys, values=values) == checksum(keys[order], values=values[order])
    assert checksum(keys, values=values) != checksum(keys)
    verdict = verify(COMM, keys, keys[order], values_in=values, values_out=values[order])
    assert verdict.ok, verdict.message
    mispaired = values[order].copy()
    mispaired[[0, 1]] = mispaired[[1, 0]]  # keys in place, two values exchanged
    verdict = verify(COMM, keys, keys[order], values_in=values, values_out=mispaired)
    assert not verdict.ok and verdict.order_ok and "checksum" in verdict.message


def test_element_bytes_hash_alike_as_numbers_or_as_byte_rows():
    data = random_values("u4", 50)
    assert checksum(data) == checksum(data.view(np.uint8).reshape(50, 4))


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["u1", "i2", "f4", "u8"])
def test_gpu_checksum_and_verify_agree_with_the_cpu(dtype):
    cupy = pytest.importorskip("cupy")
    data = random_values(dtype, 5000)
    out = bitwise_sorted(data)
    assert checksum(cupy.asarray(data), cupy) == checksum(data)
    rows = records(500, 100)
    assert checksum(cupy.asarray(rows), cupy) == checksum(rows)
    verdict = verify(COMM, cupy.asarray(data), cupy.asarray(out), xp=cupy)
    assert verdict.ok, verdict.message
    out[[0, -1]] = out[[-1, 0]]
    assert not verify(COMM, cupy.asarray(data), cupy.asarray(out), xp=cupy).order_ok


@pytest.mark.gpu
@pytest.mark.parametrize("values_dtype", [None, "i8", "M8[ns]", "S5"])
def test_gpu_verify_of_host_arrays_in_pieces_agrees_with_the_cpu(monkeypatch, values_dtype):
    """Host arrays checked on the GPU piece by piece (as --verify and check do): the same
    checksums and verdicts as on the CPU, a disorder across two pieces found; values of dtypes
    CuPy lacks go as their bytes."""
    cupy = pytest.importorskip("cupy")
    from distsort import check

    monkeypatch.setattr(check, "_CHUNK", 256)  # pieces of 1024 rows
    data = np.random.default_rng(5).permutation(5000).astype(np.float64) - 2500.5
    order = np.argsort(data, kind="stable")
    values = None if values_dtype is None else np.arange(5000).astype(values_dtype)
    pairs = {} if values is None else dict(values_in=values, values_out=values[order])
    on_gpu = verify(COMM, data, data[order], xp=cupy, **pairs)
    on_cpu = verify(COMM, data, data[order], **pairs)
    assert on_gpu.ok and (on_gpu.checksum_in, on_gpu.checksum_out) == (on_cpu.checksum_in,
                                                                      on_cpu.checksum_out)
    swapped = data[order]
    swapped[[1023, 1024]] = swapped[[1024, 1023]]  # the last of one piece, the first of the next
    says = verify(COMM, data, swapped, xp=cupy).message
    assert "out of order" in says and says == verify(COMM, data, swapped).message


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["u1", "i2", "f4", "i8", "f8"])
def test_one_pass_kernels_agree_with_the_cpu_at_every_size(dtype):
    """check.cu's checksum and first disorder against NumPy's: sizes below one warp, around the
    grid's stride and above it; descents at the first pair, inside, across a stride, at the
    last pair, several (the first is named), none."""
    cupy = pytest.importorskip("cupy")
    from distsort import check

    stride = check._BLOCKS * check._THREADS
    for n in (1, 2, 31, 33, stride - 1, stride + 2, 3 * stride + 7):
        data = random_values(dtype, n)
        assert check._device_hash_sum(cupy.asarray(data)) == checksum(data), n
        codes = np.sort(key_words(data)[0])
        for places in ([], [0], [n // 2], [stride - 1], [n - 2], [n // 3, n // 2]):
            places = [p for p in places if 0 <= p < n - 1]
            broken = codes.copy()
            broken[places] = np.iinfo(broken.dtype).max  # above its successor, but for ties
            want = first_disorder([broken])
            if places == [n // 2] and n > 33:
                assert want == n // 2
            assert check._device_first_descent(cupy.asarray(broken)) == want, (n, places)


def test_a_values_file_of_another_length_is_named_with_its_count(tmp_path):
    from distsort.check import _values_file
    from distsort.io import detect_format, open_input

    np.save(tmp_path / "k.npy", np.zeros(1, np.uint32))
    np.save(tmp_path / "v.npy", np.zeros(2, np.int64))
    keys = open_input(str(tmp_path / "k.npy"), detect_format(str(tmp_path / "k.npy")))
    with pytest.raises(DistsortError, match=r"v.npy holds 2 values but .*k.npy holds 1 key$"):
        _values_file(str(tmp_path / "v.npy"), keys)
