"""Files straight to the device and back (io/staging.py), and the in-memory file job on GPUs.

`pytest -m gpu tests/io/test_staging_gpu.py` on one GPU, or under `mpirun -n P python -m pytest
--with-mpi -m gpu` (ranks may share a GPU). Skipped where no GPU is found.
"""

from __future__ import annotations

import os

import numpy as np
import pytest
from helpers import bool_or_time_order, keys_with_specials, same_bits, structured_rows

from distsort.io import FileFormat, ShardWriter, direct, open_input, staging
from distsort.payload import stored

MPI = pytest.importorskip("mpi4py.MPI")
COMM = MPI.COMM_WORLD

pytestmark = pytest.mark.gpu

FORMATS = {  # name: (format, the elements as NumPy writes them)
    "npy >f8": (FileFormat.npy(">f8"), lambda n: keys_with_specials(">f8", n)),
    "raw u2": (FileFormat.raw("u2"), lambda n: np.arange(n, dtype="u2")[::-1].copy()),
    "records": (FileFormat.records(10, 4),
                lambda n: (np.arange(10 * n) * 7 % 251).astype(np.uint8).reshape(n, 10)),
    "values >M8": (FileFormat.npy(">M8[ns]", payload=True),
                   lambda n: np.arange(n, dtype=">i8").view(">M8[ns]")),
    "values U3": (FileFormat.npy("U3", payload=True),
                  lambda n: np.arange(n).astype(str).astype("U3")),
}


@pytest.fixture
def shared_dir(tmp_path_factory):
    where = tmp_path_factory.getbasetemp() / "staging"  # one folder for every rank: rank 0's
    where = COMM.bcast(str(where) if COMM.Get_rank() == 0 else None)
    if COMM.Get_rank() == 0:
        os.makedirs(where, exist_ok=True)
    COMM.Barrier()
    return where


def write_file(path: str, fmt: FileFormat, data: np.ndarray) -> None:
    if COMM.Get_rank() == 0:
        if fmt.kind == "npy":
            np.save(path, data)
        else:
            data.tofile(path)
    COMM.Barrier()


@pytest.mark.parametrize("way", ["as it comes", "ring only"])
@pytest.mark.parametrize("name", FORMATS)
def test_load_and_store_round_trip_through_many_pieces(shared_dir, monkeypatch, name, way):
    """Ranges that span many staging buffers (odd sizes) reach the device exactly as the
    file's reader gives them, and go back to a file bit for bit: the pages in the page cache
    copied from there (direct.py) and the rest through the ring, or all through the ring."""
    import cupy

    fmt, make = FORMATS[name]
    monkeypatch.setattr(staging, "STAGE_BYTES", 4096 + 24)
    if way == "ring only":
        monkeypatch.setattr(staging, "copy_cached", lambda *args: None)
    else:  # small files too
        monkeypatch.setattr(direct, "MIN_BYTES", 0)
    n, rank = 5000, COMM.Get_rank()
    path = f"{shared_dir}/{list(FORMATS).index(name)}.{'npy' if fmt.kind == 'npy' else 'raw'}"
    write_file(path, fmt, make(n) if rank == 0 else None)  # (pickling loses >M8's byte order)
    source = open_input(path, fmt)
    lo, hi = 17 + rank * 1000, n - 3
    got = staging.load(source, lo, hi, cupy)
    want = stored(source.read(lo, hi))
    assert isinstance(got, cupy.ndarray) and got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_array_equal(cupy.asnumpy(got).view(np.uint8), want.view(np.uint8))
    out = f"{path}.out.{'npy' if fmt.kind == 'npy' else 'raw'}"
    with ShardWriter(out, fmt, n, COMM) as writer:  # every rank writes the same rows: same bytes
        writer.write(0, staging.load(source, 0, n, cupy))
        writer.commit()
    with open(out, "rb") as f, open(path, "rb") as g:
        assert f.read() == g.read()


@pytest.mark.parametrize("refuse", [None, 0, 2])  # locks refused: none, the first, the third
def test_pages_in_the_page_cache_go_up_from_there_and_are_unlocked_after(shared_dir, monkeypatch,
                                                                         refuse):
    """A range whose pages are in memory is copied by the device from the page cache (several
    locks of a few pages, the partial pages at its ends read), bit for bit; every lock is
    undone; where a lock is refused, the reads bring the range instead."""
    import mmap

    import cupy

    runtime, lock, unlock = cupy.cuda.runtime, cupy.cuda.runtime.hostRegister, \
        cupy.cuda.runtime.hostUnregister
    taken, undone, refused, locked = [], [], [], set()  # locked: read-only, not yet undone

    def register(ptr, size, flags):
        if flags == direct.READ_ONLY:
            if len(taken) == refuse:
                raise runtime.CUDARuntimeError(1)  # cudaErrorInvalidValue
            try:
                lock(ptr, size, flags)
            except runtime.CUDARuntimeError:
                refused.append(ptr)
                raise
            taken.append(ptr)
            locked.add(ptr)
            return None
        return lock(ptr, size, flags)

    def unregister(ptr):  # a ring buffer may be mapped where a piece was: not counted
        if ptr in locked:
            locked.remove(ptr)
            undone.append(ptr)
        return unlock(ptr)

    monkeypatch.setattr(runtime, "hostRegister", register)
    monkeypatch.setattr(runtime, "hostUnregister", unregister)
    monkeypatch.setattr(direct, "PIECE", 3 * mmap.PAGESIZE)
    monkeypatch.setattr(direct, "MIN_BYTES", 0)
    fmt, rank, n = FileFormat.raw("u4"), COMM.Get_rank(), 50_000
    path = f"{shared_dir}/direct.raw"
    keys = (np.arange(n, dtype=np.uint64) * 2654435761 % 2**32).astype(np.uint32)
    write_file(path, fmt, keys if rank == 0 else None)
    source = open_input(path, fmt)
    lo, hi = 1001 + 7 * rank, n - 333
    got = staging.load(source, lo, hi, cupy)
    np.testing.assert_array_equal(cupy.asnumpy(got), keys[lo:hi])
    if refused:
        pytest.skip("this GPU or kernel will not lock file pages read-only")
    pages = hi * 4 // mmap.PAGESIZE - -(-lo * 4 // mmap.PAGESIZE)  # whole ones: locked
    assert len(taken) == (-(-pages // 3) if refuse is None else refuse)
    assert sorted(undone) == sorted(taken) and not locked  # each lock undone, once


@pytest.mark.parametrize("case", ["keys >f8 descending", "argsort u4", "records", "pairs M8"])
def test_in_memory_file_job_on_the_gpu(shared_dir, monkeypatch, case):
    """`sort IN -o OUT --verify` in memory on GPUs: staged in and out (several pieces a rank),
    the same bytes NumPy gives."""
    from distsort.cli import main

    monkeypatch.setattr(staging, "STAGE_BYTES", 1 << 16)
    total = 300_001
    rng = np.random.default_rng(7)
    args = ["--backend", "gpu", "--quiet"]
    if case.startswith("keys"):
        data = COMM.bcast(keys_with_specials(">f8", total))
        nan = np.isnan(data)
        want = np.concatenate([np.sort(data[~nan])[::-1], data[nan]]).astype(">f8")  # the file's
        args += ["--descending", "--verify"]
    elif case.startswith("argsort"):
        data = rng.integers(0, 1000, total, dtype=np.uint32)
        want = np.argsort(data, kind="stable")
        args += ["--argsort"]
    elif case == "records":
        data = rng.integers(0, 4, (total, 12), dtype=np.uint8)
        want = data[np.lexsort(data[:, :5].T[::-1], axis=0)]
        args += ["--record-size", "12", "--key-size", "5", "--verify"]
    else:
        data = rng.integers(0, 50, total).astype(np.int16)
        stamps = np.arange(total, dtype=">i8").view(">M8[s]")
        write_file(f"{shared_dir}/v.npy", FileFormat.npy(">M8[s]", payload=True), stamps)
        want = np.sort(data, kind="stable")
        args += ["--stable", "--values", f"{shared_dir}/v.npy", "--verify"]
    name = "in.npy" if data.ndim == 1 else "in.rec"
    write_file(f"{shared_dir}/{name}", FileFormat.npy(data.dtype) if data.ndim == 1 else
               FileFormat.records(12, 5), data)
    out = f"{shared_dir}/out.npy" if data.ndim == 1 else f"{shared_dir}/out.rec"
    assert main(["sort", f"{shared_dir}/{name}", "-o", out, *args]) == 0
    got = np.load(out) if data.ndim == 1 else np.fromfile(out, np.uint8).reshape(-1, 12)
    assert got.dtype == want.dtype
    if case == "records":  # ties (equal keys, other bytes) may come in any order
        np.testing.assert_array_equal(got[:, :5], want[:, :5])
        np.testing.assert_array_equal(got[np.lexsort(got.T[::-1])], data[np.lexsort(data.T[::-1])])
    else:  # floats: -0.0 and 0.0, and the NaNs, may come in any order among themselves
        same_bits(got, want, exact=got.dtype.kind != "f")
    if case == "pairs M8":
        values = np.load(f"{shared_dir}/out.values.npy")
        assert values.dtype == np.dtype(">M8[s]")
        np.testing.assert_array_equal(values, stamps[np.argsort(data, kind="stable")])


@pytest.mark.parametrize("dtype", [">M8[us]", "m8[s]", "bool"])
@pytest.mark.parametrize("budget", [[], ["--device-memory", "1MiB"]])  # in memory, out of core
def test_files_of_bool_and_time_keys_on_the_gpu(shared_dir, dtype, budget):
    """Keys CuPy has no dtype for travel as their stand-ins (keys.StandIns): NumPy's order, NaT
    last in both orders, every bit back in the file's dtype; --verify and check agree."""
    from distsort.cli import main

    rng = np.random.default_rng(9)
    total = 300_001
    if dtype == "bool":
        data = rng.integers(0, 2, total).astype(bool)
    else:
        bits = rng.integers(-10**6, 10**6, total)
        bits[::9] = np.iinfo(np.int64).min  # NaT
        data = bits.view(np.dtype(dtype).newbyteorder("=")).astype(dtype)
    write_file(f"{shared_dir}/t.npy", FileFormat.npy(data.dtype), data)
    native = data.astype(data.dtype.newbyteorder("="))
    for way in ([], ["--descending"]):
        out = f"{shared_dir}/t.out.npy"
        args = ["sort", f"{shared_dir}/t.npy", "-o", out, "--backend", "gpu", "--verify"]
        assert main([*args, "--quiet", *way, *budget]) == 0
        got = np.load(out)
        want = native[bool_or_time_order(native, bool(way))]
        assert got.dtype == data.dtype and got.astype(native.dtype).tobytes() == want.tobytes()
        assert main(["check", f"{shared_dir}/t.npy", out, "--backend", "gpu", *way]) == 0


@pytest.mark.parametrize("budget", [[], ["--device-memory", "1MiB"]])  # in memory, out of core
def test_a_structured_file_sorts_by_its_fields_on_the_gpu(shared_dir, budget):
    """`sort --order a,b --verify` on the GPUs equals NumPy's stable sort by those fields."""
    from distsort.cli import main

    rows = structured_rows(200_003, 4)
    if COMM.Get_rank() == 0:
        np.save(f"{shared_dir}/s.npy", rows)
    COMM.Barrier()
    out = f"{shared_dir}/s.out.npy"
    args = ["sort", f"{shared_dir}/s.npy", "-o", out, "--order", "a,b", "--backend", "gpu"]
    assert main([*args, "--verify", "--quiet", *budget]) == 0
    assert np.load(out).tobytes() == np.sort(rows, order=["a", "b"], kind="stable").tobytes()
