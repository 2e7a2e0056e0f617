"""File formats, positioned reads and the output writer on one process (COMM_SELF)."""

from __future__ import annotations

import errno
import os
import time

import numpy as np
import pytest
from mpi4py import MPI

from distsort import workers
from distsort.errors import DistsortError
from distsort.io import (
    FileFormat,
    ShardWriter,
    detect_format,
    formats,
    npy_header,
    open_input,
    output_format,
    parallel,
    parse_dtype,
    rank_range,
    write_shards,
)
from distsort.payload import stored

SORTABLE = ["i1", "i2", "i4", "i8", "u1", "u2", "u4", "u8", "f2", "f4", "f8"]
ALL_ORDERS = [p + c for c in SORTABLE for p in ("<", ">")]
COMM = MPI.COMM_SELF


def sample(dtype, n: int = 257, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return rng.integers(0, 256, n * np.dtype(dtype).itemsize, dtype=np.uint8).view(dtype)


def leftovers(folder) -> list[str]:
    return sorted(os.listdir(folder))


# ---- rank_range ---------------------------------------------------------------------------------


@pytest.mark.parametrize("count", [0, 1, 2, 7, 100, 2**40 + 3])
@pytest.mark.parametrize("size", [1, 2, 3, 8])
def test_rank_range_is_a_balanced_contiguous_split(count, size):
    ranges = [rank_range(count, r, size) for r in range(size)]
    assert ranges[0][0] == 0 and ranges[-1][1] == count
    assert all(a[1] == b[0] for a, b in zip(ranges, ranges[1:]))
    lengths = [stop - start for start, stop in ranges]
    assert max(lengths) - min(lengths) <= 1
    assert lengths == sorted(lengths, reverse=True)


# ---- detect_format and open_input ---------------------------------------------------------------


@pytest.mark.parametrize("dtype", ALL_ORDERS)
def test_npy_dtype_and_byte_order_come_from_the_header(tmp_path, dtype):
    data = sample(dtype)
    np.save(tmp_path / "a.npy", data)
    fmt = detect_format(tmp_path / "a.npy")
    assert fmt == FileFormat.npy(np.dtype(dtype))
    assert fmt.itemsize == np.dtype(dtype).itemsize
    src = open_input(tmp_path / "a.npy", fmt)
    assert src.count == len(data)
    piece = src.read(3, 200)
    assert piece.dtype.isnative and piece.dtype == np.dtype(dtype).newbyteorder("=")
    assert piece.tobytes() == data[3:200].astype(piece.dtype).tobytes()


def test_npy_found_by_magic_without_suffix(tmp_path):
    with open(tmp_path / "data.bin", "wb") as f:
        np.save(f, np.arange(5, dtype=np.int16))
    assert detect_format(tmp_path / "data.bin") == FileFormat.npy(np.int16)


def test_fortran_ordered_1d_npy_is_fine(tmp_path):
    np.save(tmp_path / "a.npy", np.asfortranarray(np.arange(6.0)))
    assert open_input(tmp_path / "a.npy", detect_format(tmp_path / "a.npy")).read(0, 6)[5] == 5.0


@pytest.mark.parametrize("shape, fortran", [("(-1,)", "False"), ("(3.5,)", "False"),
                                            ("(True,)", "False"), ("(3,)", "'no'")])
def test_an_npy_header_numpy_save_never_writes_is_called_damaged(tmp_path, shape, fortran):
    header = f"{{'descr': '<i4', 'fortran_order': {fortran}, 'shape': {shape}, }}"
    header = header.ljust(118) + "\n"  # 10 + 118 bytes: the data start 64-aligned
    with open(tmp_path / "bad.npy", "wb") as f:
        f.write(b"\x93NUMPY\x01\x00" + len(header).to_bytes(2, "little") + header.encode())
        f.write(np.arange(4, dtype="<i4").tobytes())
    with pytest.raises(DistsortError, match="bad.npy: damaged .npy header"):
        detect_format(tmp_path / "bad.npy")


@pytest.mark.parametrize("dtype", ["<u4", ">u4", "<f8", ">i2", "u1"])
def test_raw_reads_ranges_in_native_order(tmp_path, dtype):
    data = sample(dtype, 100)
    data.tofile(tmp_path / "a.raw")
    fmt = detect_format(tmp_path / "a.raw", dtype=dtype)
    assert fmt == FileFormat.raw(np.dtype(dtype))
    src = open_input(tmp_path / "a.raw", fmt)
    assert src.count == 100
    joined = np.concatenate([src.read(*rank_range(100, r, 3)) for r in range(3)])
    np.testing.assert_array_equal(joined, data)


def test_records_read_as_rows(tmp_path):
    rows = np.arange(30 * 7, dtype=np.uint8).reshape(30, 7)
    rows.tofile(tmp_path / "r.dat")
    fmt = detect_format(tmp_path / "r.dat", record_size=7, key_size=3)
    assert (fmt.kind, fmt.record_size, fmt.key_size, fmt.itemsize) == ("records", 7, 3, 7)
    np.testing.assert_array_equal(open_input(tmp_path / "r.dat", fmt).read(4, 9), rows[4:9])


def test_key_size_defaults_to_the_whole_record(tmp_path):
    np.zeros(20, np.uint8).tofile(tmp_path / "r.dat")
    assert detect_format(tmp_path / "r.dat", record_size=10).key_size == 10


def test_empty_inputs_are_valid(tmp_path):
    np.save(tmp_path / "e.npy", np.zeros(0, np.float32))
    open(tmp_path / "e.raw", "wb").close()
    for path, opts in ((tmp_path / "e.npy", {}), (tmp_path / "e.raw", {"dtype": "u8"})):
        src = open_input(path, detect_format(path, **opts))
        assert src.count == 0 and src.read(0, 0).shape == (0,)


def test_read_outside_the_file_is_a_programming_error(tmp_path):
    np.save(tmp_path / "a.npy", np.arange(4))
    src = open_input(tmp_path / "a.npy", detect_format(tmp_path / "a.npy"))
    with pytest.raises(ValueError):
        src.read(2, 5)


def bad_inputs(tmp_path):
    """(name, path, options, words the message must contain) for every bad-input case."""
    np.save(tmp_path / "two_d.npy", np.zeros((3, 4), np.int32))
    np.save(tmp_path / "fortran.npy", np.asfortranarray(np.zeros((3, 4), np.int32)))
    np.save(tmp_path / "complex.npy", np.zeros(4, np.clongdouble))  # complex64/128 sort
    np.save(tmp_path / "object.npy", np.array([1, "a"], dtype=object), allow_pickle=True)
    np.save(tmp_path / "scalar.npy", np.int32(3))
    np.save(tmp_path / "good.npy", np.arange(3))
    np.save(tmp_path / "trunc.npy", np.arange(100, dtype=np.int64))
    with open(tmp_path / "trunc.npy", "r+b") as f:
        f.truncate(os.path.getsize(tmp_path / "trunc.npy") - 8)
    (tmp_path / "fake.npy").write_bytes(b"hello, not numpy at all")
    (tmp_path / "odd.raw").write_bytes(b"\0" * 10)
    (tmp_path / "ok.raw").write_bytes(b"\0" * 40)
    (tmp_path / "folder").mkdir()
    t = tmp_path
    return [
        ("missing", t / "nope.npy", {}, ["nope.npy", "does not exist"]),
        ("folder", t / "folder", {"dtype": "u4"}, ["folder", "not a file"]),
        ("not npy", t / "fake.npy", {}, ["fake.npy", "not an .npy file"]),
        ("2-d", t / "two_d.npy", {}, ["two_d.npy", "(3, 4)", "1-D"]),
        ("fortran", t / "fortran.npy", {}, ["fortran.npy", "Fortran", "1-D"]),
        ("0-d", t / "scalar.npy", {}, ["scalar.npy", "1-D"]),
        ("complex", t / "complex.npy", {}, ["complex.npy", str(np.dtype(np.clongdouble))]),
        ("object", t / "object.npy", {}, ["object.npy", "object"]),
        ("truncated npy", t / "trunc.npy", {}, ["trunc.npy", "truncated"]),
        ("raw size", t / "odd.raw", {"dtype": "u4"}, ["odd.raw", "10 bytes", "multiple"]),
        ("record size", t / "odd.raw", {"record_size": 4, "key_size": 2}, ["odd.raw", "multiple"]),
        ("unknown dtype", t / "ok.raw", {"dtype": "uint33"}, ["--dtype", "uint33"]),
        ("complex dtype", t / "ok.raw", {"dtype": "complex64"}, ["--dtype", "complex64"]),
        ("string dtype", t / "ok.raw", {"dtype": "S4"}, ["--dtype", "S4"]),
        ("key > record", t / "ok.raw", {"record_size": 4, "key_size": 5}, ["--key-size 5", "4"]),
        ("key zero", t / "ok.raw", {"record_size": 4, "key_size": 0}, ["--key-size"]),
        ("record zero", t / "ok.raw", {"record_size": 0}, ["--record-size"]),
        ("dtype+records", t / "ok.raw", {"dtype": "u4", "record_size": 4}, ["--dtype", "exclude"]),
        ("key alone", t / "ok.raw", {"key_size": 4}, ["--key-size needs --record-size"]),
        ("no options", t / "ok.raw", {}, ["ok.raw", "--dtype", "--record-size"]),
        ("npy+records", t / "two_d.npy", {"record_size": 4}, ["two_d.npy", "--record-size"]),
        ("npy dtype", t / "good.npy", {"dtype": "u2"}, ["--dtype", "does not match"]),
    ]


def test_every_bad_input_gets_a_clear_message(tmp_path):
    for name, path, opts, words in bad_inputs(tmp_path):
        with pytest.raises(DistsortError) as info:
            detect_format(path, **opts)
        for word in words:
            assert word in str(info.value), (name, str(info.value))


def test_unreadable_input(tmp_path, monkeypatch):
    path = tmp_path / "secret.npy"
    np.save(path, np.arange(3))

    def denied(*args, **kwargs):
        raise PermissionError(errno.EACCES, "Permission denied")

    monkeypatch.setattr(formats, "open", denied, raising=False)  # works as root too
    with pytest.raises(DistsortError, match="secret.npy: permission denied"):
        detect_format(path)


def test_file_truncated_after_detection_is_caught_on_read(tmp_path):
    np.arange(100, dtype=np.uint32).tofile(tmp_path / "a.raw")
    src = open_input(tmp_path / "a.raw", detect_format(tmp_path / "a.raw", dtype="u4"))
    with open(tmp_path / "a.raw", "r+b") as f:
        f.truncate(200)
    with pytest.raises(DistsortError, match="ended early"):
        src.read(0, 100)


@pytest.mark.parametrize("kind", ["u4", "f8", ">f8", "records", "U3"])
def test_a_mapped_range_holds_what_a_read_gives_without_a_copy(tmp_path, kind):
    """load(mapped=True) gives a range's rows as a read does, read-only in the file's own pages,
    at any offset (the header, a range starting mid-page); a swapped byte order is read."""
    from distsort.io import staging

    path = tmp_path / "in.npy"
    if kind == "records":
        path = tmp_path / "in.raw"
        sample("u1", 3001 * 10).tofile(path)
        fmt = detect_format(path, record_size=10, key_size=4)
    else:
        data = sample("u4", 3001).astype(kind)
        np.save(path, data)
        fmt = detect_format(path, payload=kind == "U3")  # strings: a values file
    source = open_input(path, fmt)
    for lo, hi in [(0, 3001), (1, 2000), (1023, 1024), (2999, 3001)]:
        read = staging.load(source, lo, hi, np)
        got = staging.load(source, lo, hi, np, mapped=True)
        assert got.dtype == read.dtype and got.shape == read.shape
        assert got.tobytes() == read.tobytes()
        assert got.flags.writeable == (kind == ">f8")  # swapped: read into new memory
    assert source.mapped(5, 5) is None  # an empty range reads as an empty array


def test_a_range_not_in_memory_is_read_not_mapped(tmp_path):
    """Pages on disk come up faster by the reads' threads than by a mapping's faults one by
    one: such a range is read (into new memory), with the same rows."""
    from distsort.io import staging

    data = np.arange(1 << 16, dtype=np.uint32)
    np.save(tmp_path / "in.npy", data)
    source = open_input(tmp_path / "in.npy", detect_format(tmp_path / "in.npy"))
    assert source.mapped(0, len(data)) is not None  # just written: in memory
    with open(tmp_path / "in.npy", "rb") as f:
        os.fsync(f.fileno())  # clean pages may be dropped
        os.posix_fadvise(f.fileno(), 0, 0, os.POSIX_FADV_DONTNEED)
    if source.mapped(0, len(data)) is not None:
        pytest.skip("this file system keeps the file's pages (tmpfs)")
    got = staging.load(source, 0, len(data), np, mapped=True)
    assert got.flags.writeable
    np.testing.assert_array_equal(got, data)


def test_a_file_cut_short_before_it_is_mapped_is_read_and_caught(tmp_path):
    np.arange(100, dtype=np.uint32).tofile(tmp_path / "a.raw")
    src = open_input(tmp_path / "a.raw", detect_format(tmp_path / "a.raw", dtype="u4"))
    with open(tmp_path / "a.raw", "r+b") as f:
        f.truncate(200)
    assert src.mapped(0, 100) is None
    from distsort.io import staging

    with pytest.raises(DistsortError, match="ended early"):
        staging.load(src, 0, 100, np, mapped=True)


def test_parse_dtype_keeps_byte_order():
    assert parse_dtype(">u4") == np.dtype(">u4")
    assert parse_dtype(np.float16) == np.dtype(np.float16)


@pytest.mark.parametrize(
    "path, like, opts, expect",
    [
        ("o.npy", FileFormat.raw(">i4"), {}, FileFormat.npy(">i4")),
        ("o.bin", FileFormat.npy("f8"), {}, FileFormat.raw("f8")),
        ("o.npy", None, {"dtype": "u2"}, FileFormat.npy("u2")),
        ("o.dat", None, {"record_size": 100, "key_size": 10}, FileFormat.records(100, 10)),
    ],
)
def test_output_format(path, like, opts, expect):
    assert output_format(path, like, **opts) == expect


def test_records_cannot_be_written_as_npy():
    with pytest.raises(DistsortError, match="does not end in .npy"):
        output_format("out.npy", FileFormat.records(100, 10))


def test_file_format_rejects_unsortable_dtypes():
    with pytest.raises(DistsortError):
        FileFormat.raw("O")
    with pytest.raises(DistsortError):
        FileFormat.records(4, 8)


# ---- writer on one rank -------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", ALL_ORDERS)
def test_npy_round_trip_every_dtype(tmp_path, dtype):
    data = sample(dtype).astype(np.dtype(dtype).newbyteorder("="))
    fmt = FileFormat.npy(dtype)
    write_shards(COMM, tmp_path / "o.npy", fmt, data)
    back = np.load(tmp_path / "o.npy")
    assert back.dtype == np.dtype(dtype)
    assert back.tobytes() == data.astype(dtype).tobytes()
    assert detect_format(tmp_path / "o.npy") == fmt
    assert leftovers(tmp_path) == ["o.npy"]


def test_npy_header_matches_numpy(tmp_path):
    for dtype, n in (("<u4", 0), (">f2", 7), ("i8", 2**40)):
        np.save(tmp_path / "ref.npy", np.zeros(0, dtype))
        ref = (tmp_path / "ref.npy").read_bytes()
        assert npy_header(np.dtype(dtype), 0) == ref
        assert len(npy_header(np.dtype(dtype), n)) % 64 == 0


def test_raw_and_records_round_trip(tmp_path):
    rows = np.random.default_rng(3).integers(0, 256, (50, 100), dtype=np.uint8)
    write_shards(COMM, tmp_path / "r.dat", FileFormat.records(100, 10), rows)
    assert (tmp_path / "r.dat").read_bytes() == rows.tobytes()
    values = np.arange(10, dtype=np.float32)
    write_shards(COMM, tmp_path / "v.raw", FileFormat.raw(">f4"), values)
    assert (tmp_path / "v.raw").read_bytes() == values.astype(">f4").tobytes()


def test_pieces_written_out_of_order_land_in_place(tmp_path, write_mode):
    data = np.arange(1000, dtype=np.int64)
    with ShardWriter(tmp_path / "o.npy", FileFormat.npy("i8"), 1000, COMM) as w:
        for start in (900, 0, 500, 100):
            stop = {900: 1000, 0: 100, 500: 900, 100: 500}[start]
            w.write(start, data[start:stop])
        w.commit()
    np.testing.assert_array_equal(np.load(tmp_path / "o.npy"), data)


def test_empty_output(tmp_path):
    write_shards(COMM, tmp_path / "e.npy", FileFormat.npy("u4"), np.zeros(0, np.uint32))
    assert np.load(tmp_path / "e.npy").shape == (0,)


def test_existing_output_is_replaced_only_on_commit(tmp_path):
    out = tmp_path / "o.raw"
    out.write_bytes(b"old")
    with ShardWriter(out, FileFormat.raw("u1"), 3, COMM) as w:
        w.write(0, np.array([1, 2, 3], np.uint8))
        temp = w.temp
        assert os.path.basename(temp).startswith(".") and "distsort-tmp" in temp
        assert os.path.dirname(temp) == str(tmp_path)
        assert out.read_bytes() == b"old"
        w.commit()
    assert out.read_bytes() == b"\1\2\3"
    assert leftovers(tmp_path) == ["o.raw"]


def test_leaving_without_commit_or_on_error_removes_the_temp_file(tmp_path):
    with ShardWriter(tmp_path / "a.raw", FileFormat.raw("u1"), 3, COMM):
        pass
    with pytest.raises(RuntimeError), ShardWriter(tmp_path / "b", FileFormat.raw("u1"), 3, COMM):
        raise RuntimeError("boom")
    assert leftovers(tmp_path) == []


def test_output_permissions_follow_the_umask(tmp_path):
    old = os.umask(0o022)
    try:
        write_shards(COMM, tmp_path / "o.raw", FileFormat.raw("u1"), np.zeros(2, np.uint8))
    finally:
        os.umask(old)
    assert (tmp_path / "o.raw").stat().st_mode & 0o777 == 0o644


@pytest.mark.parametrize("size", [2, 1 << 20])  # renamed over, names exchanged (FREE_LATER)
def test_a_replaced_output_keeps_its_permissions(tmp_path, monkeypatch, size):
    from distsort.io import writer

    monkeypatch.setattr(writer, "FREE_LATER", 1 << 16)
    out = tmp_path / "o.raw"
    out.write_bytes(b"old" * size)
    out.chmod(0o640)
    write_shards(COMM, out, FileFormat.raw("u1"), np.ones(size, np.uint8))
    assert out.read_bytes() == b"\x01" * size and out.stat().st_mode & 0o777 == 0o640


def test_wrong_pieces_are_programming_errors(tmp_path):
    with ShardWriter(tmp_path / "o.raw", FileFormat.raw("u4"), 4, COMM) as w:
        with pytest.raises(ValueError):
            w.write(2, np.zeros(3, np.uint32))  # past the end
        with pytest.raises(ValueError):
            w.write(0, np.zeros(2, np.float32))  # wrong dtype
    with ShardWriter(tmp_path / "r.dat", FileFormat.records(8, 2), 4, COMM) as w:
        with pytest.raises(ValueError):
            w.write(0, np.zeros((2, 7), np.uint8))
    assert leftovers(tmp_path) == []


def expect_write_failure(path, words, total=4):
    with pytest.raises(DistsortError) as info:
        write_shards(COMM, path, FileFormat.raw("u1"), np.zeros(total, np.uint8))
    for word in words:
        assert word in str(info.value)


def test_output_folder_missing(tmp_path):
    expect_write_failure(tmp_path / "no" / "o.raw", ["o.raw", "does not exist"])
    assert leftovers(tmp_path) == []


@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="Linux's /proc")
def test_output_in_a_folder_that_takes_no_files():
    expect_write_failure("/proc/o.raw", ["/proc takes no new files"])


def test_output_inside_a_regular_file(tmp_path):
    (tmp_path / "file").write_bytes(b"x")
    expect_write_failure(tmp_path / "file" / "o.raw", ["o.raw", "regular file"])
    assert leftovers(tmp_path) == ["file"]


def test_output_is_a_folder(tmp_path):
    (tmp_path / "dir").mkdir()
    expect_write_failure(tmp_path / "dir", ["dir", "folder"])
    assert leftovers(tmp_path) == ["dir"]


def test_output_folder_not_writable(tmp_path, monkeypatch):
    def denied(*args, **kwargs):
        raise PermissionError(errno.EACCES, "Permission denied")

    monkeypatch.setattr(os, "open", denied)  # as if the folder were read-only, even for root
    expect_write_failure(tmp_path / "o.raw", ["o.raw", "no permission to write in"])
    assert leftovers(tmp_path) == []


def test_disk_too_small_is_found_before_writing(tmp_path, monkeypatch):
    real = os.statvfs(tmp_path)

    class Tiny:
        f_blocks, f_bavail, f_frsize = real.f_blocks, 1, 1

    monkeypatch.setattr(os, "statvfs", lambda path: Tiny)
    expect_write_failure(tmp_path / "o.raw", ["o.raw", "no space left", "4 bytes"])
    assert leftovers(tmp_path) == []


@pytest.mark.parametrize("write_mode", ["positioned"], indirect=True)
def test_disk_full_while_writing_fails_at_commit(tmp_path, monkeypatch, write_mode):
    def full(fd, data, offset):
        raise OSError(errno.ENOSPC, "No space left on device")

    with ShardWriter(tmp_path / "o.raw", FileFormat.raw("u1"), 4, COMM) as w:
        monkeypatch.setattr(os, "pwritev", full)
        w.write(0, np.zeros(4, np.uint8))  # kept, not raised
        with pytest.raises(DistsortError, match="no space left"):
            w.commit()
    assert leftovers(tmp_path) == []


@pytest.mark.parametrize("write_mode", ["positioned"], indirect=True)
def test_partial_writes_are_continued(tmp_path, monkeypatch, write_mode):
    real, calls = os.pwritev, []

    def short(fd, buffers, offset):
        calls.append(offset)
        return real(fd, [memoryview(buffers[0])[:3]], offset)

    monkeypatch.setattr(os, "pwritev", short)
    data = np.arange(20, dtype=np.uint8)
    write_shards(COMM, tmp_path / "o.raw", FileFormat.raw("u1"), data)
    assert (tmp_path / "o.raw").read_bytes() == data.tobytes()
    assert len(calls) == 7  # 20 bytes, 3 at a time


def test_partial_reads_are_continued(tmp_path, monkeypatch):
    data = np.arange(1000, dtype=np.uint32)
    data.tofile(tmp_path / "i.raw")
    real, calls = os.preadv, []

    def short(fd, buffers, offset):
        calls.append(offset)
        return real(fd, [memoryview(buffers[0])[:7]], offset)

    monkeypatch.setattr(os, "preadv", short)
    got = open_input(tmp_path / "i.raw", FileFormat.raw("u4")).read(10, 990)
    assert np.array_equal(got, data[10:990]) and len(calls) == -(-980 * 4 // 7)


@pytest.mark.parametrize("threads", [1, 3])
def test_pieces_spread_over_threads_land_in_place(tmp_path, monkeypatch, threads, write_mode):
    """Ranges of many I/O pieces (odd sizes, odd offsets), big-endian, read and written by
    one thread or several, come back exactly."""
    monkeypatch.setattr(parallel, "PIECE", 4096 + 8)
    workers.use_threads(threads)
    try:
        data = np.random.default_rng(threads).integers(0, 2**62, 100_003).astype(">i8")
        fmt = FileFormat.npy(">i8")
        write_shards(COMM, tmp_path / "o.npy", fmt, data[::-1].copy())
        source = open_input(tmp_path / "o.npy", fmt)
        assert np.array_equal(source.read(3, 99_999), data[::-1][3:99_999])
        assert np.array_equal(np.load(tmp_path / "o.npy"), data[::-1])
    finally:
        workers.use_threads(8)


def test_rows_of_stored_bytes_are_written_as_their_elements(tmp_path):
    """Values the sort carried as their bytes (payload.stored) go back into their file as the
    file's elements, in its byte order."""
    when = np.array(["2020-01-01", "1970-01-02", "2262-04-11"], dtype=">M8[s]")
    names = np.array(["a", "bcd", ""], dtype="U3")
    native = stored(when.astype("M8[s]"))  # uint64 words in native byte order
    write_shards(COMM, tmp_path / "w.npy", FileFormat.npy(">M8[s]", payload=True), native)
    write_shards(COMM, tmp_path / "n.npy", FileFormat.npy("U3", payload=True), stored(names))
    assert np.load(tmp_path / "w.npy").dtype == np.dtype(">M8[s]")
    assert np.array_equal(np.load(tmp_path / "w.npy"), when)
    assert np.array_equal(np.load(tmp_path / "n.npy"), names)


def test_offsets_beyond_4_gib(tmp_path, monkeypatch, write_mode):
    """A sparse 5 GiB file: pieces written and read back past 2^32 bytes land where they should."""
    monkeypatch.setattr(os, "statvfs", lambda path: type("Roomy", (), {"f_blocks": 0}))
    total = 5 * 2**30 // 8
    far = 2**32 // 8 + 3
    piece = np.arange(10, dtype=np.uint64) + 2**40
    with ShardWriter(tmp_path / "big.raw", FileFormat.raw("u8"), total, COMM) as w:
        w.write(far, piece)
        w.write(total - 1, piece[:1])
        w.commit()
    src = open_input(tmp_path / "big.raw", detect_format(tmp_path / "big.raw", dtype="u8"))
    assert src.count == total
    np.testing.assert_array_equal(src.read(far - 1, far + 11), np.r_[0, piece, 0])
    assert src.read(total - 1, total)[0] == piece[0]


def test_blocks_are_reserved_and_the_bytes_copied_into_a_mapping(tmp_path, monkeypatch):
    """Where the file system allocates ahead, the temporary file has every block before a
    byte is written, and no positioned write carries the data (a mapping does)."""
    fmt, data = FileFormat.npy("u8"), np.arange(100_000, dtype=np.uint64)
    writes = []
    real = os.pwritev
    with ShardWriter(tmp_path / "o.npy", fmt, len(data), COMM) as w:
        blocks = os.stat(w.temp).st_blocks * 512
        if blocks == 0:
            pytest.skip("this file system allocates no blocks ahead (fallocate)")
        assert blocks >= w.nbytes
        monkeypatch.setattr(os, "pwritev", lambda *a: writes.append(a) or real(*a))
        w.write(0, data)
        w.commit()
    assert writes == []
    np.testing.assert_array_equal(np.load(tmp_path / "o.npy"), data)


@pytest.mark.parametrize("code", [errno.EOPNOTSUPP, errno.ENOSYS])
def test_where_blocks_cannot_be_reserved_the_file_is_sparse_and_written(tmp_path, monkeypatch,
                                                                        code):
    def unsupported(fd, nbytes):
        raise OSError(code, os.strerror(code))

    monkeypatch.setattr(parallel, "_fallocate", unsupported)
    data = np.arange(5000, dtype=np.int32)
    writes = []
    real = os.pwritev
    monkeypatch.setattr(os, "pwritev", lambda *a: writes.append(a) or real(*a))
    write_shards(COMM, tmp_path / "o.npy", FileFormat.npy("i4"), data)
    assert len(writes) == 2  # the header, then the data
    np.testing.assert_array_equal(np.load(tmp_path / "o.npy"), data)


def test_a_disk_too_full_for_the_blocks_fails_before_writing(tmp_path, monkeypatch):
    def full(fd, nbytes):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(parallel, "_fallocate", full)
    expect_write_failure(tmp_path / "o.raw", ["o.raw", "no space left", "4 bytes"])
    assert leftovers(tmp_path) == []


@pytest.mark.parametrize("write_mode", ["mapped"], indirect=True)
def test_a_file_system_that_maps_no_files_is_written(tmp_path, monkeypatch, write_mode):
    def refused(*args, **kwargs):
        raise OSError(errno.ENODEV, "No such device")

    monkeypatch.setattr(parallel.mmap, "mmap", refused)
    data = np.arange(3000, dtype=np.float64)
    write_shards(COMM, tmp_path / "o.npy", FileFormat.npy("f8"), data)
    np.testing.assert_array_equal(np.load(tmp_path / "o.npy"), data)


@pytest.mark.parametrize("write_mode", ["mapped"], indirect=True)
def test_a_writer_maps_its_file_once_for_all_its_writes(tmp_path, monkeypatch, write_mode):
    """Piece after piece, as the out-of-core rounds write, into one mapping (a mapping a write
    call wrote half as fast: bench/RESULTS.md, run 223)."""
    real, maps = parallel.mmap.mmap, []
    monkeypatch.setattr(parallel.mmap, "mmap", lambda *a, **k: maps.append(a) or real(*a, **k))
    data = np.arange(4000, dtype=np.uint32)
    with ShardWriter(tmp_path / "o.npy", FileFormat.npy("u4"), len(data), COMM) as w:
        for lo in (3000, 0, 2000, 1000):
            w.write(lo, data[lo : lo + 1000])
        w.commit()
    assert len(maps) == 1
    np.testing.assert_array_equal(np.load(tmp_path / "o.npy"), data)


@pytest.mark.parametrize("sharers, most", [(1, 16), (4, 4), (64, 1)])
def test_the_ranks_of_a_node_copy_into_a_mapping_with_a_share_of_its_writers(
        tmp_path, monkeypatch, sharers, most):
    """All the node's ranks' threads copying into one file's mapping at once stall each other
    (bench/RESULTS.md, run 305): a rank of `sharers` copies each write in at most
    NODE_MAPPED_WRITERS / sharers pieces, every byte written."""
    pieces = []
    real = parallel.spread
    monkeypatch.setattr(parallel, "spread", lambda work, n, piece: pieces.append(
        -(-n // piece)) or real(work, n, piece))
    data = np.random.default_rng(0).integers(0, 256, 64 << 20, dtype=np.uint8)
    fd = os.open(tmp_path / "f", os.O_RDWR | os.O_CREAT)
    try:
        os.ftruncate(fd, len(data) + 100)
        target = parallel.FileRange(fd, 100, len(data), mapped=True, sharers=sharers)
        target.write(data, 0)
        target.close()
    finally:
        os.close(fd)
    assert pieces == [most] and parallel.NODE_MAPPED_WRITERS == 16
    assert (tmp_path / "f").read_bytes()[100:] == data.tobytes()


def test_a_mapping_still_viewed_is_closed_without_error(tmp_path):
    """An interrupted write's traceback holds a view of the mapping while the writer aborts
    (Ctrl-C under mpiexec): closing it raises nothing, and what was written stays."""
    path = tmp_path / "f"
    fd = os.open(path, os.O_RDWR | os.O_CREAT)
    try:
        os.ftruncate(fd, 8192)
        target = parallel.FileRange(fd, 100, 4000, mapped=True)
        target.write(np.full(10, 7, np.uint8), 0)
        held = target._bytes[:10]  # as a frame of the interrupted copy holds its slice
        target.close()
        target.close()
        assert held.sum() == 70
    finally:
        os.close(fd)
    assert path.read_bytes()[100:110] == bytes([7] * 10)


def test_values_files_take_any_fixed_size_dtype(tmp_path):
    """A values file is a payload (--values): datetime64, strings and records too, not objects;
    its errors name --values-dtype."""
    stamps = tmp_path / "t.npy"
    np.save(stamps, np.arange(5).astype("datetime64[s]"))
    assert detect_format(stamps).dtype == np.dtype("datetime64[s]")  # keys too (NaT last)
    fmt = detect_format(stamps, payload=True)
    assert fmt.dtype == np.dtype("datetime64[s]") and fmt.payload
    assert open_input(stamps, fmt).read(1, 3).tolist() == np.arange(1, 3).astype("M8[s]").tolist()
    assert output_format(tmp_path / "o.npy", like=fmt).payload
    raw = tmp_path / "n.raw"
    raw.write_bytes(b"abcdefg" * 2)
    assert detect_format(raw, "S7", payload=True).dtype == np.dtype("S7")
    with pytest.raises(DistsortError, match="--values-dtype"):
        detect_format(raw, "S8", payload=True)  # 14 bytes: not whole elements
    with pytest.raises(DistsortError, match="unknown --values-dtype 'bogus'"):
        detect_format(raw, "bogus", payload=True)
    objects = tmp_path / "o.npy"
    np.save(objects, np.array(["a", 1], dtype=object), allow_pickle=True)
    with pytest.raises(DistsortError, match="Python objects"):
        detect_format(objects, payload=True)


@pytest.mark.parametrize("exchange", [True, False])
def test_an_old_output_is_replaced_at_once_and_freed_by_another_process(tmp_path, monkeypatch,
                                                                        exchange):
    """Publishing over an existing large output: the new bytes are there when commit returns;
    the old file, swapped to the temporary name, is removed by a process of its own (the writer
    waits neither for ext4's flush nor for the pages to be freed), which we wait for. Where the
    names cannot be swapped, a plain rename."""
    from distsort.io import writer as writer_module

    started = []
    real = writer_module.remove_later
    monkeypatch.setattr(writer_module, "remove_later", lambda p: started.append(p) or real(p))
    monkeypatch.setattr(writer_module, "FREE_LATER", 1)
    if not exchange:
        monkeypatch.setattr(writer_module, "_exchange", lambda a, b: False)
    out = tmp_path / "o.npy"
    write_shards(COMM, out, FileFormat.npy("u4"), np.arange(1000, dtype=np.uint32))
    assert started == []  # nothing was there before
    write_shards(COMM, out, FileFormat.npy("u4"), np.arange(5, dtype=np.uint32))
    assert np.array_equal(np.load(out), np.arange(5, dtype=np.uint32))
    assert len(started) == int(exchange)
    deadline = time.monotonic() + 60
    while started and os.path.exists(started[0]) and time.monotonic() < deadline:
        time.sleep(0.01)  # polling for the remover's end: the event this test waits for
    assert leftovers(tmp_path) == ["o.npy"]


def test_a_symlinked_output_is_replaced_not_its_target(tmp_path, monkeypatch):
    from distsort.io import writer as writer_module

    monkeypatch.setattr(writer_module, "FREE_LATER", 1)
    target = tmp_path / "t.npy"
    np.save(target, np.zeros(3, np.uint32))
    os.symlink(target, tmp_path / "o.npy")
    write_shards(COMM, tmp_path / "o.npy", FileFormat.npy("u4"), np.ones(2, np.uint32))
    assert not os.path.islink(tmp_path / "o.npy") and np.load(target).tolist() == [0, 0, 0]
    assert leftovers(tmp_path) == ["o.npy", "t.npy"]


@pytest.mark.parametrize("durable", [False, True])
def test_the_output_is_flushed_to_disk_only_when_asked(tmp_path, monkeypatch, durable):
    synced = []
    real = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: synced.append(fd) or real(fd))
    with ShardWriter(tmp_path / "o.raw", FileFormat.raw("u1"), 3, COMM, durable) as w:
        w.write(0, np.arange(3, dtype=np.uint8))
        w.commit()
    assert (tmp_path / "o.raw").read_bytes() == bytes([0, 1, 2])
    assert len(synced) == (2 if durable else 0)  # the file, then its folder
