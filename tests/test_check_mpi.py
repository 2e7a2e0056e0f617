"""verify and run_check across ranks (pytest-mpi), at any number of ranks.

Run as `mpiexec -n P python -m pytest --with-mpi tests/test_check_mpi.py` for P = 1..4.
"""

from __future__ import annotations

import numpy as np
import pytest

from distsort.check import checksum, run_check, verify
from distsort.errors import DistsortError, RemoteError
from distsort.io import FileFormat, rank_range, write_shards

MPI = pytest.importorskip("mpi4py.MPI")
COMM = MPI.COMM_WORLD
RANK, SIZE = COMM.Get_rank(), COMM.Get_size()

pytestmark = pytest.mark.mpi


def global_input(n: int = 1000, dtype="f4", seed: int = 4) -> np.ndarray:
    """The same data on every rank, with NaNs, signed zeros and repeats."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=n).round(1).astype(dtype)
    x[::97] = np.nan
    x[5::89] = -0.0
    return x


def sorted_bits(x: np.ndarray) -> np.ndarray:
    """NumPy's order keeping each element's bits."""
    return x[np.argsort(x, kind="stable")]


def swap_near(out: np.ndarray, at: int) -> int:
    """Swap the first pair of different keys from index `at` on; returns the pair's first index."""
    i = at + int(np.argmax(out[at:-1] < out[at + 1 :]))
    out[[i, i + 1]] = out[[i + 1, i]]
    return i


def my_piece(x: np.ndarray, shift: int = 0) -> np.ndarray:
    """This rank's part of x; shift moves the split points so input and output shards differ."""
    def bound(r: int) -> int:
        if r in (0, SIZE):
            return 0 if r == 0 else len(x)
        return min(max(rank_range(len(x), r, SIZE)[0] + shift * r, 0), len(x))

    return x[bound(RANK) : max(bound(RANK), bound(RANK + 1))]


def test_sorted_output_passes_with_differently_split_shards():
    x = global_input()
    verdict = verify(COMM, my_piece(x), my_piece(sorted_bits(x), shift=7))
    assert verdict.ok, verdict.message
    assert verdict.count_in == verdict.count_out == len(x)
    assert verdict.checksum_in == checksum(x)
    assert COMM.allgather(verdict.message) == [verdict.message] * SIZE


def test_swapped_element_is_caught():
    x = global_input()
    out = sorted_bits(x)
    i = swap_near(out, 300)
    verdict = verify(COMM, my_piece(x), my_piece(out))
    assert not verdict.ok and not verdict.order_ok
    assert verdict.checksum_in == verdict.checksum_out
    owner = next(r for r in range(SIZE) if rank_range(len(x), r, SIZE)[1] > i)
    assert verdict.first_bad_rank == owner


def test_changed_byte_is_caught():
    x = np.random.default_rng(2).permutation(np.arange(0, 2000, 2, dtype=np.int32))
    out = np.sort(x)
    out[500] += 1  # 1000 -> 1001: still in order, but not the input's
    verdict = verify(COMM, my_piece(x), my_piece(out))
    assert not verdict.ok and verdict.order_ok
    assert verdict.checksum_in != verdict.checksum_out


def test_missing_element_is_caught():
    x = global_input()
    out = np.delete(sorted_bits(x), 400)
    verdict = verify(COMM, my_piece(x), my_piece(out))
    assert not verdict.ok and verdict.count_out == len(x) - 1


@pytest.mark.mpi(min_size=2)
def test_disorder_across_a_shard_boundary_is_caught():
    """Each shard sorted on its own, but the last two pieces swapped, an empty rank between."""
    x = np.arange(100, dtype=np.int32)
    if SIZE == 2:
        shards, expect = [x[50:], x[:50]], 1
    else:
        pieces = [x[slice(*rank_range(100, r, SIZE - 1))] for r in range(SIZE - 1)]
        shards = pieces[:-2] + [pieces[-1], x[:0], pieces[-2]]
        expect = SIZE - 1
    verdict = verify(COMM, my_piece(x), shards[RANK])
    assert not verdict.ok and not verdict.order_ok and verdict.first_bad_rank == expect
    assert verdict.checksum_in == verdict.checksum_out
    at = sum(len(s) for s in shards[:expect])  # the output position of rank expect's first
    before = max(r for r in range(expect) if len(shards[r]))
    assert (f"out of order at positions {at - 1} and {at} across ranks (the last element of "
            f"rank {before}'s shard, the first of rank {expect}'s): "
            f"{shards[before][-1].item()!r} then {shards[expect][0].item()!r}") in verdict.message


@pytest.mark.mpi(min_size=2)
def test_equal_keys_across_boundaries_and_empty_ranks_pass():
    x = np.full(10, 7, np.uint8)
    mine = x if RANK == 1 else x[:0]
    assert verify(COMM, my_piece(x), mine).ok


def test_run_check_on_files_written_by_all_ranks(mpi_tmp_path):
    x = global_input(5000, ">f8")
    fmt = FileFormat.npy(">f8")
    native = x.astype("f8")
    write_shards(COMM, mpi_tmp_path / "in.npy", fmt, my_piece(native))
    write_shards(COMM, mpi_tmp_path / "out.npy", fmt, my_piece(sorted_bits(native), shift=-3))
    verdict = run_check(COMM, mpi_tmp_path / "in.npy", mpi_tmp_path / "out.npy", chunk=333)
    assert verdict.ok, verdict.message
    bad = sorted_bits(native)
    swap_near(bad, 2499)
    write_shards(COMM, mpi_tmp_path / "bad.npy", fmt, my_piece(bad))
    verdict = run_check(COMM, mpi_tmp_path / "in.npy", mpi_tmp_path / "bad.npy", chunk=333)
    assert not verdict.order_ok and verdict.checksum_in == verdict.checksum_out


def test_run_check_records(mpi_tmp_path):
    rng = np.random.default_rng(9)
    rows = rng.integers(0, 4, (700, 20), dtype=np.uint8)  # many equal 3-byte keys
    fmt = FileFormat.records(20, 3)
    out = rows[np.lexsort(rows[:, :3].T[::-1])]
    write_shards(COMM, mpi_tmp_path / "in.dat", fmt, my_piece(rows))
    write_shards(COMM, mpi_tmp_path / "out.dat", fmt, my_piece(out, shift=5))
    assert run_check(COMM, mpi_tmp_path / "in.dat", mpi_tmp_path / "out.dat", fmt).ok
    desc = out[::-1].copy()
    write_shards(COMM, mpi_tmp_path / "desc.dat", fmt, my_piece(desc))
    in_, desc_path = mpi_tmp_path / "in.dat", mpi_tmp_path / "desc.dat"
    assert run_check(COMM, in_, desc_path, fmt, descending=True).ok
    assert not run_check(COMM, in_, desc_path, fmt).ok


def test_run_check_missing_output_fails_every_rank(mpi_tmp_path):
    mine = np.arange(RANK + 1, dtype="u4")
    write_shards(COMM, mpi_tmp_path / "in.npy", FileFormat.npy("u4"), mine)
    with pytest.raises(DistsortError) as info:
        run_check(COMM, mpi_tmp_path / "in.npy", mpi_tmp_path / "nope.npy")
    if RANK == 0:
        assert "nope.npy" in str(info.value) and "does not exist" in str(info.value)
    else:
        assert isinstance(info.value, RemoteError)
