"""The collective writer and per-rank reads under MPI (pytest-mpi), at any number of ranks.

Run as `mpiexec -n P python -m pytest --with-mpi tests/io/test_io_mpi.py` for P = 1..4. The
folder is shared by broadcasting rank 0's tmp_path (pytest-mpi's mpi_tmp_path).
"""

from __future__ import annotations

import errno
import os

import numpy as np
import pytest

from distsort.errors import DistsortError, RemoteError, agree
from distsort.gen import gen_file, generate
from distsort.io import (
    FileFormat,
    ShardWriter,
    detect_format,
    open_input,
    rank_range,
    write_shards,
)

MPI = pytest.importorskip("mpi4py.MPI")
COMM = MPI.COMM_WORLD
RANK, SIZE = COMM.Get_rank(), COMM.Get_size()
DTYPES = ["i1", "i2", "i4", "i8", "u1", "u2", "u4", "u8", "f2", "f4", "f8"]

pytestmark = pytest.mark.mpi


def global_data(dtype, n: int, seed: int = 0) -> np.ndarray:
    """The same pseudo-random bytes on every rank, viewed as n elements of dtype."""
    rng = np.random.default_rng(seed)
    return rng.integers(0, 256, n * np.dtype(dtype).itemsize, dtype=np.uint8).view(dtype)


def listing(folder) -> list[str]:
    COMM.Barrier()  # every rank is done with the folder before anyone looks
    return sorted(os.listdir(folder))


def uneven_split(n: int) -> tuple[int, int]:
    """An uneven split of range(n): rank r gets about r parts (rank 0 none, unless alone)."""
    weights = np.arange(SIZE) if SIZE > 1 else np.ones(1, int)
    bounds = np.concatenate([[0], np.cumsum(weights)]) * n // max(weights.sum(), 1)
    return int(bounds[RANK]), int(bounds[RANK + 1])


@pytest.mark.parametrize("dtype", [p + d for d in DTYPES for p in "<>"])
def test_npy_round_trip_every_dtype_and_byte_order(mpi_tmp_path, dtype, write_mode):
    """Ranks' uneven ranges meet inside pages: mapped, each rank's copy lands beside its
    neighbours' in the one page cache."""
    data = global_data(dtype, 1001)
    path = mpi_tmp_path / "o.npy"
    start, stop = uneven_split(len(data))
    mine = data[start:stop].astype(data.dtype.newbyteorder("="))
    write_shards(COMM, path, FileFormat.npy(dtype), mine)
    back = np.load(path)
    assert back.dtype == np.dtype(dtype) and back.tobytes() == data.tobytes()
    src = open_input(path, detect_format(path))
    back = src.read(*rank_range(src.count, RANK, SIZE))
    pieces = COMM.allgather(back)
    assert np.concatenate(pieces).tobytes() == data.astype(back.dtype).tobytes()
    assert listing(mpi_tmp_path) == ["o.npy"]


def test_records_round_trip(mpi_tmp_path, write_mode):
    rows = global_data("u1", 100 * 257).reshape(257, 100)
    path = mpi_tmp_path / "r.dat"
    start, stop = uneven_split(len(rows))
    write_shards(COMM, path, FileFormat.records(100, 10), rows[start:stop])
    src = open_input(path, detect_format(path, record_size=100, key_size=10))
    assert src.count == 257
    mine = src.read(*rank_range(257, RANK, SIZE))
    np.testing.assert_array_equal(np.concatenate(COMM.allgather(mine)), rows)


def test_every_rank_empty_but_one(mpi_tmp_path):
    data = np.arange(10, dtype=np.uint32)
    mine = data if RANK == SIZE - 1 else data[:0]
    write_shards(COMM, mpi_tmp_path / "o.npy", FileFormat.npy("u4"), mine)
    np.testing.assert_array_equal(np.load(mpi_tmp_path / "o.npy"), data)


def test_all_ranks_share_one_temp_file_and_nothing_shows_before_commit(mpi_tmp_path):
    path = mpi_tmp_path / "o.raw"
    with ShardWriter(path, FileFormat.raw("u2"), SIZE, COMM) as w:
        assert COMM.allgather(w.temp) == [w.temp] * SIZE
        w.write(RANK, np.array([RANK], np.uint16))
        assert not path.exists()
        COMM.Barrier()
        w.commit()
        assert path.exists()
    np.testing.assert_array_equal(np.fromfile(path, np.uint16), np.arange(SIZE))
    assert listing(mpi_tmp_path) == ["o.raw"]


def failing_write(path) -> DistsortError:
    with pytest.raises(DistsortError) as info:
        write_shards(COMM, path, FileFormat.raw("u1"), np.full(3, RANK, np.uint8))
    return info.value


def assert_one_message(exc: DistsortError, words: list[str]) -> None:
    """Rank 0 (where rank 0 fails) says what is wrong; the others get RemoteError."""
    if RANK == 0:
        assert not isinstance(exc, RemoteError)
        for word in words:
            assert word in str(exc), str(exc)
    else:
        assert isinstance(exc, RemoteError)


def test_output_folder_missing(mpi_tmp_path):
    exc = failing_write(mpi_tmp_path / "missing" / "o.raw")
    assert_one_message(exc, ["o.raw", "does not exist"])
    assert listing(mpi_tmp_path) == []


def test_output_inside_a_regular_file(mpi_tmp_path):
    if RANK == 0:
        (mpi_tmp_path / "plain").write_bytes(b"x")
    COMM.Barrier()
    exc = failing_write(mpi_tmp_path / "plain" / "o.raw")
    assert_one_message(exc, ["o.raw", "regular file"])
    assert listing(mpi_tmp_path) == ["plain"]


@pytest.mark.mpi(min_size=2)
@pytest.mark.parametrize("write_mode", ["positioned"], indirect=True)
def test_one_rank_failing_to_write_fails_every_rank(mpi_tmp_path, monkeypatch, write_mode):
    """Disk full on the last rank only (a sparse file: its blocks are found as it is written):
    every rank raises at commit, nothing is left."""

    def full(fd, data, offset):
        raise OSError(errno.ENOSPC, "No space left on device")

    path = mpi_tmp_path / "o.raw"
    with ShardWriter(path, FileFormat.raw("u1"), SIZE, COMM) as w:
        if RANK == SIZE - 1:
            monkeypatch.setattr(os, "pwritev", full)
        w.write(RANK, np.array([RANK], np.uint8))
        with pytest.raises(DistsortError) as info:
            w.commit()
    if RANK == SIZE - 1:
        assert "no space left" in str(info.value) and "o.raw" in str(info.value)
    else:
        assert isinstance(info.value, RemoteError)
    assert listing(mpi_tmp_path) == []


@pytest.mark.mpi(min_size=2)
def test_a_rank_that_cannot_open_the_temp_file_fails_every_rank(mpi_tmp_path, monkeypatch):
    """As if the output folder were not shared with rank 1: all raise, no temp file remains."""
    real = os.open

    def hidden(path, flags, *args):
        if "distsort-tmp" in str(path) and not flags & os.O_CREAT:
            raise FileNotFoundError(errno.ENOENT, "No such file or directory")
        return real(path, flags, *args)

    if RANK == 1:
        monkeypatch.setattr(os, "open", hidden)
    exc = failing_write(mpi_tmp_path / "o.raw")
    if RANK == 1:
        assert "shared by all ranks" in str(exc)
    else:
        assert isinstance(exc, RemoteError)
    assert listing(mpi_tmp_path) == []


def test_bad_input_fails_every_rank_with_one_message(mpi_tmp_path):
    if RANK == 0:
        (mpi_tmp_path / "odd.raw").write_bytes(b"\0" * 7)
    COMM.Barrier()
    with pytest.raises(DistsortError) as info:
        agree(COMM, lambda: detect_format(mpi_tmp_path / "odd.raw", dtype="u4"))
    assert_one_message(info.value, ["odd.raw", "multiple"])


@pytest.mark.parametrize("dist, fmt", [("uniform", FileFormat.npy("<f8")),
                                       ("reverse", FileFormat.raw(">i2")),
                                       ("gensort", FileFormat.records(100, 10))])
def test_gen_file_is_the_same_data_set_at_any_number_of_ranks(mpi_tmp_path, dist, fmt):
    path = mpi_tmp_path / "g.dat"
    gen_file(COMM, path, 1234, fmt, dist, seed=5, chunk=100)
    src = open_input(path, fmt)
    expect = generate(dist, fmt, 0, 1234, seed=5, total=1234)
    assert src.read(0, src.count).tobytes() == expect.tobytes()
    assert listing(mpi_tmp_path) == ["g.dat"]
