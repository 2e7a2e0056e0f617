"""GPU paths against NumPy: the partition kernel, and the whole sort with CuPy arrays.

`pytest -m gpu tests/job/test_gpu.py` on one GPU; `mpirun -n 4 python -m pytest --with-mpi -m gpu
tests/job/test_gpu.py` on four (each rank binds its own GPU). Skipped where no GPU is found.
"""

from __future__ import annotations

import numpy as np
import pytest
from helpers import (
    bool_or_time_keys,
    bool_or_time_order,
    complex_keys,
    everything,
    odd_values,
    string_keys,
    structured_rows,
    tie_heavy,
)

import distsort
from distsort.report import SortReport
from distsort.steps.splitters import classify

MPI = pytest.importorskip("mpi4py.MPI")
COMM = MPI.COMM_WORLD
pytestmark = pytest.mark.gpu


def splitters_for(keys: np.ndarray, buckets: int, rng) -> np.ndarray:
    """Random (key, position) splitters drawn from the keys themselves, sorted."""
    picks = np.sort(rng.choice(len(keys), size=buckets - 1, replace=len(keys) < buckets - 1))
    rows = np.stack([keys[picks].astype(np.uint64), picks.astype(np.uint64) + 1000])
    return rows.T[np.lexsort(rows[::-1])]


@pytest.mark.parametrize("dtype", ["uint8", "uint16", "uint32", "uint64"])
@pytest.mark.parametrize("n", [0, 1, 4095, 4097, 2**20 + 3])
@pytest.mark.parametrize("buckets", [2, 5, 33, 256])
@pytest.mark.parametrize("align", [1, 1024])
def test_partition_kernel_is_a_stable_grouping(dtype, n, buckets, align):
    import cupy

    from distsort.local.partition import partition_keys
    from distsort.transport import aligned_displacements

    rng = np.random.default_rng(n + buckets)
    keys = rng.integers(0, 50 if n > 4 else 5, n).astype(dtype)  # many ties with splitters
    if n == 0:
        splitters = np.zeros((buckets - 1, 2), np.uint64)
    else:
        splitters = splitters_for(keys, buckets, rng)
    grouped, dest, counts, starts = partition_keys(cupy.asarray(keys), 1000, splitters,
                                                   want_dest=True, align=align)
    expect_bucket = classify([keys], 1000, splitters, np)
    np.testing.assert_array_equal(counts, np.bincount(expect_bucket, minlength=buckets))
    np.testing.assert_array_equal(starts, aligned_displacements(counts, align))
    order = np.argsort(expect_bucket, kind="stable")
    host = cupy.asnumpy(grouped)
    packed = np.concatenate([host[a : a + c] for a, c in zip(starts, counts)])
    np.testing.assert_array_equal(packed, keys[order])
    np.testing.assert_array_equal(host[cupy.asnumpy(dest)], keys)  # dest says where each went


@pytest.mark.parametrize("dtype", ["int8", "uint16", "int32", "uint32", "int64", "uint64",
                                   "float16", "float32", "float64"])
@pytest.mark.parametrize("descending", [False, True])
def test_sort_cupy_arrays_matches_numpy(dtype, descending):
    import cupy

    rng = np.random.default_rng([COMM.Get_rank(), 7])
    x = rng.integers(0, 256, 300_000 * np.dtype(dtype).itemsize, dtype=np.uint8).view(dtype)
    shard = distsort.sort(cupy.asarray(x), descending=descending)
    assert isinstance(shard, cupy.ndarray) and shard.dtype == x.dtype
    everything = np.concatenate(COMM.allgather(x))
    ref = np.sort(everything)
    if descending:
        nan = np.isnan(ref) if ref.dtype.kind == "f" else np.zeros(len(ref), bool)
        ref = np.concatenate([ref[~nan][::-1], ref[nan]])
    got = np.concatenate(COMM.allgather(cupy.asnumpy(shard)))
    assert got.tobytes() == ref.tobytes() or np.array_equal(got, ref, equal_nan=True)
    big_endian = distsort.sort(x.astype(x.dtype.newbyteorder(">")), backend="gpu",
                               descending=descending)
    assert big_endian.dtype == x.dtype.newbyteorder(">") and np.array_equal(
        np.concatenate(COMM.allgather(big_endian)), ref, equal_nan=True)
    biggest, total = max(COMM.allgather(len(shard))), len(everything)
    assert biggest <= max(1.05 * total / COMM.Get_size(), -(-total // COMM.Get_size()))


@pytest.mark.parametrize("dtype", ["uint32", "int64", "float32"])
@pytest.mark.parametrize("n", [2**20 + 3, 2**25 + 5])  # CUB's and our kernels' sizes at P=1
def test_gpu_sorts_that_may_overwrite_their_input_match_numpy(dtype, n):
    """overwrite_input with device keys and values; host keys, which the GPU's sort copies
    anyway (so may overwrite unasked): the same shards as NumPy's; the caller's keys are left
    as they were unless asked."""
    import cupy

    rng = np.random.default_rng([COMM.Get_rank(), 11])
    x = rng.integers(0, 256, n * np.dtype(dtype).itemsize, dtype=np.uint8).view(dtype)
    x = np.nan_to_num(x, nan=0.5) if x.dtype.kind == "f" else x
    whole = np.concatenate(COMM.allgather(x))
    ref = np.sort(whole)
    kept = cupy.asarray(x)
    for got in (distsort.sort(cupy.asarray(x), overwrite_input=True), distsort.sort(kept),
                distsort.sort(x, backend="gpu")):
        np.testing.assert_array_equal(np.concatenate(COMM.allgather(cupy.asnumpy(got))), ref)
    assert bool((kept == cupy.asarray(x)).all())
    values = np.arange(n, dtype=np.int64) + (COMM.exscan(n) or 0)
    keys, got = distsort.sort_pairs(cupy.asarray(x), cupy.asarray(values), stable=True,
                                    overwrite_input=True)
    order = np.argsort(whole, kind="stable")
    np.testing.assert_array_equal(np.concatenate(COMM.allgather(cupy.asnumpy(got))), order)
    np.testing.assert_array_equal(np.concatenate(COMM.allgather(cupy.asnumpy(keys))),
                                  whole[order])


@pytest.mark.parametrize("kind", ["datetime64[ms]", "timedelta64[s]", "bool"])
@pytest.mark.parametrize("budget", [None, "1MiB"])  # in memory, out of core
def test_gpu_bool_and_time_keys_in_numpys_order(kind, budget):
    """NumPy datetime and timedelta keys sorted on the GPU (as stand-ins: CuPy has no such
    dtypes) come back as NumPy arrays of their dtype; bool keys on the device stay there."""
    import cupy

    x = bool_or_time_keys(kind, 300_000)
    data = everything(x.astype(x.dtype.newbyteorder("=")))
    positions = np.arange(len(x)) + (COMM.exscan(len(x)) or 0)
    given = cupy.asarray(x) if kind == "bool" else x
    for descending in (False, True):
        order = bool_or_time_order(data, descending)
        got = distsort.sort(given, descending=descending, backend="gpu", device_memory=budget)
        assert got.dtype == x.dtype and isinstance(got, type(given))
        host = cupy.asnumpy(got) if kind == "bool" else got
        assert everything(host.astype(data.dtype)).tobytes() == data[order].tobytes()
        perm = distsort.argsort(given, descending=descending, backend="gpu", device_memory=budget)
        np.testing.assert_array_equal(everything(cupy.asnumpy(perm)), order)
        alongside = cupy.asarray(positions) if kind == "bool" else positions
        _, values = distsort.sort_pairs(given, alongside, stable=True, descending=descending,
                                        backend="gpu", device_memory=budget)
        np.testing.assert_array_equal(everything(cupy.asnumpy(values)), order)


@pytest.mark.parametrize("kind", ["datetime64[ns]", "bool"])
def test_the_default_job_generates_sorts_and_checks_bool_and_time_keys_on_gpus(kind):
    """`python -m distsort --dtype datetime64[ns]` (NumPy keys: CuPy has no such dtype) and
    `--dtype bool` (CuPy keys) end with the check's OK (run_job's return 0)."""
    from distsort.cli import parser

    args = parser().parse_args(["--count", "200000", "--dtype", kind, "--dist", "specials",
                                "--backend", "gpu", "--quiet"])
    assert args.func(args, COMM) == 0


@pytest.mark.parametrize("order", [None, ["t", "b"], ["s", "u"]])
@pytest.mark.parametrize("budget", [None, "1MiB"])  # in memory, out of core
def test_gpu_structured_keys_sort_as_numpy_sorts_them(order, budget):
    """Structured rows (NumPy: CuPy has no such dtype) sorted on the GPUs by their fields, as
    byte records behind their fields' key: numpy.sort's stable order, NaN and NaT last."""
    rows = structured_rows(200_000 + 999 * COMM.Get_rank(), [COMM.Get_rank(), 9])
    everyone = np.concatenate(COMM.allgather(rows))
    want = np.argsort(everyone, order=order, kind="stable")
    got = distsort.sort(rows, order=order, backend="gpu", device_memory=budget)
    assert everything(got).tobytes() == everyone[want].tobytes()
    positions = distsort.argsort(rows, order=order, backend="gpu", device_memory=budget)
    np.testing.assert_array_equal(everything(positions), want)


@pytest.mark.parametrize("kind", ["S", "U", "V"])
@pytest.mark.parametrize("budget", [None, "1MiB"])  # in memory, out of core
def test_gpu_bytes_and_strings_sort_as_numpy_sorts_them(kind, budget):
    """Bytes, unicode strings and raw void keys (NumPy arrays: CuPy has no such dtypes) sorted
    on the GPUs as one field each, stably, both ways."""
    keys = string_keys(kind, 100_000 + 999 * COMM.Get_rank(), COMM.Get_rank())
    everyone = np.concatenate(COMM.allgather(keys.astype(keys.dtype.newbyteorder("="))))
    want = np.argsort(everyone, kind="stable")
    got = distsort.sort(keys, backend="gpu", device_memory=budget)
    assert got.dtype == keys.dtype and everything(got).tobytes() == everyone[want].tobytes()
    positions = distsort.argsort(keys, backend="gpu", device_memory=budget, descending=True)
    rank = np.searchsorted(np.unique(everyone), everyone)
    np.testing.assert_array_equal(everything(positions),
                                  np.lexsort((np.arange(len(everyone)), -rank)))


@pytest.mark.parametrize("on_device", [False, True])
@pytest.mark.parametrize("budget", [None, "1MiB"])  # in memory, out of core
def test_gpu_complex_keys_sort_as_numpy_sorts_them(on_device, budget):
    """Complex keys (NaN parts last, as NumPy puts them) sorted on the GPUs as rows of one
    field, stably; CuPy keys' results come back as CuPy arrays."""
    import cupy

    keys = complex_keys(50_000 + 999 * COMM.Get_rank(), 2 * COMM.Get_rank())
    everyone = np.concatenate(COMM.allgather(keys))
    want = np.argsort(everyone, kind="stable")
    given = cupy.asarray(keys) if on_device else keys
    got = distsort.sort(given, backend="gpu", device_memory=budget)
    positions = distsort.argsort(given, backend="gpu", device_memory=budget)
    assert isinstance(got, cupy.ndarray) == on_device == isinstance(positions, cupy.ndarray)
    got, positions = cupy.asnumpy(got), cupy.asnumpy(positions)
    assert got.dtype == keys.dtype and everything(got).tobytes() == everyone[want].tobytes()
    np.testing.assert_array_equal(everything(positions), want)


@pytest.mark.parametrize("n", [1 << 16, 1 << 24])
def test_keys_made_on_gpu_0_by_every_rank_are_sorted_on_each_ranks_own_gpu(n):
    """Keys made before distsort chose the rank's GPU land on CuPy's default device, GPU 0, on
    every rank: each rank still sorts on its own GPU (its keys copied there) and gets its shard
    there, and the user's keys are left as they were."""
    import cupy

    own = distsort.bind_gpu(COMM)
    rng = np.random.default_rng([COMM.Get_rank(), n])
    host = rng.integers(0, 2**32, n, dtype=np.uint32)
    with cupy.cuda.Device(0):
        keys = cupy.asarray(host)
    shard = distsort.sort(keys)
    assert shard.device.id == own == cupy.cuda.Device().id
    assert keys.device.id == 0 and np.array_equal(cupy.asnumpy(keys), host)
    got = np.concatenate(COMM.allgather(cupy.asnumpy(shard)))
    np.testing.assert_array_equal(got, np.sort(np.concatenate(COMM.allgather(host))))


@pytest.mark.parametrize("dist", ["equal", "fewdistinct", "sorted"])
def test_gpu_pairs_stable_and_argsort(dist):
    import cupy

    n = 200_000
    x, positions = tie_heavy(dist, n)
    keys, values = distsort.sort_pairs(cupy.asarray(x), cupy.asarray(positions), stable=True)
    order = np.argsort(np.concatenate(COMM.allgather(x)), kind="stable")
    np.testing.assert_array_equal(np.concatenate(COMM.allgather(cupy.asnumpy(values))), order)
    perm = distsort.argsort(cupy.asarray(x))
    np.testing.assert_array_equal(np.concatenate(COMM.allgather(cupy.asnumpy(perm))), order)
    assert max(COMM.allgather(len(keys))) <= 1.05 * n


def assert_pairs_sorted_stably(keys: np.ndarray, values: np.ndarray) -> np.ndarray:
    """Sort this rank's pairs on the GPUs of every rank (stable=True); check that the shards,
    in rank order, are every rank's keys sorted with their values, equal keys in input order.
    Returns that order (of every rank's rows)."""
    import cupy

    out_k, out_v = distsort.sort_pairs(cupy.asarray(keys), cupy.asarray(values), stable=True)
    every_k, every_v = np.concatenate(COMM.allgather(keys)), np.concatenate(COMM.allgather(values))
    order = np.argsort(every_k, kind="stable")
    for got, want in ((out_k, every_k[order]), (out_v, every_v[order])):
        np.testing.assert_array_equal(np.concatenate(COMM.allgather(cupy.asnumpy(got))), want)
    return order


@pytest.mark.parametrize("kdtype, vdtype", [("uint32", "uint32"), ("int64", "float64"),
                                            ("uint32", "int64"), ("float32", "uint16")])
def test_gpu_pairs_finish_with_our_radix_pairs(kdtype, vdtype):
    """Enough rows on every rank (past MIN_N["pairs"]) that the finish sorts the pairs with our
    radix kernels, over the rank's key range and in the received buffers: values follow their
    keys, equal keys (half the keys are duplicate-heavy) in input order."""
    import cupy

    from distsort.local.radix import MIN_N

    rank = COMM.Get_rank()
    n = MIN_N["pairs"] + 2**18 + 777 * rank
    rng = np.random.default_rng([rank, 11])
    x = np.where(rng.random(n) < 0.5, rng.integers(0, 1000, n),
                 rng.integers(0, 2**31, n)).astype(kdtype)
    start = COMM.exscan(n) or 0
    values = ((np.arange(start, start + n) * 7919) % 60_000).astype(vdtype)
    order = assert_pairs_sorted_stably(x, values)
    if vdtype == "int64":
        perm = distsort.argsort(cupy.asarray(x))
        np.testing.assert_array_equal(np.concatenate(COMM.allgather(cupy.asnumpy(perm))), order)


@pytest.mark.parametrize("kind", ["datetime", "bytes", "str", "record"])
@pytest.mark.parametrize("on_device", [False, True])
def test_gpu_pairs_with_values_of_any_dtype(kind, on_device):
    """Values CuPy cannot hold travel as their bytes (payload.py) and come back as NumPy arrays
    of their dtype; 8-byte ones (datetime64) ride on the radix pair passes, past MIN_N."""
    import cupy

    from distsort.local.radix import MIN_N

    rank = COMM.Get_rank()
    n = MIN_N["pairs"] + 2**16 + 977 * rank
    x = np.random.default_rng([rank, 12]).integers(0, 5000, n).astype(np.uint32)
    start, total = COMM.exscan(n) or 0, COMM.allreduce(n)
    values = odd_values(kind, n, start)
    if kind == "str":
        values = values.astype(f"<U{len(str(total))}")
    keys, got = distsort.sort_pairs(cupy.asarray(x) if on_device else x, values, stable=True,
                                    backend="gpu")
    assert isinstance(got, np.ndarray) and got.dtype == values.dtype.newbyteorder("=")
    assert isinstance(keys, cupy.ndarray if on_device else np.ndarray)
    order = np.argsort(np.concatenate(COMM.allgather(x)), kind="stable")
    want = np.concatenate(COMM.allgather(values))[order]
    np.testing.assert_array_equal(np.concatenate(COMM.allgather(got)), want)


@pytest.mark.parametrize("size,key_size", [(100, 10), (12, 5), (7, 7), (16, 16), (3, 1)])
@pytest.mark.parametrize("descending", [False, True])
def test_gpu_records_in_memcmp_order(size, key_size, descending):
    """Whole records, stably in memcmp order of their keys (ties in input order), whatever
    words their rows move in."""
    import cupy

    rng = np.random.default_rng(COMM.Get_rank())
    records = rng.integers(0, 3, (50_000, size), dtype=np.uint8)
    out = distsort.sort_records(cupy.asarray(records), key_size, descending=descending)
    got = np.concatenate(COMM.allgather(cupy.asnumpy(out)))
    everyone = np.concatenate(COMM.allgather(records))
    keys = everyone[:, :key_size].astype(np.int16) * (-1 if descending else 1)
    order = np.lexsort([keys[:, i] for i in range(key_size - 1, -1, -1)])
    np.testing.assert_array_equal(got, everyone[order])


def test_gpu_records_where_the_first_rank_has_none():
    """A rank with no records sends nothing (its grouped send buffer is empty, not padded)."""
    import cupy

    n = 0 if COMM.Get_rank() == 0 else 20_000
    records = np.random.default_rng(COMM.Get_rank()).integers(0, 256, (n, 100), dtype=np.uint8)
    out = distsort.sort_records(cupy.asarray(records), 10)
    got = np.concatenate(COMM.allgather(cupy.asnumpy(out)))
    everyone = np.concatenate(COMM.allgather(records))
    order = np.lexsort([everyone[:, i] for i in range(9, -1, -1)])
    np.testing.assert_array_equal(got, everyone[order])


def test_gpu_records_large_enough_for_the_copy_engines_sort_stably():
    """Records whose exchange is large enough for every transport (the copy engines from 16 MiB
    sent): their key words go ahead and are ordered while the records travel, into one take."""
    import cupy

    n = 400_000 + 30_000 * COMM.Get_rank()  # 40 MB a rank, uneven
    records = np.random.default_rng(7 + COMM.Get_rank()).integers(0, 256, (n, 100), np.uint8)
    records[:, :10] //= 128  # 1024 distinct keys: long runs of ties, kept in input order
    out = distsort.sort_records(cupy.asarray(records), 10)
    got = np.concatenate(COMM.allgather(cupy.asnumpy(out)))
    everyone = np.concatenate(COMM.allgather(records))
    order = np.lexsort([everyone[:, i] for i in range(9, -1, -1)])
    np.testing.assert_array_equal(got, everyone[order])


@pytest.mark.parametrize("key_size", [1, 2, 3, 8, 10, 13, 24])
@pytest.mark.parametrize("descending", [False, True])
def test_gpu_record_key_words_match_numpy(key_size, descending):
    """The record word kernel (keys.cu) gives NumPy's words: big-endian, zero-padded."""
    import cupy

    from distsort.keys import record_key_words

    records = np.random.default_rng(key_size).integers(0, 256, (10_001, 29), dtype=np.uint8)
    want = record_key_words(records, key_size, np, descending)
    got = record_key_words(cupy.asarray(records), key_size, cupy, descending)
    assert [w.dtype for w in got] == [w.dtype for w in want]
    for g, w in zip(got, want):
        np.testing.assert_array_equal(cupy.asnumpy(g), w)


@pytest.mark.parametrize("shape,dtype", [((100,), "uint8"), ((3,), "uint8"), ((6,), "uint8"),
                                         ((2,), "float32"), ((), "int64"), ((2, 2), "int16"),
                                         ((64,), "uint8"), ((40,), "uint8"), ((9,), "float32"),
                                         ((33,), "uint8")])
@pytest.mark.parametrize("index", ["int64", "int32", "uint32", "uint64"])
def test_gpu_rows_are_taken_as_numpy_takes_them(shape, dtype, index):
    """Rows of every width (by the warp-a-row kernel from 32 bytes of whole words, else by
    CuPy), whatever the order's integer type."""
    import cupy

    from distsort.local.rows import take

    rng = np.random.default_rng(7)
    rows = rng.integers(0, 200, (5_003,) + shape).astype(dtype)
    order = rng.permutation(5_003)[:4_000].astype(index)
    got = take(cupy.asarray(rows), cupy.asarray(order))
    assert got.dtype == rows.dtype and got.shape == (4_000,) + shape
    np.testing.assert_array_equal(cupy.asnumpy(got), rows[order])
    strided = cupy.asarray(rows)[::2]  # not contiguous: indexed as it is
    np.testing.assert_array_equal(cupy.asnumpy(take(strided, cupy.arange(5))), rows[::2][:5])
    none = take(cupy.asarray(rows[:0]), cupy.asarray(order[:0]))  # no rows: no reshape fails
    assert none.dtype == rows.dtype and none.shape == (0,) + shape


@pytest.mark.parametrize("shape", [(100,), (64,), (40,), (9,), (300,)])
def test_gpu_rows_beyond_the_grid_are_taken_by_its_later_steps(monkeypatch, shape):
    """A grid of 3 blocks copies 5,003 rows in many steps (rows.cu's loop over the rows beyond
    the grid)."""
    import cupy

    from distsort.local import rows as rows_module

    monkeypatch.setattr(rows_module, "MAX_BLOCKS", 3)
    rng = np.random.default_rng(11)
    rows = rng.integers(0, 250, (5_003,) + shape).astype("uint8" if shape != (9,) else "int32")
    order = rng.integers(0, 5_003, 5_003)
    got = rows_module.take(cupy.asarray(rows), cupy.asarray(order))
    np.testing.assert_array_equal(cupy.asnumpy(got), rows[order])


@pytest.mark.parametrize("dtype", ["int8", "uint8", "int16", "uint16", "int32", "uint32",
                                   "int64", "uint64", "float16", "float32", "float64"])
@pytest.mark.parametrize("descending", [False, True])
@pytest.mark.parametrize("canonical", [False, True])
def test_gpu_codec_kernel_matches_the_numpy_transform(dtype, descending, canonical):
    import cupy

    from distsort.keys import NumericCodec

    dt = np.dtype(dtype)
    x = np.random.default_rng(3).integers(0, 256, 100_003 * dt.itemsize, dtype=np.uint8).view(dt)
    if dt.kind == "f":
        x[:6] = [np.inf, -np.inf, 0.0, -0.0, np.nan, -np.nan]
    codec = NumericCodec(dt, descending, canonical)
    merged, host_merged = cupy.zeros(1, np.uint32), np.zeros(1, np.uint32)
    codes = codec.encode(cupy.asarray(x), cupy, merged)
    np.testing.assert_array_equal(cupy.asnumpy(codes), codec.encode(x, np, host_merged))
    back = cupy.asnumpy(codec.decode(codes, cupy))
    assert back.tobytes() == codec.decode(codec.encode(x, np), np).tobytes()
    assert int(merged[0]) == host_merged[0] == int(canonical and dt.kind == "f")
    if dt.kind == "f":  # the specials out: nothing merged
        merged[0] = 0
        codec.encode(cupy.asarray(np.abs(np.nan_to_num(x[6:], nan=1.0))), cupy, merged)
        assert int(merged[0]) == 0


@pytest.mark.parametrize("dtype", ["uint8", "uint16", "uint32", "uint64"])
@pytest.mark.parametrize("n", [1000, 2**20 + 3])
def test_device_sample_draw_picks_the_host_draws_rows(dtype, n):
    """One kernel (sample.cu) draws the same (key, global position) rows as the vector
    operations on the host, for the same seed and rank."""
    import cupy

    from distsort.backend import Backend
    from distsort.steps.sample import local_sample

    class Gpu:
        name, xp = "gpu", cupy

    keys = np.random.default_rng(n).integers(0, 2**63, n).astype(dtype)
    counts = [n, 3 * n, n // 2]
    for rank, seed in ((0, 0), (2, 5)):
        mine = keys[: counts[rank]]
        want = local_sample([mine], counts, rank, Backend(), seed=seed, per_bucket=300)
        got = local_sample([cupy.asarray(mine)], counts, rank, Gpu(), seed=seed, per_bucket=300)
        assert 0 < len(want) < len(mine)
        np.testing.assert_array_equal(cupy.asnumpy(got), want)


def split(monkeypatch) -> None:
    """Ranks that share one GPU sort as on GPUs of their own (steps/fold.py): the sample
    sort's partition and exchange, which the tests that call this look into."""
    monkeypatch.setenv("DISTSORT_SHARED_GPU", "split")


def force_chunks(monkeypatch, chunks: int) -> None:
    """The overlapped partition and exchange in `chunks` chunks, of a partition tile or more."""
    from distsort.local.partition import TILE
    from distsort.steps import chunks as plan

    split(monkeypatch)
    monkeypatch.setattr(plan, "CHUNKS", chunks)
    monkeypatch.setattr(plan, "DIGIT_CHUNKS", chunks)
    monkeypatch.setattr(plan, "MIN_CHUNK", TILE)


def force_landing(monkeypatch, chunks: int, digits: bool) -> tuple[list, list]:
    """The landing finish (and ByDigit senders, if digits) at small sizes, in `chunks` chunks;
    returns lists that get an entry per landing finish run and per ByDigit scatter."""
    from distsort.local import landing
    from distsort.steps import chunks as plan
    from distsort.steps import partition

    force_chunks(monkeypatch, chunks)
    monkeypatch.setattr(landing, "MIN_ROWS", 1)
    if not digits:
        monkeypatch.setattr(partition, "digit_bits", lambda *args: 0)
    finished = []
    real_finish = landing.LandingSort.finish
    monkeypatch.setattr(landing.LandingSort, "finish",
                        lambda self, k, s: finished.append(1) or real_finish(self, k, s))
    by_digit, real_scatter = [], plan.ByDigit.scatter
    monkeypatch.setattr(plan.ByDigit, "scatter",
                        lambda self, *a: by_digit.append(1) or real_scatter(self, *a))
    return finished, by_digit


def landing_keys(dtype: str, spread: str) -> np.ndarray:
    """This rank's keys for the landing tests: a few partition tiles, more on later ranks, over
    the whole range, a narrow one (fewer passes) or skewed (unequal blocks)."""
    from distsort.local.partition import TILE

    rank, dt = COMM.Get_rank(), np.dtype(dtype)
    n = TILE * (3 + rank) + 77 * rank
    rng = np.random.default_rng([rank, 11])
    raw = rng.integers(0, 256, n * dt.itemsize, dtype=np.uint8).view(dt)
    if spread == "narrow":
        with np.errstate(invalid="ignore"):  # NaN's remainder is NaN, which nan_to_num replaces
            raw = (raw % 5000 + 77).astype(dt)
    elif spread == "skewed":
        raw = np.where(rng.random(n) < 0.8, raw[0], raw).astype(dt)
    return np.nan_to_num(raw, nan=1.5) if dt.kind == "f" else raw


def assert_landed(finished: list, by_digit: list, digits: bool) -> None:
    """Some rank ran the landing finish, and the senders sorted by digit or not, as forced."""
    if COMM.Get_size() > 1:  # a rank whose keys are all one value has nothing to land
        assert COMM.allreduce(len(finished)) > 0, "no rank ran the landing finish"
        assert (COMM.allreduce(len(by_digit)) > 0) == digits, "senders sorted by digit or not"


@pytest.mark.parametrize("dtype", ["uint32", "uint64", "float32", "int64"])
@pytest.mark.parametrize("chunks", [1, 3])
@pytest.mark.parametrize("spread", ["uniform", "narrow", "skewed"])
@pytest.mark.parametrize("digits", [True, False])
def test_landing_finish_sorts_globally(monkeypatch, dtype, chunks, spread, digits):
    """The finish whose first radix pass runs as the chunks land (local/landing.py), or by
    the senders (digits: chunks.ByDigit), forced at small sizes: unequal shards, several
    chunks, keys over the whole range, a narrow one (fewer passes) and a skewed one (unequal
    blocks)."""
    import cupy

    finished, by_digit = force_landing(monkeypatch, chunks, digits)
    raw = landing_keys(dtype, spread)
    report = SortReport()
    out = distsort.sort(cupy.asarray(raw), report=report)
    everyone = np.concatenate(COMM.allgather(raw))
    got = np.concatenate(COMM.allgather(cupy.asnumpy(out)))
    np.testing.assert_array_equal(got, np.sort(everyone))
    assert_landed(finished, by_digit, digits)
    if COMM.Get_size() > 1:
        assert report.as_dict()["transfer_seconds"] > 0  # the NCCL transfers were timed


@pytest.mark.parametrize("dtype", ["uint32", "uint64", "int64"])
@pytest.mark.parametrize("chunks", [1, 3])
@pytest.mark.parametrize("spread", ["uniform", "narrow", "skewed"])
@pytest.mark.parametrize("vdtype", ["float32", "int64"])
def test_landing_finish_sorts_pairs_globally(monkeypatch, dtype, chunks, spread, vdtype):
    """Pairs through the ByDigit senders and the landing finish, values moved by the passes
    out of the receive buffers: values follow their keys, equal keys in input order. (Float
    keys sorted stably carry their original bits as a third column: rows the passes do not
    move whole, so they take the finish after the exchange.)"""
    finished, by_digit = force_landing(monkeypatch, chunks, True)
    keys = landing_keys(dtype, spread)
    start = COMM.exscan(len(keys)) or 0
    values = np.arange(start, start + len(keys)).astype(vdtype)  # exact in float32 here
    assert_pairs_sorted_stably(keys, values)
    assert_landed(finished, by_digit, True)


@pytest.mark.parametrize("chunks", [1, 3])
@pytest.mark.parametrize("with_values", [False, True])
def test_chunked_exchange_keeps_order_and_stability(monkeypatch, chunks, with_values):
    """Many small chunks, a different number on every rank (unequal shards), ties across chunk
    and rank borders: the result is the global stable order."""
    import cupy

    from distsort.local.partition import TILE

    force_chunks(monkeypatch, chunks)
    rank = COMM.Get_rank()
    n = TILE * (2 + 2 * rank) + 123 * rank
    x = np.random.default_rng([rank, 3]).integers(0, 40, n).astype(np.uint32)
    start = COMM.exscan(n) or 0
    positions = np.arange(start, start + n, dtype=np.int64)
    order = np.argsort(np.concatenate(COMM.allgather(x)), kind="stable")
    if with_values:
        keys, values = distsort.sort_pairs(cupy.asarray(x), cupy.asarray(positions), stable=True)
        got = np.concatenate(COMM.allgather(cupy.asnumpy(values)))
        np.testing.assert_array_equal(got, order)
    else:
        keys = distsort.sort(cupy.asarray(x))
    everyone = np.concatenate(COMM.allgather(x))
    np.testing.assert_array_equal(np.concatenate(COMM.allgather(cupy.asnumpy(keys))),
                                  everyone[order])


@pytest.fixture(scope="module")
def ipc_transport():
    """The copy-engine transport of this communicator (host memory and MPI beside it for small
    calls; NCCL where that is the runtime's transport), or a skip where CUDA IPC does not work
    between the ranks."""
    from distsort.runtime import get_runtime
    from distsort.transport import ipc

    transport = get_runtime(COMM, "gpu").transport  # ipc by default, where it works
    if transport.name != "ipc":
        transport = ipc.connect(COMM, transport)
    if transport.name != "ipc":
        pytest.skip("CUDA IPC does not work between these ranks")
    return transport


def test_ipc_release_gives_back_the_memory_the_peers_mapped(monkeypatch, ipc_transport):
    """After a sort over the copy engines, distsort.release() and freeing CuPy's pool leave
    every GPU with as much free memory as before the sort (a mapping held by another rank
    keeps the memory it maps allocated), and the next sort maps again and sorts."""
    import cupy

    from distsort.runtime import get_runtime

    if COMM.Get_size() == 1:
        pytest.skip("one rank maps no other rank's memory")
    split(monkeypatch)
    monkeypatch.setenv("DISTSORT_IPC_MIN_BYTES", "0")
    monkeypatch.setattr(get_runtime(COMM, "gpu"), "transport", ipc_transport)
    pool, rows = cupy.get_default_memory_pool(), 1 << 25  # a 128 MiB receive buffer a rank

    def sort_and_free() -> float:
        rng = np.random.default_rng(COMM.Get_rank())
        keys = cupy.asarray(rng.integers(0, 2**32, rows, dtype=np.uint32))
        out = distsort.sort(keys)
        ordered = bool((out[1:] >= out[:-1]).all())
        del keys, out
        distsort.release(COMM)
        pool.free_all_blocks()
        cupy.cuda.Device().synchronize()
        COMM.Barrier()
        assert ordered
        return cupy.cuda.runtime.memGetInfo()[0]

    before = sort_and_free()  # kernels loaded, NCCL's buffers made: only the sort's memory moves
    calls = ipc_transport.calls
    after = sort_and_free()
    assert ipc_transport.calls > calls, "no exchange went by the copy engines"
    assert not ipc_transport.mapped
    assert after >= before - (16 << 20), f"{(before - after) / 2**20:.0f} MiB not given back"


def test_ipc_sorts_of_growing_sizes_keep_two_receive_buffers_at_most(monkeypatch, ipc_transport):
    """Sorts of ever larger shards, their outputs dropped: once CuPy's pool is freed, the
    peers' mappings keep at most about two receive buffers allocated on a GPU (the last and
    the one before it), not one for every sort, and release() gives back those."""
    import cupy

    from distsort.runtime import get_runtime

    if COMM.Get_size() == 1:
        pytest.skip("one rank maps no other rank's memory")
    split(monkeypatch)
    monkeypatch.setenv("DISTSORT_IPC_MIN_BYTES", "0")
    monkeypatch.setattr(get_runtime(COMM, "gpu"), "transport", ipc_transport)
    pool, rng = cupy.get_default_memory_pool(), np.random.default_rng(COMM.Get_rank())

    def free() -> int:
        pool.free_all_blocks()
        cupy.cuda.Device().synchronize()
        COMM.Barrier()
        return cupy.cuda.runtime.memGetInfo()[0]

    distsort.sort(cupy.asarray(rng.integers(0, 2**32, 1 << 20, dtype=np.uint32)))
    distsort.release(COMM)
    before, rows = free(), [k << 22 for k in range(4, 11)]  # 64 to 160 MiB a rank
    for n in rows:
        out = distsort.sort(cupy.asarray(rng.integers(0, 2**32, n, dtype=np.uint32)))
        assert bool((out[1:] >= out[:-1]).all())
        del out
    held = before - free()  # by every rank on this GPU (ranks may share it)
    last = 4 * rows[-1] * 65 // 64  # a receive buffer: the shard and its 1/64 spare
    sharers = get_runtime(COMM, "gpu").sharers
    assert held <= sharers * (2 * last + (16 << 20)), f"{held / 2**20:.0f} MiB held after the sorts"
    distsort.release(COMM)
    assert free() >= before - (16 << 20)


@pytest.mark.parametrize("align", [1, 1024])
@pytest.mark.parametrize("given_outs", [False, True])
def test_ipc_transport_moves_what_its_small_transport_moves(monkeypatch, ipc_transport, align,
                                                            given_outs):
    """Copies into the receivers' buffers deliver every block where the transport of its small
    calls does: keys, 8-byte
    values and 3-byte records, unequal blocks (some empty), blocks placed with gaps, buffers
    given or made; and twice in a row (mappings reused)."""
    import cupy

    from distsort.transport import aligned_displacements

    monkeypatch.setenv("DISTSORT_IPC_MIN_BYTES", "0")
    rank, size, small = COMM.Get_rank(), COMM.Get_size(), ipc_transport.small
    matrix = np.random.default_rng(size).integers(0, 5000, (size, size))
    matrix[0, -1] = 0  # one empty block
    send, recv = matrix[rank], matrix[:, rank]
    rng = np.random.default_rng([rank, 9])
    n = int(send.sum())
    columns = [cupy.asarray(rng.integers(0, 2**32, n, dtype=np.uint32)),
               cupy.asarray(rng.integers(-2**62, 2**62, n, dtype=np.int64)),
               cupy.asarray(rng.integers(0, 256, (n, 3), dtype=np.uint8))]
    sdispl, rdispl = aligned_displacements(send, 1), aligned_displacements(recv, align)
    rows = int(rdispl[-1] + recv[-1])

    def outs():
        return [cupy.zeros((rows,) + c.shape[1:], c.dtype) for c in columns] if given_outs else None

    want = small.alltoallv(columns, send, recv, sdispl, rdispl, outs())
    for _ in range(2):
        got = ipc_transport.alltoallv(columns, send, recv, sdispl, rdispl, outs())
        for g, w in zip(got, want):
            for start, count in zip(rdispl, recv):
                np.testing.assert_array_equal(cupy.asnumpy(g[start : start + count]),
                                              cupy.asnumpy(w[start : start + count]))


@pytest.mark.parametrize("digits, with_values", [(True, False), (False, False), (True, True)])
def test_sorts_over_the_ipc_transport(monkeypatch, ipc_transport, digits, with_values):
    """The chunked exchange with its landing finish over the copy engines: the global order,
    values with their keys (pairs land presorted only: by the senders' digit)."""
    import cupy

    from distsort.runtime import get_runtime

    monkeypatch.setenv("DISTSORT_IPC_MIN_BYTES", "0")
    monkeypatch.setattr(get_runtime(COMM, "gpu"), "transport", ipc_transport)
    finished, by_digit = force_landing(monkeypatch, 3, digits)
    keys, calls = landing_keys("uint32", "uniform"), ipc_transport.calls
    if with_values:
        start = COMM.exscan(len(keys)) or 0
        assert_pairs_sorted_stably(keys, np.arange(start, start + len(keys), dtype=np.int64))
    else:
        out = distsort.sort(cupy.asarray(keys))
        np.testing.assert_array_equal(np.concatenate(COMM.allgather(cupy.asnumpy(out))),
                                      np.sort(np.concatenate(COMM.allgather(keys))))
    assert_landed(finished, by_digit, digits)
    if COMM.Get_size() > 1:
        assert ipc_transport.calls > calls, "no exchange went by the copy engines"


@pytest.mark.parametrize("align", [1, 1024])
def test_staged_transport_writes_the_blocks_and_nothing_else(align):
    """Through host memory (ranks that share a GPU, small calls): every block where MPI puts it,
    and no other row of a given buffer (a chunked exchange fills one buffer call by call):
    keys and 3-byte records, unequal and empty blocks, gaps on both sides."""
    import cupy

    from distsort.transport import aligned_displacements
    from distsort.transport.mpi import MpiTransport
    from distsort.transport.staged import StagedTransport

    rank, size = COMM.Get_rank(), COMM.Get_size()
    matrix = np.random.default_rng(size).integers(0, 5000, (size, size))
    matrix[0, -1] = 0  # one empty block
    send, recv = matrix[rank], matrix[:, rank]
    sdispl, rdispl = aligned_displacements(send, 7), aligned_displacements(recv, align)
    rng = np.random.default_rng([rank, 10])
    rows_in, rows_out = int(sdispl[-1] + send[-1]), int(rdispl[-1] + recv[-1])
    columns = [rng.integers(0, 2**32, rows_in, dtype=np.uint32),
               rng.integers(0, 256, (rows_in, 3), dtype=np.uint8)]

    def filled(xp, c):
        return xp.full((rows_out,) + c.shape[1:], 7, c.dtype)

    want = MpiTransport(COMM).alltoallv(columns, send, recv, sdispl, rdispl,
                                        [filled(np, c) for c in columns])
    got = StagedTransport(COMM).alltoallv([cupy.asarray(c) for c in columns], send, recv,
                                          sdispl, rdispl, [filled(cupy, c) for c in columns])
    for g, w in zip(got, want):
        np.testing.assert_array_equal(cupy.asnumpy(g), w)
