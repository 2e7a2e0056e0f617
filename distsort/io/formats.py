"""The three file formats distsort reads and writes, and how a file's format is found.

- npy: a NumPy ``.npy`` file holding a 1-D array of a sortable dtype (the dtype and byte order come
  from the header; the data follow the header).
- raw: headerless binary of one dtype, given by ``--dtype`` (byte order as written, e.g. ``>u4``).
- records: headerless fixed-size byte records (``--record-size``), ordered by their first
  ``--key-size`` bytes compared as unsigned bytes (memcmp), e.g. the Sort Benchmark's gensort files.

A values file (``--values``, permuted along with the keys) is a payload: any fixed-size dtype
(datetime64, strings, structured records too; payload.py), not only sortable ones.

Every problem a user can cause (missing file, wrong options, a file that does not match them) is a
DistsortError whose message names the file or option and says what to do.
"""

from __future__ import annotations

import ast
import os
import stat
from dataclasses import dataclass

import numpy as np
import numpy.lib.format as npformat

from ..errors import DistsortError
from ..fields import by_fields, sortable
from ..keys import StandIns, check_sortable, stand_ins
from ..payload import check_payload, stored

NPY_MAGIC = b"\x93NUMPY"
KINDS = ("npy", "raw", "records")
_MAX_NPY_HEADER = 1 << 20


@dataclass(frozen=True)
class FileFormat:
    """How the elements of a file are laid out; independent of any one file's size or header."""

    kind: str
    dtype: np.dtype | None = None
    record_size: int | None = None
    key_size: int | None = None
    payload: bool = False  # values carried with the keys: any fixed-size dtype

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"unknown format kind {self.kind!r}; expected one of {KINDS}")
        if self.kind == "records":
            if self.dtype is not None:
                raise ValueError("a records format has no dtype")
            check_record_sizes(self.record_size, self.key_size)
        else:
            if self.dtype is None or self.record_size is not None or self.key_size is not None:
                raise ValueError(f"a {self.kind} format takes a dtype and no record sizes")
            check = check_payload if self.payload else sortable
            object.__setattr__(self, "dtype", check(np.dtype(self.dtype)))

    @classmethod
    def npy(cls, dtype, payload: bool = False) -> FileFormat:
        return cls("npy", dtype=np.dtype(dtype), payload=payload)

    @classmethod
    def raw(cls, dtype, payload: bool = False) -> FileFormat:
        return cls("raw", dtype=np.dtype(dtype), payload=payload)

    @classmethod
    def records(cls, record_size: int, key_size: int, payload: bool = False) -> FileFormat:
        return cls("records", record_size=record_size, key_size=key_size, payload=payload)

    @property
    def itemsize(self) -> int:
        """Bytes per element (or per record) in the file."""
        return self.record_size if self.kind == "records" else self.dtype.itemsize

    @property
    def native_dtype(self) -> np.dtype:
        """The dtype of arrays read from the file: native byte order, uint8 rows for records."""
        return np.dtype(np.uint8) if self.kind == "records" else self.dtype.newbyteorder("=")

    def empty_like(self) -> np.ndarray:
        """No elements of the file's dtype (native byte order; records as uint8 rows)."""
        return np.empty((0, self.record_size) if self.kind == "records" else 0, self.native_dtype)

    def empty_rows(self) -> np.ndarray:
        """No elements, in the form every backend moves them (dtype and row shape): records
        as (n, record_size) uint8 rows, elements as payload.stored gives them (datetime64 as
        uint64, strings as rows of bytes)."""
        if self.kind == "records":
            return np.empty((0, self.record_size), np.uint8)
        return stored(np.empty(0, self.native_dtype))

    @property
    def structured(self) -> bool:
        """Whether the elements sort by their fields (fields.py): structured ones, bytes,
        strings and complex numbers."""
        return self.dtype is not None and by_fields(self.dtype)

    def stand_ins(self, descending: bool) -> StandIns | None:
        """The keys' StandIns where they are bool, datetime64 or timedelta64 (the file holds
        their bits, and they sort as their stand-ins); None for numbers and records."""
        return None if self.kind == "records" else stand_ins(self.native_dtype, descending)

    def describe(self) -> str:
        if self.kind == "records":  # values' records have no key
            key = "" if self.payload else f" with {self.key_size}-byte keys"
            return f"{self.record_size}-byte records{key}"
        return f"{self.kind} {self.dtype.str if self.dtype.byteorder == '>' else self.dtype}"


def check_record_sizes(record_size, key_size) -> None:
    """Raise a DistsortError unless 0 < key_size <= record_size (both integers)."""
    for name, value in (("--record-size", record_size), ("--key-size", key_size)):
        if not isinstance(value, (int, np.integer)) or isinstance(value, bool) or value <= 0:
            raise DistsortError(f"{name} must be a positive whole number of bytes, not {value!r}")
    if key_size > record_size:
        raise DistsortError(
            f"--key-size {key_size} is larger than --record-size {record_size}: the key is a "
            "prefix of each record, so give a key size of at most the record size"
        )


def parse_dtype(text, option: str = "--dtype", payload: bool = False) -> np.dtype:
    """A dtype name or object -> a sortable np.dtype (payload: any the sort can carry), or a
    DistsortError naming the option."""
    try:
        dtype = np.dtype(text)
    except (TypeError, ValueError, SyntaxError):
        kinds = ("a NumPy dtype such as int64, datetime64[ns], S16" if payload else
                 "a NumPy integer or float type such as uint32, int64, float32")
        raise DistsortError(
            f"unknown {option} {text!r}: give {kinds} (prefix '>' for big-endian, e.g. '>u4')"
        ) from None
    try:
        return check_payload(dtype) if payload else check_sortable(dtype)
    except DistsortError as exc:
        raise DistsortError(f"{option} {text!r}: {exc}") from None


@dataclass(frozen=True)
class NpyLayout:
    """Where the data of an .npy file lie: dtype, element count and byte offset of element 0."""

    dtype: np.dtype
    count: int
    offset: int


def npy_layout(path, payload: bool = False) -> NpyLayout:
    """Read and check the header of an .npy file meant to hold a 1-D array of sortable keys (or,
    payload, of values of any fixed-size dtype)."""
    with _open_input(path) as f:
        head = f.read(12)
        if not head.startswith(NPY_MAGIC):
            raise DistsortError(
                f"{path} is not an .npy file (no NPY header): write it with numpy.save, or give "
                "--dtype (raw binary) or --record-size/--key-size (records) and a name without .npy"
            )
        header = _read_npy_header(path, f, head)
        size = os.fstat(f.fileno()).st_size
    return _checked_layout(path, header, _header_end(head), size, payload)


def _header_end(head: bytes) -> int:
    if head[6] == 1:
        return 10 + int.from_bytes(head[8:10], "little")
    return 12 + int.from_bytes(head[8:12], "little")


def _read_npy_header(path, f, head: bytes) -> dict:
    major = head[6] if len(head) > 6 else 0
    if major not in (1, 2, 3) or len(head) < 12:
        raise DistsortError(f"{path}: unsupported or damaged .npy header; re-save it")
    start = 10 if major == 1 else 12
    length = _header_end(head) - start
    if length > _MAX_NPY_HEADER:
        raise DistsortError(f"{path}: .npy header of {length} bytes is damaged; re-save the file")
    f.seek(start)
    text = f.read(length)
    try:
        header = ast.literal_eval(text.decode("utf8" if major == 3 else "latin1"))
        if not isinstance(header, dict) or set(header) != {"descr", "fortran_order", "shape"}:
            raise ValueError("unexpected keys")
        shape = header["shape"]
        if not (isinstance(shape, tuple) and all(type(n) is int and n >= 0 for n in shape)
                and isinstance(header["fortran_order"], bool)):
            raise ValueError("a shape or an order that numpy.save never writes")
        header["descr"] = npformat.descr_to_dtype(header["descr"])
        return header
    except (ValueError, SyntaxError, TypeError, UnicodeDecodeError):
        raise DistsortError(
            f"{path}: damaged .npy header; re-save the array with numpy.save"
        ) from None


def _checked_layout(path, header: dict, offset: int, size: int, payload: bool) -> NpyLayout:
    shape = header["shape"]
    if not isinstance(shape, tuple) or len(shape) != 1:
        order = " (Fortran order)" if header["fortran_order"] else ""
        raise DistsortError(f"{path} holds an array of shape {shape}{order}, " + (
            "but a values file holds one value per key: write the rows as raw bytes "
            "(a.tofile(path)) and give --values-record-size with the bytes of one row"
            if payload else
            "but distsort sorts 1-D arrays: save a 1-D array (e.g. numpy.save(path, a.ravel()))"))
    dtype = header["descr"]
    try:
        check_payload(dtype) if payload else sortable(dtype)
    except DistsortError as exc:
        raise DistsortError(f"{path}: {exc}") from None
    count = int(shape[0])
    if size < offset + count * dtype.itemsize:
        raise DistsortError(
            f"{path} is truncated: its header says {count} elements of {dtype} "
            f"({count * dtype.itemsize} bytes) but it holds {max(size - offset, 0)} bytes of data"
        )
    return NpyLayout(dtype=dtype, count=count, offset=offset)


def ensure_file(path, role: str = "input") -> None:
    """Raise a DistsortError unless path names a regular file: not missing, not a folder, and
    not read as a stream (a pipe, a device, a socket: distsort reads files at positions, and
    opening a pipe would block until something writes to it)."""
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        raise DistsortError(f"{role} file {path} does not exist: check the path") from None
    except OSError as exc:
        raise DistsortError(f"cannot read {role} file {path}: {exc.strerror}") from None
    if stat.S_ISDIR(mode):
        raise DistsortError(f"{role} {path} is a folder, not a file: give a file")
    if not stat.S_ISREG(mode):
        raise DistsortError(f"{role} {path} is not a regular file (a pipe, a device or a "
                            "socket): distsort reads files at positions; save the data to a "
                            "file first")


def _open_input(path):
    ensure_file(path)
    try:
        return open(path, "rb")
    except PermissionError:
        raise DistsortError(f"cannot read input file {path}: permission denied") from None
    except OSError as exc:
        raise DistsortError(f"cannot read input file {path}: {exc.strerror}") from None


def is_npy(path) -> bool:
    """True if path is named .npy or starts with the NPY magic (DistsortError if unreadable)."""
    with _open_input(path) as f:
        magic = f.read(len(NPY_MAGIC))
    return magic == NPY_MAGIC or os.fspath(path).lower().endswith(".npy")


def _check_options(dtype, record_size, key_size) -> None:
    if dtype is not None and (record_size is not None or key_size is not None):
        raise DistsortError(
            "--dtype and --record-size/--key-size exclude each other: give --dtype for raw "
            "numbers or --record-size/--key-size for byte records"
        )
    if key_size is not None and record_size is None:
        raise DistsortError("--key-size needs --record-size: give both for record files")


def _records_format(record_size, key_size, payload: bool = False) -> FileFormat:
    key_size = record_size if key_size is None else key_size
    check_record_sizes(record_size, key_size)
    return FileFormat.records(int(record_size), int(key_size), payload)


def detect_format(path, dtype=None, record_size=None, key_size=None,
                  payload: bool = False) -> FileFormat:
    """The format of an existing input file, from its name/header and the command-line options.

    `.npy` (by suffix or NPY magic) -> npy, dtype from the header (--dtype, if given, must agree);
    --dtype -> raw; --record-size (and --key-size, default the whole record) -> records.
    payload: a values file (--values-dtype), of any fixed-size dtype.
    """
    _check_options(dtype, record_size, key_size)
    if is_npy(path):
        fmt = _npy_format(path, dtype, record_size, payload)
    elif record_size is not None:
        fmt = _records_format(record_size, key_size, payload)
    elif dtype is not None:
        fmt = FileFormat.raw(parse_dtype(dtype, _dtype_option(payload), payload), payload)
    elif payload:  # a values file: its own options
        raise DistsortError(
            f"cannot tell the format of {path}: it is not an .npy file; give --values-dtype "
            "for raw binary values or --values-record-size for fixed-size records"
        )
    else:
        raise DistsortError(
            f"cannot tell the format of {path}: it is not an .npy file; give --dtype for raw "
            "binary numbers or --record-size/--key-size for fixed-size records"
        )
    if fmt.kind != "npy":
        check_size(path, fmt)
    return fmt


def _dtype_option(payload: bool) -> str:
    return "--values-dtype" if payload else "--dtype"


def _npy_format(path, dtype, record_size, payload: bool) -> FileFormat:
    if record_size is not None:
        options = "--values-record-size is" if payload else "--record-size/--key-size are"
        raise DistsortError(f"{path} is an .npy file; {options} for raw record files: leave "
                            "them out")
    layout, option = npy_layout(path, payload), _dtype_option(payload)
    if dtype is not None and parse_dtype(dtype, option, payload) != layout.dtype:
        raise DistsortError(
            f"{option} {dtype} does not match {path}, whose header says {layout.dtype}: "
            f"leave out {option} for .npy files"
        )
    return FileFormat.npy(layout.dtype, payload)


def check_size(path, fmt: FileFormat) -> int:
    """Size check of a raw/records input; returns its element count."""
    with _open_input(path) as f:
        size = os.fstat(f.fileno()).st_size
    if size % fmt.itemsize:
        unit, option = ("record size", "--record-size") if fmt.kind == "records" else (
            f"size of {fmt.dtype}", _dtype_option(fmt.payload))
        raise DistsortError(
            f"{path} holds {size} bytes, not a multiple of the {unit} ({fmt.itemsize} bytes): "
            f"check {option}, or whether the file is truncated"
        )
    return size // fmt.itemsize


def output_format(path, like: FileFormat | None = None, dtype=None, record_size=None,
                  key_size=None) -> FileFormat:
    """The format to write `path` in: like another format (e.g. the input's) or from options.

    A name ending in .npy gives an .npy file of the same dtype; other names give raw binary (or
    records, which cannot be stored as .npy).
    """
    _check_options(dtype, record_size, key_size)
    if like is None:
        if record_size is not None:
            like = _records_format(record_size, key_size)
        elif dtype is not None:
            like = FileFormat.raw(parse_dtype(dtype))
        else:
            raise DistsortError(f"give --dtype or --record-size/--key-size to write {path}")
    wants_npy = os.fspath(path).lower().endswith(".npy")
    if os.fspath(path).lower().endswith(".npz"):  # raw bytes under that name would mislead
        raise DistsortError(f"cannot write {path}: distsort writes .npy files and raw binary, "
                            "not .npz archives; name the output .npy (or .bin for raw)")
    if like.kind == "records":
        if wants_npy:
            raise DistsortError(
                f"cannot write records to {path}: record files are raw bytes; "
                "choose an output name that does not end in .npy"
            )
        return like
    return FileFormat("npy" if wants_npy else "raw", dtype=like.dtype, payload=like.payload)
