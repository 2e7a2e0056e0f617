"""The distributed sort against NumPy, run under MPI (pytest-mpi): every dtype and distribution,
both orders, stable and not, key-value, argsort, records, balance, large-message exchange.

Run as `mpiexec -n P python -m pytest --with-mpi tests/job/test_sort_mpi.py` for P = 1..4.
"""

from __future__ import annotations

import numpy as np
import pytest
from helpers import (
    assert_balanced,
    bool_or_time_keys,
    bool_or_time_order,
    everything,
    local_data,
    odd_values,
    reference,
    reference_order,
)
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import distsort
from distsort.errors import RemoteError
from distsort.transport.mpi import MpiTransport

MPI = pytest.importorskip("mpi4py.MPI")
COMM = MPI.COMM_WORLD
DTYPES = ["int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64",
          "float16", "float32", "float64"]
DISTS = ["uniform", "normal", "zipf", "equal", "fewdistinct", "sorted", "reverse", "specials"]

pytestmark = pytest.mark.mpi


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("dist", DISTS)
def test_sort_matches_numpy(dtype, dist):
    x = local_data(dist, dtype, 3000 + 17 * COMM.Get_rank(), seed=1)
    for descending in (False, True):
        shard = distsort.sort(x, descending=descending)
        np.testing.assert_array_equal(everything(shard), reference(everything(x), descending))
        assert shard.dtype == x.dtype
        assert_balanced(shard, len(everything(x)))


@pytest.mark.parametrize("dtype", ["uint32", "int16", "float64", "uint64"])
@pytest.mark.parametrize("dist", ["uniform", "sorted", "specials"])
def test_a_sort_that_may_overwrite_its_input_sorts_as_numpy(dtype, dist):
    """overwrite_input: the keys' (and values') memory is the sort's; the result is the same,
    ascending and descending, stable pairs too (at one rank the engine sorts them in place)."""
    x = local_data(dist, dtype, 3000 + 17 * COMM.Get_rank(), seed=21)
    whole = everything(x)
    for descending in (False, True):
        shard = distsort.sort(x.copy(), descending=descending, overwrite_input=True)
        np.testing.assert_array_equal(everything(shard), reference(whole, descending))
    values = np.arange(len(x), dtype=np.int64) + (COMM.exscan(len(x)) or 0)
    keys, got = distsort.sort_pairs(x.copy(), values.copy(), stable=True, overwrite_input=True)
    order = reference_order(whole, False)
    np.testing.assert_array_equal(everything(keys), whole[order])
    np.testing.assert_array_equal(everything(got), everything(values)[order])


def test_release_between_sorts_keeps_them_right():
    """distsort.release() is collective on every backend (on CPUs it has nothing to give back),
    and sorts before and after it are right."""
    x = local_data("uniform", "uint32", 2000 + 13 * COMM.Get_rank(), seed=4)
    for _ in range(2):
        shard = distsort.sort(x)
        distsort.release()
        np.testing.assert_array_equal(everything(shard), reference(everything(x), False))


def test_bind_gpu_without_a_gpu_stops_every_rank_with_one_message(monkeypatch):
    """distsort.bind_gpu() where a rank has no GPU: the lowest such rank says so, every other
    rank raises RemoteError, none waits."""
    from distsort import runtime
    from distsort.errors import RemoteError

    failing = min(1, COMM.Get_size() - 1)  # rank 1 lacks a GPU (rank 0 where it is alone)
    monkeypatch.setattr(runtime, "gpu_count", lambda: 0 if COMM.Get_rank() == failing else 2)
    with pytest.raises(distsort.DistsortError) as raised:
        distsort.bind_gpu(COMM)
    if COMM.Get_rank() == failing:
        assert "no CUDA GPU for this rank" in str(raised.value)
        assert not isinstance(raised.value, RemoteError)
    else:
        assert isinstance(raised.value, RemoteError)


@pytest.mark.parametrize("dtype", ["int32", "float32", "float64", "uint64"])
@pytest.mark.parametrize("dist", ["equal", "fewdistinct", "specials", "zipf"])
def test_stable_sort_and_argsort_keep_input_order(dtype, dist):
    x = local_data(dist, dtype, 2500, seed=2)
    data = everything(x)
    for descending in (False, True):
        order = reference_order(data, descending)
        got = everything(distsort.argsort(x, descending=descending))
        np.testing.assert_array_equal(got, order)
        positions = np.arange(len(x)) + (COMM.exscan(len(x)) or 0)
        keys, values = distsort.sort_pairs(x, positions, stable=True, descending=descending)
        np.testing.assert_array_equal(everything(values), order)
        assert everything(keys).tobytes() == data[order].tobytes()  # -0.0 and NaN bits kept


@pytest.mark.parametrize("kind", ["datetime64[ms]", "timedelta64[s]", "bool"])
@pytest.mark.parametrize("budget", [None, "4KiB"])  # in memory, out of core
def test_bool_and_time_keys_in_numpys_order(kind, budget):
    """bool, datetime64 and timedelta64 keys sort as NumPy orders them (NaT last in both
    orders), come back in the dtype each rank passed, and argsort and stable pairs keep ties
    in input order."""
    x = bool_or_time_keys(kind, 3000)
    data = everything(x.astype(x.dtype.newbyteorder("=")))
    positions = np.arange(len(x)) + (COMM.exscan(len(x)) or 0)
    for descending in (False, True):
        order = bool_or_time_order(data, descending)
        got = distsort.sort(x, descending=descending, device_memory=budget)
        assert got.dtype == x.dtype
        assert everything(got.astype(data.dtype)).tobytes() == data[order].tobytes()
        perm = distsort.argsort(x, descending=descending, device_memory=budget)
        np.testing.assert_array_equal(everything(perm), order)
        keys, values = distsort.sort_pairs(x, positions, stable=True, descending=descending,
                                           device_memory=budget)
        np.testing.assert_array_equal(everything(values), order)


def test_time_keys_land_in_the_callers_out_array():
    x = bool_or_time_keys("datetime64[us]", 2000).astype("datetime64[us]")
    out = np.empty(distsort.shard_capacity(COMM.allreduce(len(x)), COMM.Get_size()), x.dtype)
    for budget in (None, "4KiB"):
        got = distsort.sort(x, descending=True, device_memory=budget, out=out)
        assert np.shares_memory(got, out) and got.dtype == x.dtype
        order = bool_or_time_order(everything(x), True)
        assert everything(got).tobytes() == everything(x)[order].tobytes()


@pytest.mark.parametrize("sizes", [(0,), (1,), (0, 5), (5, 0), (1, 0, 2), (0, 0, 0, 9)])
def test_tiny_and_empty_ranks(sizes):
    n = sizes[COMM.Get_rank() % len(sizes)]
    x = np.arange(n, dtype=np.int32)[::-1] * (COMM.Get_rank() + 1)
    shard = distsort.sort(x)
    np.testing.assert_array_equal(everything(shard), np.sort(everything(x)))


def test_report_counts_bytes_and_times_no_device_transfers_on_cpus():
    """The report's exchange bytes leave out a rank's own rows; on CPUs (MPI transport) no
    device transfer is timed."""
    from distsort.report import SortReport

    x = np.arange(1000 * (COMM.Get_rank() + 1), dtype=np.uint32)[::-1].copy()
    report = SortReport()
    shard = distsort.sort(x, backend="cpu", report=report)
    got = report.as_dict()
    assert got["transfer_seconds"] is None
    assert got["count_out"] == len(shard)
    assert COMM.allreduce(got["bytes_sent"]) == COMM.allreduce(got["bytes_received"])
    if COMM.Get_size() == 1:
        assert got["bytes_sent"] == 0


@pytest.mark.parametrize("dist", DISTS)
def test_balance_on_the_sampled_path(dist):
    """Large enough that splitters come from a random sample, not from every key."""
    x = local_data(dist, "int64", 100_000 * (1 - COMM.Get_rank() % 2), seed=3)  # odd ranks empty
    shard = distsort.sort(x, backend="cpu")
    assert_balanced(shard, len(everything(x)))
    np.testing.assert_array_equal(everything(shard), np.sort(everything(x)))


def test_sampled_path_is_taken(monkeypatch):
    from distsort.steps import sample

    monkeypatch.setattr(sample, "samples_per_bucket", lambda p: 50)
    x = local_data("uniform", "uint32", 5000, seed=4)
    shard = distsort.sort(x)
    np.testing.assert_array_equal(everything(shard), np.sort(everything(x)))


def test_pairs_with_record_values():
    x = local_data("fewdistinct", "uint16", 1500, seed=5)
    rows = np.random.default_rng(COMM.Get_rank()).integers(0, 256, (len(x), 24), dtype=np.uint8)
    rows[:, :2] = x.view(np.uint8).reshape(-1, 2)  # each row carries its key: check they travel
    keys, values = distsort.sort_pairs(x, rows, stable=True)
    np.testing.assert_array_equal(values[:, :2].copy().view(np.uint16).ravel(), keys)
    order = np.argsort(everything(x), kind="stable")
    np.testing.assert_array_equal(everything(values), everything(rows)[order])


@pytest.mark.parametrize("kind", ["datetime", "bytes", "str", "record"])
def test_pairs_with_values_of_any_dtype(kind):
    x = local_data("fewdistinct", "int32", 1200 + 31 * COMM.Get_rank(), seed=14)
    start, total = COMM.exscan(len(x)) or 0, COMM.allreduce(len(x))
    values = odd_values(kind, len(x), start)
    if kind == "str":  # every rank must pass one dtype: the widest any rank needs
        values = values.astype(f"<U{len(str(total))}")
    keys, got = distsort.sort_pairs(x, values, stable=True)
    native = values.dtype.newbyteorder("=")  # the record's big-endian field comes back native
    assert got.dtype == native
    order = np.argsort(everything(x), kind="stable")
    np.testing.assert_array_equal(everything(got), everything(values)[order])
    out = (np.empty(distsort.shard_capacity(total, COMM.Get_size()), x.dtype),
           np.empty(distsort.shard_capacity(total, COMM.Get_size()), native))
    keys2, got2 = distsort.sort_pairs(x, values, stable=True, out=out)
    assert np.shares_memory(got2, out[1]) and got2.dtype == native
    assert got2.tobytes() == got.tobytes() and keys2.tobytes() == keys.tobytes()


def test_object_values_are_one_clear_error():
    x = np.arange(10, dtype=np.int32)
    values = np.array([str(i) for i in x], dtype=object)
    with pytest.raises(distsort.DistsortError) as raised:  # one rank says why, all raise
        distsort.sort_pairs(x, values)
    own = COMM.allgather(not isinstance(raised.value, RemoteError))
    assert own == [True] + [False] * (COMM.Get_size() - 1)  # the others carry its words
    assert "Python objects" in str(raised.value)


@pytest.mark.parametrize("key_size", [1, 4, 10, 13])
@pytest.mark.parametrize("descending", [False, True])
def test_records_in_memcmp_order(key_size, descending):
    rng = np.random.default_rng([6, COMM.Get_rank()])
    records = rng.integers(0, 4, (700, 20), dtype=np.uint8)  # few byte values: many ties
    out = distsort.sort_records(records, key_size, descending=descending)
    everyone = everything(records)
    keys = sorted(bytes(r[:key_size]) for r in everyone)
    got = everything(out)
    assert [bytes(r[:key_size]) for r in got] == (keys[::-1] if descending else keys)
    assert sorted(map(bytes, got)) == sorted(map(bytes, everyone))  # a permutation


def test_mpi_exchange_in_rounds_matches_one_call():
    """Force the chunked path that large (> 2 GiB) messages take."""
    p, rank = COMM.Get_size(), COMM.Get_rank()
    rng = np.random.default_rng(rank)
    send_counts = rng.integers(0, 50, p).astype(np.int64)
    rows = rng.integers(0, 2**31, (int(send_counts.sum()), 3)).astype(np.int64)
    recv_counts = np.empty_like(send_counts)
    COMM.Alltoall(send_counts, recv_counts)
    one, = MpiTransport(COMM).alltoallv([rows], send_counts, recv_counts)
    rounds, = MpiTransport(COMM, chunk_bytes=40).alltoallv([rows], send_counts, recv_counts)
    np.testing.assert_array_equal(one, rounds)
    sources = np.repeat(np.arange(p), recv_counts)
    firsts = COMM.allgather(rows)
    for src in range(p):
        start = int(COMM.allgather(send_counts)[src][:rank].sum())
        expect = firsts[src][start : start + recv_counts[src]]
        np.testing.assert_array_equal(one[sources == src], expect)


@settings(max_examples=40, deadline=None, derandomize=True, database=None,
          suppress_health_check=list(HealthCheck))
@given(
    dtype=st.sampled_from(DTYPES),
    sizes=st.lists(st.integers(0, 300), min_size=4, max_size=4),
    distinct=st.integers(1, 1000),
    descending=st.booleans(),
    stable=st.booleans(),
    seed=st.integers(0, 2**16),
)
def test_property_sort_is_numpy_sort(dtype, sizes, distinct, descending, stable, seed):
    """Same examples on every rank (derandomized), so collectives stay in step."""
    n = sizes[COMM.Get_rank() % 4]
    rng = np.random.default_rng([seed, COMM.Get_rank()])
    x = rng.integers(0, distinct, n).astype(dtype)
    if np.dtype(dtype).kind == "f" and n:  # NaN, +-inf and -0.0 among the values
        special = rng.choice(np.array([np.nan, np.inf, -np.inf, -0.0], dtype), n)
        x = np.where(rng.random(n) < 0.2, special, x)
    shard = distsort.sort(x, descending=descending, stable=stable)
    ok = np.array_equal(everything(shard), reference(everything(x), descending), equal_nan=True)
    assert all(COMM.allgather(ok))


@pytest.mark.parametrize("chunk", [None, 64])
def test_aligned_blocks_leave_gaps_that_the_finish_closes(monkeypatch, chunk):
    """GPUs place each block at an aligned row (NCCL is faster so); here the MPI transport is
    made to do the same, so the gap handling runs on CPUs too, in one call and in rounds."""
    monkeypatch.setattr(MpiTransport, "align_rows", 7)
    monkeypatch.setattr("distsort.transport.cma.connect", lambda comm: None)  # MPI, not cma.py
    if chunk:
        monkeypatch.setenv("DISTSORT_MPI_CHUNK_BYTES", str(chunk))
    monkeypatch.setattr("distsort.runtime._cache", {})  # fresh transports read the chunk size
    x = local_data("fewdistinct", "int32", 500 + 13 * COMM.Get_rank(), seed=8)
    data = everything(x)
    for descending in (False, True):
        shard = distsort.sort(x, descending=descending)
        np.testing.assert_array_equal(everything(shard), reference(data, descending))
    f = local_data("specials", "float64", 400, seed=9)
    positions = np.arange(len(f)) + (COMM.exscan(len(f)) or 0)
    keys, values = distsort.sort_pairs(f, positions, stable=True)
    np.testing.assert_array_equal(everything(values), np.argsort(everything(f), kind="stable"))
    # pairs sort in the receive buffers: gaps keyed past the rank's range (top + 1), before it
    # on the last rank (whose range ends at the dtype's maximum), or packed where a range is
    # every key (all keys 0 and 255: ranks whose range is [0, 255])
    for keys in (np.random.default_rng([COMM.Get_rank(), 5]).integers(0, 2**32, 700),
                 np.where(np.arange(600 + 9 * COMM.Get_rank()) % 3, 255, 0)):
        for dtype in ("uint32", "uint8"):
            k = keys.astype(dtype)
            positions = np.arange(len(k)) + (COMM.exscan(len(k)) or 0)
            got_k, got_v = distsort.sort_pairs(k, positions, stable=True)
            order = np.argsort(everything(k), kind="stable")
            np.testing.assert_array_equal(everything(got_v), order)
            np.testing.assert_array_equal(everything(got_k), everything(k)[order])
    records = np.random.default_rng(COMM.Get_rank()).integers(0, 3, (300, 12), dtype=np.uint8)
    out = everything(distsort.sort_records(records, 5))  # stable: whole records in order
    assert [bytes(r) for r in out] == sorted((bytes(r) for r in everything(records)),
                                             key=lambda r: r[:5])


def test_stable_float_sorts_carry_the_keys_only_where_some_rank_needs_them(monkeypatch):
    """A stable float sort carries the original keys as a column where the canonical codes
    cannot give them back (-0.0, NaNs other than the one NaN) on any rank, on every rank alike;
    otherwise the codes alone. Either way the shards hold the input's bits in stable order."""
    from distsort import api

    columns = []

    def counted(rt, cols, *args, **kwargs):
        columns.append(len(cols))
        return distributed_sort(rt, cols, *args, **kwargs)

    distributed_sort = api.distributed_sort
    monkeypatch.setattr(api, "distributed_sort", counted)
    last = COMM.Get_rank() == COMM.Get_size() - 1
    nan = np.float32(np.nan)
    for special, carried in [(None, False), (np.float32(-0.0), True), (-nan, True), (nan, False)]:
        x = local_data("fewdistinct", "float32", 1500, seed=31)
        if special is not None and last:  # one rank's keys only
            x[::7] = special
        data, order = everything(x), reference_order(everything(x), False)
        columns.clear()
        keys = distsort.sort(x, stable=True)
        assert everything(keys).tobytes() == data[order].tobytes()
        positions = np.arange(len(x)) + (COMM.exscan(len(x)) or 0)
        keys, values = distsort.sort_pairs(x, positions, stable=True)
        np.testing.assert_array_equal(everything(values), order)
        assert columns == [1 + carried, 2 + carried], (special, columns)


def test_array_likes_and_either_byte_order_sort_together():
    """Lists come back as NumPy arrays; a big-endian piece sorts with little-endian ones."""
    r = COMM.Get_rank()
    shard = distsort.sort([5 * r + 3, 5 * r, 5 * r + 4])
    np.testing.assert_array_equal(everything(shard), np.sort(everything(np.array(
        [5 * r + 3, 5 * r, 5 * r + 4]))))
    x = local_data("uniform", "int32", 700, seed=32)
    piece = x.astype(">i4") if r == 0 else x
    shard = distsort.sort(piece)
    assert shard.dtype == piece.dtype
    np.testing.assert_array_equal(everything(shard.astype(np.int32)), np.sort(everything(x)))


WRONG_CALLS = {  # problem: (the last rank's call, words of its message, needs another rank)
    "empty float64 piece": (lambda x: distsort.sort(np.empty(0)), "keys dtype", True),
    "2-D keys": (lambda x: distsort.sort(x.reshape(-1, 2)), "1-D", False),
    "long complex keys": (lambda x: distsort.sort(x.astype(np.clongdouble)), "cannot sort", False),
    "descending": (lambda x: distsort.sort(x, descending=True), "descending=True", True),
    "stable": (lambda x: distsort.sort(x, stable=True), "stable=True", True),
    "backend": (lambda x: distsort.sort(x, backend="gpu"), "backend gpu", True),
    "device_memory": (lambda x: distsort.sort(x, device_memory="lots"), "not a size", False),
    "device_memory True": (lambda x: distsort.sort(x, device_memory=True), "not a size", False),
    "values rows": (lambda x: distsort.sort_pairs(x, x[1:]), "one row per key", False),
    "values dtype": (lambda x: distsort.sort_pairs(x, x.astype(np.int64)), "values dtype",
                     True),
    "argsort order": (lambda x: distsort.argsort(x, descending=True), "descending", True),
    "record size": (lambda x: distsort.sort_records(x.view(np.uint8).reshape(-1, 8)[:, :6]
                                                    .copy(), 4), "rows of shape (6,)", True),
    "key_size": (lambda x: distsort.sort_records(x.view(np.uint8).reshape(-1, 8), 5),
                 "key_size=5", True),
    "records not bytes": (lambda x: distsort.sort_records(x.reshape(-1, 2), 1), "uint8", False),
    "key_size not an int": (lambda x: distsort.sort_records(x.view(np.uint8).reshape(-1, 8),
                                                            None), "key_size must be an int",
                            False),
    "order not names": (lambda x: distsort.sort(_fielded(x), order=5), "order=5", False),
    "out not a pair": (lambda x: distsort.sort_pairs(x, x, out=5), "out: give a tuple", False),
    "ragged list": (lambda x: distsort.sort([[1, 2], [3]]), "keys: NumPy cannot make", False),
    "keys None": (lambda x: distsort.sort_pairs(None, x), "keys: got None", False),
    "records None": (lambda x: distsort.sort_records(None, 4), "records: got None", False),
    "out on one rank": (lambda x: distsort.sort(x, out=np.empty(2 * len(x), x.dtype)),
                        "out= (given on every rank or on none)", True),
    "outs overlap": (lambda x: distsort.sort_pairs(x, x, out=(np.empty(4 * len(x), x.dtype),) * 2),
                     "must not overlap", False),
    "report not one": (lambda x: distsort.sort(x, report={}), "report: give a distsort.SortReport",
                       False),
    "rows of no bytes": (lambda x: distsort.sort(np.zeros(len(x), [("a", "S0")])),
                         "its rows hold no bytes", False),
}
RIGHT_CALLS = {
    "key_size not an int": lambda x: distsort.sort_records(x.view(np.uint8).reshape(-1, 8), 4),
    "order not names": lambda x: distsort.sort(_fielded(x), order="a"),
    "out not a pair": lambda x: distsort.sort_pairs(x, x),
    "argsort order": lambda x: distsort.argsort(x),
    "record size": lambda x: distsort.sort_records(x.view(np.uint8).reshape(-1, 8), 4),
    "key_size": lambda x: distsort.sort_records(x.view(np.uint8).reshape(-1, 8), 4),
    "records not bytes": lambda x: distsort.sort_records(x.view(np.uint8).reshape(-1, 8), 1),
    "values rows": lambda x: distsort.sort_pairs(x, x), "values dtype":
    lambda x: distsort.sort_pairs(x, x),
    "keys None": lambda x: distsort.sort_pairs(x, x),
    "records None": lambda x: distsort.sort_records(x.view(np.uint8).reshape(-1, 8), 4),
    "outs overlap": lambda x: distsort.sort_pairs(x, x),
}


def _fielded(x: np.ndarray) -> np.ndarray:
    """Structured keys of two int32 fields, a and b, from x."""
    rows = np.empty(len(x), [("a", np.int32), ("b", np.int32)])
    rows["a"], rows["b"] = x, x[::-1]
    return rows


def test_a_field_of_no_bytes_sorts_as_numpy_sorts_it_with_an_empty_rank():
    """S0 and V0 fields compare equal (no bytes): the rows sort by the others; rank 0 holds
    none (its reshape of no rows passed where the others' raised alone, and it waited)."""
    rows = np.zeros(0 if COMM.Get_rank() == 0 else 500, [("a", "S0"), ("b", "i4"), ("c", "V0")])
    rows["b"] = np.random.default_rng(COMM.Get_rank()).integers(0, 50, len(rows))
    got = everything(distsort.sort(rows, order="a"))
    np.testing.assert_array_equal(got["b"], np.sort(everything(rows), order="a",
                                                    kind="stable")["b"])


def test_a_freed_communicators_handle_given_to_a_new_one_sorts_on_the_new_one():
    """MPI hands a freed communicator's handle to the next one made: the runtime kept for the
    freed one (its communicator null now) is not the new one's."""
    x = local_data("uniform", "int32", 1000, seed=35)
    for _ in range(3):
        sub = COMM.Split(0, COMM.Get_rank())
        np.testing.assert_array_equal(everything(distsort.sort(x, comm=sub)),
                                      np.sort(everything(x)))
        sub.Free()


@pytest.mark.skipif(COMM.Get_size() < 2, reason="an intercommunicator joins two groups")
def test_an_intercommunicator_is_refused_on_every_rank():
    rank = COMM.Get_rank()
    half = COMM.Split(rank % 2, rank)
    inter = half.Create_intercomm(0, COMM, 1 - rank % 2, tag=7)
    with pytest.raises(distsort.DistsortError, match="give an mpi4py intracommunicator"):
        distsort.sort(np.arange(5), comm=inter)
    inter.Free()
    half.Free()


def test_options_that_numpy_holds_call_alike_with_pythons():
    """np.int64(4) and 4, np.True_ and True: the same call on every rank."""
    x = local_data("uniform", "int32", 1000, seed=34).view(np.uint8).reshape(-1, 8)
    first = COMM.Get_rank() == 0
    shard = distsort.sort_records(x, np.int64(4) if first else 4,
                                  descending=np.True_ if first else True)
    assert len(everything(shard)) == len(everything(x))


@pytest.mark.parametrize("problem", WRONG_CALLS)
def test_a_rank_that_calls_wrongly_or_differently_is_one_clear_error_on_every_rank(problem):
    """The last rank's call is wrong, or differs from the others': it alone says what, every
    other rank raises RemoteError, and none is left waiting in a collective."""
    from distsort.errors import RemoteError

    call, words, needs_another = WRONG_CALLS[problem]
    if needs_another and COMM.Get_size() == 1:
        pytest.skip("a call differs from others' only where there are others")
    x = local_data("uniform", "int32", 1000, seed=33)
    last = COMM.Get_rank() == COMM.Get_size() - 1
    with pytest.raises(distsort.DistsortError) as failed:
        (call if last else RIGHT_CALLS.get(problem, lambda x: distsort.sort(x)))(x)
    if last:
        assert words in str(failed.value) and not isinstance(failed.value, RemoteError)
    else:  # with the reason: a program that logs on rank 0 shows why
        assert isinstance(failed.value, RemoteError) and words in str(failed.value)
        assert str(failed.value).startswith(f"rank {COMM.Get_size() - 1} failed: ")


def test_a_send_buffer_with_room_past_its_rows_goes_in_one_call(monkeypatch):
    """What the blocks reach decides one call or rounds, not the buffer's length: a sender's
    keys may have room past them (partition.scattered), which MPI never reads."""
    p, rank = COMM.Get_size(), COMM.Get_rank()
    send_counts = np.full(p, 10, np.int64)
    recv_counts = np.full(p, 10, np.int64)
    buffer = np.arange(10 * p + 1000, dtype=np.int64) + 1000 * rank  # 1000 rows of room
    monkeypatch.setattr(MpiTransport, "_rounds", lambda *args: pytest.fail("rounds taken"))
    got, = MpiTransport(COMM, chunk_bytes=8 * 10 * p).alltoallv([buffer], send_counts,
                                                                recv_counts)
    want = [np.arange(10 * rank, 10 * rank + 10) + 1000 * src for src in range(p)]
    np.testing.assert_array_equal(got, np.concatenate(want))
