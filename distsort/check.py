"""Proof that an output is its input sorted: counts, an order-independent checksum, and order.

The checksum hashes the full bytes of every element (or record) with a strong 64-bit mixer and
adds the hashes mod 2^64, so it does not depend on order or on how the data are split over ranks,
while a changed, lost or duplicated element changes it (up to a 2^-64 chance). It is computed
with the same integer operations on NumPy and CuPy arrays, so both give the same value (words are
read in the machine's byte order, little-endian on every supported machine).

Order follows the product rules through keys.py: NaN last in both orders, -0.0 equal to 0.0 (the
canonical encoding), records by memcmp of their key prefix; structured rows, bytes and strings
by their fields' byte keys (fields.py), on the host.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from itertools import repeat

import numpy as np

from . import fields
from .arrays import module_of
from .cuda_source import CTYPES, load_module
from .errors import DistsortError, agree
from .io.formats import FileFormat, detect_format, ensure_file, is_npy, output_format
from .io.reader import open_input, rank_range
from .io.staging import load
from .keys import UNSIGNED, NumericCodec, record_key_words, stand_ins
from .local import clib
from .mix import GOLDEN, mix64, splitmix64
from .payload import restored, stored
from .workers import spread

_CHUNK = 1 << 22  # rows hashed at a time: bounds the temporaries on the GPU
_HOST_CHUNK = 1 << 15  # on the CPU: mix64's temporaries (8 bytes a row each) stay in a core's
# L2 cache; twice as many rows spilled them and hashed several times slower
_HOST_TASK = 1 << 20  # rows one worker thread hashes at a time: its pieces outweigh the handing


def _words(data, xp):
    """Each element's (or row's) bytes as uint64 words: (n, w), zero-padded on the right."""
    data = xp.ascontiguousarray(data)
    size = data.dtype.itemsize
    if data.ndim == 1 and size == 8:
        return data.view(np.uint64).reshape(-1, 1)
    if data.ndim == 1 and size in (1, 2, 4):
        return data.view(UNSIGNED[size]).astype(np.uint64).reshape(-1, 1)
    n = data.shape[0]
    width = size * int(np.prod(data.shape[1:], dtype=np.int64))
    rows = data.view(np.uint8).reshape(n, width)
    if width % 8:
        padded = xp.zeros((n, width + 8 - width % 8), dtype=np.uint8)
        padded[:, :width] = rows
        rows = padded
    return rows.view(np.uint64)


def _hash_rows(words):
    """One 64-bit hash per row, chained over the row's words so that word order matters."""
    xp = module_of(words)
    h = splitmix64(words[:, 0])
    for j in range(1, words.shape[1]):
        step = np.uint64((j + 1) * int(GOLDEN) % 2**64)
        h = mix64(xp.bitwise_xor(h, mix64(xp.add(words[:, j], step))))
    return h


def checksum(data, xp=np, values=None) -> int:
    """Order-independent 64-bit checksum over the full bytes of each element or record row.

    With values (one row per element, any dtype or width), each element is hashed together with
    its value, so a value that moved to another key changes the sum.
    """
    if values is not None and len(values) != len(data):
        raise ValueError(f"{len(values)} values for {len(data)} elements: one each")
    if values is None and data.ndim == 1 and data.dtype.itemsize in CTYPES and _is_cupy(xp):
        return _device_hash_sum(data)
    part = _host_part(data, values) if xp is np else None
    if part is not None:  # the rank's share of the cores (workers.py) side by side
        parts = spread(part, data.shape[0], _HOST_TASK)
    elif xp is np:
        parts = spread(lambda lo, hi: _rows_sum(data, values, lo, hi, np, _HOST_CHUNK),
                       data.shape[0], _HOST_TASK)
    else:
        parts = [_rows_sum(data, values, 0, data.shape[0], xp, _CHUNK)]
    return sum(parts) % 2**64


def _host_part(data, values):
    """A function (lo, hi) -> the sum of the hashes of rows [lo, hi) by the C kernels
    (local/hash.c), or None where NumPy's steps do it (no compiled library, no rows, objects,
    or rows of bytes on a big-endian host, whose words NumPy's steps view otherwise). A piece
    that is not contiguous is copied alone: never the whole."""
    lib = clib.library()
    columns = [c for c in (data, values) if c is not None]
    if lib is None or not len(data) or any(c.dtype.hasobject for c in columns):
        return None
    if all(c.ndim == 1 and c.dtype.itemsize in CTYPES and c.flags.aligned for c in columns):
        widths = [8 * c.dtype.itemsize for c in columns]
        kernel = getattr(lib, f"hash_sum_u{widths[0]}" if values is None
                         else f"hash_pairs_u{widths[0]}_v{widths[1]}")

        def words(lo: int, hi: int) -> int:
            pieces = [np.ascontiguousarray(c[lo:hi]) for c in columns]
            return kernel(*(clib.pointer(p) for p in pieces), hi - lo)

        return words
    widths = [c.dtype.itemsize * int(np.prod(c.shape[1:], dtype=np.int64)) for c in columns]
    if sys.byteorder != "little" or 0 in widths:
        return None

    def rows(lo: int, hi: int) -> int:
        keys, *vals = [np.ascontiguousarray(c[lo:hi]).view(np.uint8) for c in columns]
        return lib.hash_rows(keys.ctypes.data, widths[0], vals[0].ctypes.data if vals else None,
                             widths[-1] if vals else 0, hi - lo)

    return rows


def _rows_sum(data, values, lo: int, hi: int, xp, step: int) -> int:
    """The sum of the hashes of rows [lo, hi), `step` rows at a time."""
    total = 0
    for at in range(lo, hi, step):
        end = min(at + step, hi)
        words = _words(data[at:end], xp)
        if values is not None:
            words = xp.concatenate([words, _words(values[at:end], xp)], axis=1)
        total += int(_hash_rows(words).sum(dtype=np.uint64))
    return total


def key_words(data, xp=np, descending: bool = False, key_size: int | None = None,
              order=None) -> list:
    """Sort keys as unsigned words, most significant first, in the product's order (rows that
    sort by their fields: by order's fields first, on the host)."""
    if data.ndim == 2:
        return record_key_words(data, key_size or data.shape[1], xp, descending)
    if fields.by_fields(data.dtype):
        key = fields.keyed(data, order, descending, [])[0]
        return record_key_words(key, key.shape[1], xp, False)
    stand = stand_ins(data.dtype, descending)
    if stand is not None:
        data, descending = stand.encode(data), stand.sort_descending
    return [NumericCodec(data.dtype, descending, canonical=True).encode(data, xp)]


def first_disorder(words, xp=np) -> int | None:
    """Index i of the first pair (i, i+1) whose keys are out of order, or None."""
    n = words[0].shape[0]
    if n < 2:
        return None
    if len(words) == 1 and _is_cupy(xp):
        return _device_first_descent(words[0])
    kernel = _host_descent(words)
    if kernel is not None:  # pieces of pairs on the rank's threads, as the checksum's rows
        def piece(lo: int, hi: int) -> int | None:  # pairs [lo, hi): rows lo to hi
            i = kernel(clib.pointer(words[0], lo), hi + 1 - lo)
            return None if i < 0 else lo + int(i)

        return next((i for i in spread(piece, n - 1, _HOST_TASK) if i is not None), None)
    bad = xp.zeros(n - 1, dtype=bool)
    equal = xp.ones(n - 1, dtype=bool)
    for w in words:
        before, after = w[:-1], w[1:]
        bad |= equal & (before > after)
        equal &= before == after
    i = int(xp.argmax(bad))
    return i if bool(bad[i]) else None


def _text_disorder(data: np.ndarray, descending: bool) -> int | None:
    """first_disorder of a host column of bytes or unicode strings by NumPy's own comparison,
    which orders them as distsort sorts them (bytes as memcmp, strings by code point): no keys
    made (five times faster than their keys for ten-character strings)."""
    if len(data) < 2:
        return None
    bad = (np.greater if descending else np.less)(data[1:], data[:-1])
    i = int(bad.argmax())
    return i if bad[i] else None


def _sorted_sum(data, descending: bool, hashed: bool = True) -> tuple[int, int | None] | None:
    """(checksum, first_disorder) of a host column of numbers in one read on the rank's threads
    (local/sorted.c: its pairs compared as numbers, NaN last; the checksum 0 unless hashed), or
    None where it does not apply (no compiled library; records, fields, stand-ins, half floats,
    foreign byte order)."""
    lib, kind, width = clib.library(), data.dtype.kind, 8 * data.dtype.itemsize
    if (lib is None or not isinstance(data, np.ndarray) or data.ndim != 1 or kind not in "iuf"
            or width not in (8, 16, 32, 64) or (kind == "f" and width == 16)
            or not data.dtype.isnative or not data.flags.c_contiguous or not len(data)):
        return None
    kernel, n = getattr(lib, f"sorted_sum_{kind}{width}{'_desc' if descending else ''}"), len(data)

    def piece(lo: int, hi: int) -> tuple[int, int | None]:
        at = np.empty(1, np.int64)
        total = kernel(clib.pointer(data, lo), hi - lo, hi - lo - (hi == n), hashed,
                       clib.pointer(at))
        return total, None if at[0] < 0 else lo + int(at[0])

    parts = spread(piece, n, _HOST_TASK)
    return (sum(t for t, _ in parts) % 2**64,
            next((bad for _, bad in parts if bad is not None), None))


def _host_descent(words: list):
    """The C kernel (local/descent.c) that finds the first descent in this one column of
    unsigned codes on the host, or None (several words, no compiled library: NumPy's steps)."""
    codes, lib = words[0], clib.library()
    if (len(words) != 1 or lib is None or not isinstance(codes, np.ndarray) or codes.ndim != 1
            or codes.dtype.kind != "u" or not codes.flags.c_contiguous):
        return None
    return getattr(lib, f"first_descent_u{8 * codes.dtype.itemsize}")


def _is_cupy(xp) -> bool:
    return xp.__name__ == "cupy"


_BLOCKS, _THREADS = 2048, 256  # grid-stride: enough warps to keep the memory busy


def _device_hash_sum(data) -> int:
    """checksum of 1-D elements on the GPU: one pass (check.cu)."""
    import cupy

    words = cupy.ascontiguousarray(data).view(UNSIGNED[data.dtype.itemsize])
    total = cupy.zeros(1, np.uint64)
    _kernel("hash_sum", words)((_BLOCKS,), (_THREADS,), (words, np.int64(len(words)), total))
    return int(total[0])


def _device_first_descent(codes) -> int | None:
    """first_disorder of one column of unsigned codes on the GPU: one pass (check.cu)."""
    import cupy

    n = len(codes)
    at = cupy.full(1, n, np.int64)
    _kernel("first_descent", codes)((_BLOCKS,), (_THREADS,),
                                    (cupy.ascontiguousarray(codes), np.int64(n), at))
    found = int(at[0])
    return None if found == n else found


def _kernel(name: str, words):
    """check.cu's kernel `name` for unsigned words of this array's width."""
    instance = f"{name}<{CTYPES[words.dtype.itemsize]}>"
    return load_module("check.cu", (instance,)).get_function(instance)


def compile_all() -> None:
    """Compile every instance a check may use (python -m distsort compile)."""
    for width in CTYPES:
        for name in ("hash_sum", "first_descent"):
            _kernel(name, np.empty(0, UNSIGNED[width]))


@dataclass
class Summary:
    """One rank's part of a check, combined over ranks by `combine`."""

    count_in: int = 0
    count_out: int = 0
    checksum_in: int = 0
    checksum_out: int = 0
    first_key: tuple | None = None
    last_key: tuple | None = None
    bad_index: int | None = None
    bad_pair: tuple[str, str] | None = None  # the two elements out of order, for the message
    first_text: str = ""  # this rank's first and last elements, for the message
    last_text: str = ""
    descending: bool = False
    paired: bool = False  # values entered the checksums with their keys

    def add_input(self, data, xp, values=None) -> None:
        self.paired = self.paired or values is not None
        self.count_in += int(data.shape[0])
        self.checksum_in = (self.checksum_in + checksum(data, xp, values)) % 2**64

    def add_output(self, data, xp, descending: bool, key_size: int | None, values=None,
                   order=None) -> None:
        """Feed the next piece of this rank's output, in order (order: key_words')."""
        self.descending = descending
        # a column of numbers on the host: its order, and its checksum alone, in one read
        alone = values is None  # with values: the pairs' hashes, in a pass of their own
        one_pass = _sorted_sum(data, descending, hashed=alone) if xp is np else None
        text = xp is np and data.ndim == 1 and data.dtype.kind in "SU"
        if len(data) and (one_pass is not None or text):  # the codes of the piece's ends only
            disorder = one_pass[1] if one_pass is not None else _text_disorder(data, descending)
            self._ordered(disorder, key_words(data[[0, -1]], np, descending), len(data),
                          lambda i: _element(data, i))
        elif len(data):
            words = key_words(data, xp, descending, key_size, order)
            self._ordered(first_disorder(words, xp), words, len(data),
                          lambda i: _element(data, i))
        self.count_out += int(data.shape[0])
        total = one_pass[0] if one_pass is not None and alone else checksum(data, xp, values)
        self.checksum_out = (self.checksum_out + total) % 2**64

    def add_positions(self, keys: np.ndarray, positions: np.ndarray, descending: bool,
                      order=None) -> None:
        """Feed the next piece of an argsort's output (host arrays): its input positions, and
        the input's keys at them, which must ascend in the product's order, ties by position
        (argsort is stable). The checksum is the positions': a permutation of the input's."""
        self.descending = descending
        if len(positions):
            words = key_words(keys, np, descending, order=order) + [positions.astype(np.uint64)]
            self._ordered(first_disorder(words), words, len(positions),
                          lambda i: f"{_element(keys, i)} (input position {positions[i]})")
        self.count_out += len(positions)
        self.checksum_out = (self.checksum_out + checksum(positions)) % 2**64

    def _ordered(self, bad: int | None, words: list, n: int, text) -> None:
        """Note the first pair out of order within this piece of n rows (bad: its index, or
        None) or between it and the last piece; words: the sort words (most significant first)
        of the piece, or of its first and last rows; text(i): row i of the piece for a
        message."""
        first = tuple(int(w[0]) for w in words)
        if self.bad_index is None and self.last_key is not None and first < self.last_key:
            self.bad_index = self.count_out - 1
            self.bad_pair = (self.last_text, text(0))
        if self.bad_index is None and bad is not None:
            self.bad_index = self.count_out + bad
            self.bad_pair = (text(bad), text(bad + 1))
        if self.first_key is None:
            self.first_key, self.first_text = first, text(0)
        self.last_key, self.last_text = tuple(int(w[-1]) for w in words), text(n - 1)


@dataclass
class Verdict:
    """The result of a check; `message` is one line for the user."""

    ok: bool
    count_in: int
    count_out: int
    checksum_in: int
    checksum_out: int
    order_ok: bool
    first_bad_rank: int | None
    message: str


def _element(data, i: int) -> str:
    """Element i of a piece, for a message: its number, or a record's first bytes in hex."""
    row = data[i]
    if getattr(row, "ndim", 0):
        raw = bytes(row.tolist())
        return raw[:16].hex() + ("..." if len(raw) > 16 else "")
    return str(row) if row.dtype.kind in "Mm" else repr(row.item())


def _order_problem(parts: list[Summary]) -> tuple[int | None, str]:
    """(first bad rank, description) from every rank's summary, or (None, ""): the output
    positions (counting from 0) and values of the first two elements out of order."""
    last, last_rank, at = None, None, 0
    for rank, part in enumerate(parts):
        if part.first_key is not None and last is not None and part.first_key < last:
            return rank, _disorder(parts, at - 1, parts[last_rank].last_text, part.first_text,
                                   f" across ranks (the last element of rank {last_rank}'s "
                                   f"shard, the first of rank {rank}'s)")
        if part.bad_index is not None:
            return rank, _disorder(parts, at + part.bad_index, *part.bad_pair)
        if part.last_key is not None:
            last, last_rank = part.last_key, rank
        at += part.count_out
    return None, ""


def _disorder(parts: list[Summary], position: int, before: str, after: str,
              where: str = "") -> str:
    """'out of order at positions i and i+1: a then b', and a hint where the output's first
    element sorts after its last (as where it runs the other way; it may also be a misplaced
    end, such as NaNs first: so the hint says what it saw, and asks)."""
    said = (f"out of order at positions {position} and {position + 1}{where}: {before} then "
            f"{after}")
    shards = [p for p in parts if p.first_key is not None]
    if shards[0].first_key > shards[-1].last_key:
        flag = "without --descending" if shards[0].descending else "with --descending"
        said += f"; its first element sorts after its last: was it sorted {flag}?"
    return said


def combine(comm, mine: Summary) -> Verdict:
    """The verdict on every rank's Summary together (collective)."""
    parts = comm.allgather(mine)
    count_in = sum(p.count_in for p in parts)
    count_out = sum(p.count_out for p in parts)
    sum_in = sum(p.checksum_in for p in parts) % 2**64
    sum_out = sum(p.checksum_out for p in parts) % 2**64
    bad_rank, problem = _order_problem(parts)
    if count_in != count_out:
        message = f"FAILED: the output holds {count_out} elements, the input {count_in}"
    elif sum_in != sum_out:
        what = ("the input's (key, value) pairs: a value left its key, or a key or value "
                "changed" if any(p.paired for p in parts) else "the input")
        message = (f"FAILED: checksum {sum_out:#018x} of the output differs from the input's "
                   f"{sum_in:#018x}: the output is not a permutation of {what}")
    elif problem:
        message = f"FAILED: {problem}"
    else:
        message = f"OK: {count_out} elements sorted, checksum {sum_out:#018x} matches the input"
    return Verdict(ok=message.startswith("OK"), count_in=count_in, count_out=count_out,
                   checksum_in=sum_in, checksum_out=sum_out, order_ok=bad_rank is None,
                   first_bad_rank=bad_rank, message=message)


def verify(comm, local_in, local_out, *, descending: bool = False, key_size: int | None = None,
           xp=np, values_in=None, values_out=None, order=None) -> Verdict:
    """Collective: is the concatenation of the ranks' local_out the sorted local_in's?

    Arrays are 1-D numbers or (n, record_size) uint8 records (ordered by their first key_size
    bytes, default all), host or device arrays; the work runs on xp's device (CuPy: host arrays
    go up piece by piece). For key-value sorts, values_in/values_out (one row per key, any
    dtype) enter the checksum paired with their keys. Every rank gets the same Verdict.
    local_in may instead be its input_summary, taken before a sort that overwrote it. Rows
    that sort by their fields are ordered by them (order: those named first, key_words).
    """
    mine = local_in if isinstance(local_in, Summary) else input_summary(local_in, xp, values_in)
    for keys, values in pieces(local_out, values_out, xp):
        mine.add_output(keys, xp, descending, key_size, values, order)
    return combine(comm, mine)


def input_summary(local_in, xp=np, values_in=None) -> Summary:
    """The input's part of a verify (its count and checksum), for verify in its place: taken
    before a sort that may overwrite the input."""
    mine = Summary()
    for keys, values in pieces(local_in, values_in, xp):
        mine.add_input(keys, xp, values)
    return mine


def pieces(keys, values, xp, rows: int = 4 * _CHUNK):
    """(keys, values) in pieces of `rows`, on xp's device; values of dtypes the device cannot
    hold as their bytes (payload.stored: the checksum reads the same words)."""
    values = stored(values)
    for lo in range(0, max(len(keys), 1), rows):
        part = None if values is None else xp.asarray(values[lo : lo + rows])
        yield xp.asarray(keys[lo : lo + rows]), part


def _loaded(source, start: int, stop: int, chunk: int, xp):
    """The elements [start, stop) of an input file on xp's device, in pieces of `chunk`: on
    CPUs the file's own pages where they need no swap, else each piece in the memory of the one
    before (new memory costs the kernel's zeroing of its pages)."""
    into = xp.empty(min(chunk, stop - start) * source.fmt.itemsize, np.uint8)
    for lo in range(start, stop, chunk):
        yield load(source, lo, min(lo + chunk, stop), xp, into=into, mapped=True)


def _output_options(output_path, fmt: FileFormat) -> FileFormat:
    """The format of the output file of a sort of an input in format fmt."""
    if fmt.kind == "records":
        return detect_format(output_path, record_size=fmt.record_size, key_size=fmt.key_size)
    return detect_format(output_path, dtype=None if is_npy(output_path) else fmt.dtype)


def _mismatch(output_path, out: FileFormat, fmt: FileFormat) -> str:
    """Why an output of this format cannot be a sort of an input of that one, or ""."""
    if out.native_dtype == fmt.native_dtype and out.itemsize == fmt.itemsize:
        return ""
    return (f"{output_path} holds {out.describe()} but the input holds {fmt.describe()}: it "
            "cannot be the input sorted")


def open_files(input_path, output_path, fmt: FileFormat | None, values: tuple | None,
               values_format: tuple = (None, None)) -> list:
    """The input and the output of a sort, opened (fmt: the input's, else found from the
    file), and the input's values and the output's after them where values names them
    (values_format: the --values-dtype and --values-record-size of raw values files)."""
    ensure_file(output_path, "output")  # named as what it is, where it is not there
    in_fmt = fmt or detect_format(input_path)
    out_fmt = _output_options(output_path, in_fmt)
    files = [open_input(input_path, in_fmt), open_input(output_path, out_fmt)]
    if values:
        given = _values_file(values[0], files[0], *values_format)
        files += [given, _values_file(values[1], files[1], *values_format, like=given.fmt)]
    return files


def run_check(comm, input_path, output_path, fmt: FileFormat | None = None, *,
              descending: bool = False, chunk: int = 1 << 24, xp=np,
              values: tuple | None = None, values_format: tuple = (None, None),
              order=None) -> Verdict:
    """Collective (`python -m distsort check IN OUT`): each rank reads an even share of both files
    (in pieces of `chunk` elements) and the shares are checked together as by verify, on xp's
    device (rows that sort by their fields: on the host, by order's fields first). values: the
    paths of the input's values and of the output's (`sort --values`): each value is hashed
    with its key, so a value that left its key fails the check."""
    src, dst, *paired = agree(comm, lambda: open_files(input_path, output_path, fmt, values,
                                                       values_format))
    problem = _mismatch(output_path, dst.fmt, src.fmt)  # alike on every rank: the same files
    if problem:  # a wrong output, as a wrong count is: FAILED, not an error
        return Verdict(ok=False, count_in=src.count, count_out=dst.count, checksum_in=0,
                       checksum_out=0, order_ok=False, first_bad_rank=None,
                       message=f"FAILED: {problem}")
    rank, size = comm.Get_rank(), comm.Get_size()
    # the files hold bool and time keys as their bits: the host checks the keys themselves, a
    # device (which has no such dtypes) their stand-ins
    kind = xp is not np and src.fmt.stand_ins(descending)
    direction = kind.sort_descending if kind else descending
    xp = np if src.fmt.structured else xp  # their byte keys are made on the host

    def summarize() -> Summary:
        mine = Summary()
        for keys, side in ((src, 0), (dst, 1)):
            span = rank_range(keys.count, rank, size)
            pieces = _loaded(keys, *span, chunk, xp)
            alongside = _loaded(paired[side], *span, chunk, xp) if paired else repeat(None)
            for piece, vals in zip(pieces, alongside):
                piece = kind.encode(piece) if kind else _as_keys(piece, keys.fmt)
                if side == 0:
                    mine.add_input(piece, xp, vals)
                else:
                    mine.add_output(piece, xp, direction, src.fmt.key_size, vals, order)
        return mine

    return combine(comm, agree(comm, summarize))


def _as_keys(piece, fmt: FileFormat):
    """A host piece of a keys file as its keys (bool and time keys are loaded as their bits,
    rows that sort by their fields as their bytes)."""
    if fmt.structured:
        return restored(piece, fmt.empty_like())
    if fmt.kind == "records" or piece.dtype == fmt.native_dtype:
        return piece
    return piece.view(fmt.native_dtype)


def _values_file(path, keys, dtype=None, record_size=None, like: FileFormat | None = None):
    """The values file beside a keys file: one value per key. like: the input's values' format,
    in which sort writes a values output that is not .npy, where no option names one."""
    if (like is not None and dtype is None and record_size is None and not is_npy(path)
            and not os.fspath(path).lower().endswith(".npz")):  # no .npz: sort never writes one
        fmt = output_format(path, like=like)
    else:
        fmt = detect_format(path, dtype, record_size, payload=True)
    found = open_input(path, fmt)
    if found.count != keys.count:
        raise DistsortError(f"{path} holds {found.count} value{'s' * (found.count != 1)} but "
                            f"{keys.path} holds {keys.count} key{'s' * (keys.count != 1)}")
    return found


def run_argsort_check(comm, input_path, positions_path, fmt: FileFormat | None = None, *,
                      descending: bool = False, chunk: int = 1 << 22, order=None) -> Verdict:
    """Collective (`check IN POS --argsort`): is POS (int64) a stable argsort of IN? Its
    positions must be a permutation of 0..n-1 (count and checksum) and the input's keys at
    them must ascend, ties by position. On the host: the keys are gathered from the input
    file at the positions, which no device does faster than the page cache gives them."""
    def open_both():
        keys = open_input(input_path, fmt or detect_format(input_path))
        if keys.fmt.kind == "records":
            raise DistsortError("--argsort checks the positions of numeric keys, not records")
        raw = None if is_npy(positions_path) else "int64"  # a raw file: int64 as written
        found = open_input(positions_path, detect_format(positions_path, dtype=raw))
        if found.fmt.native_dtype != np.int64:
            raise DistsortError(f"{positions_path} holds {found.fmt.describe()}: an argsort's "
                                "output is int64 positions")
        return keys, found

    src, pos = agree(comm, open_both)
    rank, size = comm.Get_rank(), comm.Get_size()

    def summarize() -> Summary:
        mine, n = Summary(), src.count
        lo, hi = rank_range(n, rank, size)
        mine.add_input(np.arange(lo, hi, dtype=np.int64), np)  # what a permutation holds
        # an empty file cannot be mapped (and holds no key to take)
        keys = np.memmap(src.path, src.fmt.dtype, "r", src.offset, (n,)) if n else \
            np.empty(0, src.fmt.dtype)
        for piece in _loaded(pos, *rank_range(pos.count, rank, size), chunk, np):
            inside = np.clip(piece, 0, max(n - 1, 0))  # others fail the checksum
            taken = keys[inside] if n else keys[:0]
            mine.add_positions(taken.astype(src.fmt.native_dtype), piece, descending, order)
        return mine

    return combine(comm, agree(comm, summarize))
