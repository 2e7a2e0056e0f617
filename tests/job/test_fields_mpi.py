"""Structured keys sorted by their fields across ranks (order=, fields.py) against NumPy's stable
sort: sort, argsort, sort_pairs, descending, in memory and out of core; bytes, strings, raw
void keys and complex numbers, which sort as one field. (The CLI's --order and string files:
test_cli.py.)"""

from __future__ import annotations

import numpy as np
import pytest
from helpers import complex_keys, string_keys, structured_rows

import distsort
from distsort.errors import DistsortError

MPI = pytest.importorskip("mpi4py.MPI")
COMM = MPI.COMM_WORLD
pytestmark = pytest.mark.mpi
ORDERS = [None, "t", ["a", "b"], ["s", "u", "d"]]
BUDGETS = [None, "256KiB"]  # in memory; out of core


def local_rows(n: int = 3000):
    """This rank's rows (more on later ranks, none on rank 1), and everyone's."""
    mine = structured_rows(0 if COMM.Get_rank() == 1 else n + 37 * COMM.Get_rank(),
                           [COMM.Get_rank(), 7])
    return mine, np.concatenate(COMM.allgather(mine))


def gathered(shard) -> np.ndarray:
    return np.concatenate(COMM.allgather(shard))


@pytest.mark.parametrize("order", ORDERS)
@pytest.mark.parametrize("budget", BUDGETS)
def test_structured_keys_sort_as_numpy_sorts_them(order, budget):
    mine, everyone = local_rows()
    shard = distsort.sort(mine, order=order, device_memory=budget, backend="cpu")
    assert shard.dtype == mine.dtype
    want = np.sort(everyone, order=order, kind="stable")
    assert gathered(shard).tobytes() == want.tobytes()


@pytest.mark.parametrize("order", ORDERS)
@pytest.mark.parametrize("budget", BUDGETS)
def test_argsort_and_pairs_by_fields(order, budget):
    mine, everyone = local_rows()
    want = np.argsort(everyone, order=order, kind="stable")
    positions = distsort.argsort(mine, order=order, device_memory=budget, backend="cpu")
    np.testing.assert_array_equal(gathered(positions), want)
    values = np.arange(len(mine), dtype=np.float32) + 0.5 + (COMM.exscan(len(mine)) or 0)
    keys, moved = distsort.sort_pairs(mine, values, order=order, device_memory=budget,
                                      backend="cpu")
    assert gathered(keys).tobytes() == everyone[want].tobytes()
    np.testing.assert_array_equal(gathered(moved), np.concatenate(COMM.allgather(values))[want])


def test_descending_by_fields_is_the_reverse_with_nat_last():
    mine, everyone = local_rows()
    shard = gathered(distsort.sort(mine, order=["t", "a"], descending=True, backend="cpu"))
    t = shard["t"]
    nat = np.isnat(t)
    assert nat.sum() == np.isnat(everyone["t"]).sum() and nat[len(t) - nat.sum():].all()
    assert (t[~nat][:-1] >= t[~nat][1:]).all()
    assert sorted(r.tobytes() for r in shard) == sorted(r.tobytes() for r in everyone)


def test_order_on_plain_keys_or_an_unknown_field_is_one_clear_error():
    mine, _ = local_rows(10)
    with pytest.raises(DistsortError, match="order= names fields of structured keys"):
        distsort.sort(np.arange(5), order="a")
    bad = "nope" if COMM.Get_rank() == COMM.Get_size() - 1 else "a"
    with pytest.raises(DistsortError, match="nope|order"):
        distsort.sort(mine, order=bad)


def test_a_field_named_alone_or_in_a_list_is_the_same_call_on_every_rank():
    mine, everyone = local_rows(500)
    order = ("t" if COMM.Get_rank() % 3 == 0 else ["t"] if COMM.Get_rank() % 3 == 1
             else ("t",))
    shard = gathered(distsort.sort(mine, order=order))
    np.testing.assert_array_equal(shard.view(np.uint8).reshape(len(shard), -1),
                                  np.sort(everyone, order="t", kind="stable")
                                  .view(np.uint8).reshape(len(everyone), -1))


@pytest.mark.parametrize("kind", ["S", "U", "V"])
@pytest.mark.parametrize("budget", BUDGETS)
def test_bytes_strings_and_void_keys_sort_as_numpy_sorts_them(kind, budget):
    """As one field each (bytes and void as memcmp compares them, strings by code point),
    stably, both ways; argsort and pairs alike."""
    n = 0 if COMM.Get_rank() == 1 else 2000 + 13 * COMM.Get_rank()
    mine = string_keys(kind, n, COMM.Get_rank())
    everyone = np.concatenate(COMM.allgather(mine.astype(mine.dtype.newbyteorder("="))))
    want = np.argsort(everyone, kind="stable")
    shard = distsort.sort(mine, device_memory=budget, backend="cpu")
    assert shard.dtype == mine.dtype and gathered(shard).tobytes() == everyone[want].tobytes()
    np.testing.assert_array_equal(gathered(distsort.argsort(mine, device_memory=budget)), want)
    values = np.arange(len(mine)) + (COMM.exscan(len(mine)) or 0)
    keys, moved = distsort.sort_pairs(mine, values, descending=True, device_memory=budget)
    rank = np.searchsorted(np.unique(everyone), everyone)  # each key's place among them
    order = np.lexsort((np.arange(len(everyone)), -rank))  # descending, equal keys as given
    np.testing.assert_array_equal(gathered(moved), order)
    assert gathered(keys).tobytes() == everyone[order].tobytes()


@pytest.mark.parametrize("dtype", [np.complex64, np.complex128])
@pytest.mark.parametrize("budget", BUDGETS)
def test_complex_keys_sort_as_numpy_sorts_them(dtype, budget):
    """NumPy's order (numbers with a NaN part last), stably, every bit back, either byte order
    on each rank; argsort and pairs alike."""
    n = 0 if COMM.Get_rank() == 1 else 3000 + 17 * COMM.Get_rank()
    mine = complex_keys(n, (1, 0, 2, 3)[COMM.Get_rank() % 4], dtype)  # rank 0 big-endian
    everyone = np.concatenate(COMM.allgather(mine.astype(mine.dtype.newbyteorder("="))))
    want = np.argsort(everyone, kind="stable")
    shard = distsort.sort(mine, device_memory=budget)
    assert shard.dtype == mine.dtype and gathered(shard).tobytes() == everyone[want].tobytes()
    np.testing.assert_array_equal(gathered(distsort.argsort(mine, device_memory=budget)), want)
    values = np.arange(len(mine)) + (COMM.exscan(len(mine)) or 0)
    keys, moved = distsort.sort_pairs(mine, values, device_memory=budget)
    np.testing.assert_array_equal(gathered(moved), want)


def test_unicode_keys_of_narrow_code_points_on_some_ranks_only():
    """The key's bytes a character are every rank's widest (an ASCII rank's rows meet another's
    wider ones in one order)."""
    alphabet = ["a", "b", ""] if COMM.Get_rank() == 0 else ["a", "\u00e9", "\U0001f600", ""]
    rng = np.random.default_rng(COMM.Get_rank())
    mine = np.array([''.join(rng.choice(alphabet, 3)) for _ in range(1000)], dtype="U3")
    everyone = np.concatenate(COMM.allgather(mine))
    shard = distsort.sort(mine, backend="cpu")
    np.testing.assert_array_equal(gathered(shard), np.sort(everyone, kind="stable"))


def test_a_rank_that_fails_to_make_its_keys_leaves_none_waiting(monkeypatch):
    """One rank's keys cannot be made (out of memory, say): every rank raises, that rank its
    own error, the others naming it; none waits in the sort's collectives."""
    from distsort import fields

    keys = string_keys("U", 1000, COMM.Get_rank())
    if COMM.Get_rank() == COMM.Get_size() - 1:
        def out_of_memory(*args, **kwargs):
            raise MemoryError("no room for the keys")
        monkeypatch.setattr(fields, "keyed", out_of_memory)
    with pytest.raises(Exception) as raised:
        distsort.sort(keys)
    last = COMM.Get_size() - 1
    if COMM.Get_rank() == last:
        assert isinstance(raised.value, MemoryError)
    else:
        assert f"rank {last} failed" in str(raised.value) and "no room" in str(raised.value)
