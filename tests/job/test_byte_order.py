"""Pieces of either byte order, mixed across ranks: every bit of every key and value comes back.

Rank r passes its keys (and values) big-endian where r is odd, little-endian where it is even,
so at 2 ranks and more the orders mix; at 1 rank the piece is big-endian. Every integer and
float dtype, with -0.0 and NaNs of several payloads among floats; ascending and descending,
stable or not; in memory and out of core; on CPUs (under MPI: `mpiexec -n P python -m pytest
--with-mpi -m mpi tests/job/test_byte_order.py`) and on a GPU (`-m gpu`, also under mpirun).
"""

from __future__ import annotations

import numpy as np
import pytest
from helpers import everything, keys_with_specials, reference_order, same_bits

import distsort

MPI = pytest.importorskip("mpi4py.MPI")
COMM = MPI.COMM_WORLD
DTYPES = ["int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64",
          "float16", "float32", "float64"]
BACKENDS = [pytest.param("cpu", marks=pytest.mark.mpi), pytest.param("gpu", marks=pytest.mark.gpu)]
WHERE = {"in memory": None, "out of core": "4KiB"}  # below 4x any rank's bytes here
VALUES = ["i8", "f4", "c8", "M8[ns]", "m8[s]", "U3", "structured"]


def swapped_on_odd_ranks(x: np.ndarray) -> np.ndarray:
    """x in big-endian order on odd ranks and at 1 rank, little-endian on even ones."""
    big = COMM.Get_rank() % 2 == 1 or COMM.Get_size() == 1
    return x.astype(x.dtype.newbyteorder(">" if big else "<"))


def host(x):
    return x.get() if hasattr(x, "get") else np.asarray(x)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("where", WHERE)
@pytest.mark.parametrize("dtype", DTYPES)
def test_keys_in_mixed_byte_orders_come_back_bit_exact(backend, where, dtype):
    x = keys_with_specials(dtype, 2000 + 31 * COMM.Get_rank())
    piece = swapped_on_odd_ranks(x)
    data = everything(x)
    for descending in (False, True):
        order = reference_order(data, descending)
        for stable in (False, True):
            shard = distsort.sort(piece, descending=descending, stable=stable, backend=backend,
                                  device_memory=WHERE[where])
            assert shard.dtype == piece.dtype  # as numpy.sort gives it: the caller's order
            same_bits(everything(host(shard)), data[order], exact=stable)
        positions = distsort.argsort(piece, descending=descending, backend=backend,
                                     device_memory=WHERE[where])
        np.testing.assert_array_equal(everything(host(positions)), order)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("where", WHERE)
@pytest.mark.parametrize("kind", VALUES)
def test_values_in_mixed_byte_orders_come_back_bit_exact(backend, where, kind):
    rank = COMM.Get_rank()
    n = 1500 + 17 * rank
    start = COMM.exscan(n) or 0
    keys = np.random.default_rng([rank, 42]).integers(0, 40, n).astype(np.float64)
    position = np.arange(start, start + n)
    if kind == "structured":
        values = np.zeros(n, [("pos", "i8"), ("half", "f2"), ("tag", "S2")])
        values["pos"], values["half"], values["tag"] = position, position % 7 - 3.5, b"xy"
    else:
        values = position.astype(kind)
    order = np.argsort(everything(keys), kind="stable")
    want = everything(values)[order]
    got_keys, got = distsort.sort_pairs(swapped_on_odd_ranks(keys), swapped_on_odd_ranks(values),
                                        stable=True, backend=backend,
                                        device_memory=WHERE[where])
    assert host(got).dtype == values.dtype.newbyteorder("=")
    same_bits(everything(host(got)), want, exact=True)
    same_bits(everything(host(got_keys)), everything(keys)[order], exact=True)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("where", WHERE)
def test_big_endian_floats_with_an_empty_rank(backend, where):
    """Big-endian on every rank, rank 1's piece empty (at 2 ranks and more), stable."""
    rank = COMM.Get_rank()
    x = keys_with_specials("float64", 0 if rank == 1 else 5000 + rank)
    piece = x.astype(">f8")
    data = everything(x)
    shard = distsort.sort(piece, stable=True, backend=backend, device_memory=WHERE[where])
    assert shard.dtype == np.dtype(">f8")
    same_bits(everything(host(shard)), data[reference_order(data, False)], exact=True)
