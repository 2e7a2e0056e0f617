"""Seeded data sets that do not depend on how they are split over ranks.

Element i of a data set is a function of (dist, dtype, seed, i) only, through a counter-based
generator: its random bits are splitmix64 of i in a stream keyed by (seed, purpose). So every rank
generates exactly its range [start, stop), in any pieces, with no communication, and the global
data set is the same for any number of ranks. The generator is made of integer array operations
that NumPy and CuPy compute alike (pass xp=cupy to generate on the GPU): integer data are equal on
both; float data may differ in the last bit where the GPU's log/cos round differently.

Distributions (DISTRIBUTIONS):
- uniform: integers over the dtype's full range; floats (2u - 1) * 2^e with u uniform in [0, 1)
  and e a uniform integer in [-8, 8]: both signs and a spread of magnitudes.
- normal: floats N(0, 1); integers round(N(mid, (range/16)^2)), mid the middle of the range.
- zipf: floor(u^(-1/(a-1))) with a = 1.2, u uniform in (0, 1]: a discrete power law with
  P(X >= k) = k^-0.2 (so 13% ones, a heavy tail), clipped to the dtype's largest value.
- equal: one seeded random non-zero value everywhere.
- fewdistinct: 16 seeded random values (at most 16 distinct), each element picks one.
- sorted / reverse: non-decreasing / non-increasing in the global index i. With `total` (the
  global count, as gen_file passes) integers spread over the dtype's full range and floats are
  i - total // 2; without it integers are min + i (saturating) and floats i.
- specials: extremes and edge cases (NaN of both signs, +-inf, -0.0, +-max, subnormals; integer
  min/max, 0, +-1) mixed with uniform values.
- gensort: records only: like the Sort Benchmark's gensort (binary mode), a random key of
  key_size bytes, then 00 11, the row number as 32 hex digits, 88 99 AA BB, 48 filler bytes of
  hex digits, CC DD EE FF (truncated or extended to the record size).
Records with another distribution take the first 8 key bytes from that distribution's uint64
value (big-endian, so memcmp order is the value's order); the rest of the key is zero, random for
uniform. The record body is the gensort body.
"""

from __future__ import annotations

import numpy as np

from .errors import DistsortError, agree
from .io.formats import FileFormat, output_format, parse_dtype
from .io.reader import rank_range
from .io.writer import ShardWriter
from .keys import UNSIGNED, NumericCodec, StandIns
from .mix import GOLDEN, mix64

DISTRIBUTIONS = ("uniform", "normal", "zipf", "equal", "fewdistinct", "sorted", "reverse",
                 "gensort", "specials")
ZIPF_A = 1.2
_CHUNK = 1 << 18  # elements generated at a time on the CPU (cache-sized temporaries)
_GPU_CHUNK = 1 << 24


def _stream_key(seed: int, stream: int) -> np.uint64:
    x = (int(seed) * 0xD1B54A32D192ED03 + int(stream) * 0xAEF17502108EF2D9 + 1) % 2**64
    return mix64(np.array([x], dtype=np.uint64))[0]


def random_bits(seed: int, stream: int, idx, xp=np):
    """64 random bits for each global index in idx (uint64), in the stream (seed, stream)."""
    return mix64(idx * GOLDEN + _stream_key(seed, stream))


def _unit(bits, xp, open_zero: bool = False):
    """Uniform floats from 64-bit words: [0, 1), or (0, 1] when open_zero."""
    u = (bits >> np.uint64(11)).astype(np.float64)
    return (u + 1.0 if open_zero else u) * 2.0**-53


def _to_int(x, dtype: np.dtype, xp):
    """Float64 values -> integers of dtype, rounded down and clipped to its range."""
    info = np.iinfo(dtype)
    top = float(info.max) if float(info.max) <= info.max else np.nextafter(float(info.max), 0)
    return xp.clip(xp.floor(x), float(info.min), top).astype(dtype)


def _to_float(x, dtype: np.dtype, xp):
    """Float64 values -> dtype, clipped to its finite range (no overflow to inf)."""
    big = float(np.finfo(dtype).max)
    return xp.clip(x, -big, big).astype(dtype)


def _uniform(dtype, seed, idx, xp, stream: int = 0):
    bits = random_bits(seed, stream, idx, xp)
    if dtype.kind in "iu":
        word = UNSIGNED[dtype.itemsize]
        return (bits >> np.uint64(64 - 8 * dtype.itemsize)).astype(word).view(dtype)
    exponent = random_bits(seed, stream + 1, idx, xp) % np.uint64(17)
    scale = xp.exp2(exponent.astype(np.float64) - 8.0)
    return _to_float((2.0 * _unit(bits, xp) - 1.0) * scale, dtype, xp)


def _normal(dtype, seed, idx, xp):
    u1 = _unit(random_bits(seed, 2, idx, xp), xp, open_zero=True)
    u2 = _unit(random_bits(seed, 3, idx, xp), xp)
    z = xp.sqrt(-2.0 * xp.log(u1)) * xp.cos(2.0 * np.pi * u2)
    if dtype.kind == "f":
        return _to_float(z, dtype, xp)
    info = np.iinfo(dtype)
    mid = (float(info.min) + float(info.max) + 1.0) / 2.0
    return _to_int(mid + z * (float(info.max) - float(info.min) + 1.0) / 16.0 + 0.5, dtype, xp)


def _zipf(dtype, seed, idx, xp):
    u = _unit(random_bits(seed, 4, idx, xp), xp, open_zero=True)
    k = xp.floor(u ** (-1.0 / (ZIPF_A - 1.0)))
    return _to_float(k, dtype, xp) if dtype.kind == "f" else _to_int(k, dtype, xp)


def _table(dtype, seed, stream, size):
    """size seeded uniform values of dtype (on the host), none of them zero."""
    values = _uniform(dtype, seed, np.arange(size, dtype=np.uint64), np, stream)
    return np.where(values == 0, np.ones(1, dtype), values)


def _equal(dtype, seed, idx, xp):
    return xp.full(idx.shape, _table(dtype, seed, 20, 1)[0], dtype=dtype)


def _fewdistinct(dtype, seed, idx, xp):
    table = xp.asarray(_table(dtype, seed, 22, 16))
    return table[(random_bits(seed, 9, idx, xp) >> np.uint64(60)).astype(np.int64)]


def _ramp(dtype, idx, total, xp):
    """Non-decreasing in idx: see the module doc (sorted)."""
    if dtype.kind == "f":
        shift = float(total // 2) if total else 0.0
        return _to_float(idx.astype(np.float64) - shift, dtype, xp)
    bits = 8 * dtype.itemsize
    top = 2**bits - 1
    if total:
        x = idx.astype(np.float64) * (2.0**bits / total)
        codes = _to_int(x, np.dtype(np.uint64), xp)
    else:
        codes = idx
    codes = xp.minimum(codes, np.uint64(top)).astype(UNSIGNED[dtype.itemsize])
    return NumericCodec(dtype).decode(codes, xp)


def _sorted(dtype, seed, idx, xp, total=None):
    return _ramp(dtype, idx, total, xp)


def _reverse(dtype, seed, idx, xp, total=None):
    if total:
        return _ramp(dtype, np.uint64(total - 1) - idx, total, xp)
    if dtype.kind == "f":
        return -_ramp(dtype, idx, None, xp)
    top = np.uint64(2 ** (8 * dtype.itemsize) - 1)
    return _ramp(dtype, top - xp.minimum(idx, top), None, xp)


def _special_table(dtype) -> np.ndarray:
    if dtype.kind == "f":
        info = np.finfo(dtype)
        values = [np.nan, -np.nan, np.inf, -np.inf, 0.0, -0.0, info.max, -info.max,
                  info.smallest_subnormal, -info.smallest_subnormal, 1.0, -1.0]
    else:
        info = np.iinfo(dtype)
        values = [info.min, info.max, 0, 1, info.max - 1, info.min + 1, info.max // 2,
                  info.min // 2, 2, 0, info.max, info.min]
    return np.array(values, dtype=dtype)


def _specials(dtype, seed, idx, xp):
    pick = (random_bits(seed, 5, idx, xp) >> np.uint64(59)).astype(np.int64)  # 12 of 32
    table = _special_table(dtype)
    special = xp.asarray(table)[xp.minimum(pick, len(table) - 1)]
    return xp.where(pick < len(table), special, _uniform(dtype, seed, idx, xp))


_NUMERIC = {"uniform": _uniform, "normal": _normal, "zipf": _zipf, "equal": _equal,
            "fewdistinct": _fewdistinct, "specials": _specials}


def _numbers(dist, dtype, seed, idx, xp, total):
    if dist in ("sorted", "reverse"):
        return (_sorted if dist == "sorted" else _reverse)(dtype, seed, idx, xp, total)
    return _NUMERIC[dist](dtype, seed, idx, xp)


_HEX_SHIFTS = np.arange(60, -4, -4, dtype=np.uint64)  # the 16 nibbles of a uint64, high first


def _hex_digits(values, xp):
    """(n, 16) ASCII hex digits (0-9, A-F) of uint64 values, most significant first."""
    d = ((values[:, None] >> xp.asarray(_HEX_SHIFTS)[None, :]) & np.uint64(15)).astype(np.uint8)
    return d + np.uint8(48) + (d > 9).astype(np.uint8) * np.uint8(7)


def _gensort_body(idx, width: int, xp):
    """(n, max(width, 100)) bytes: gensort's record layout after the key, for rows idx."""
    n = idx.shape[0]
    out = xp.empty((n, max(width, 100)), dtype=np.uint8)
    out[:, :10] = np.uint8(0)  # the key's place
    out[:, 10:12] = xp.asarray(np.array([0x00, 0x11], np.uint8))
    out[:, 12:28] = np.uint8(48)  # the high 64 bits of gensort's 128-bit row number
    out[:, 28:44] = _hex_digits(idx, xp)
    out[:, 44:48] = xp.asarray(np.array([0x88, 0x99, 0xAA, 0xBB], np.uint8))
    out[:, 48:96] = xp.repeat(_hex_digits(idx * GOLDEN, xp)[:, 4:], 4, axis=1)
    out[:, 96:100] = xp.asarray(np.array([0xCC, 0xDD, 0xEE, 0xFF], np.uint8))
    for lo in range(100, out.shape[1], 48):  # longer records: repeat the filler
        out[:, lo : lo + 48] = out[:, 48 : 48 + min(48, out.shape[1] - lo)]
    return out


def _records(dist, fmt: FileFormat, seed, idx, xp, total):
    n, key = idx.shape[0], fmt.key_size
    rec = _gensort_body(idx, fmt.record_size, xp)[:, : fmt.record_size]
    rec[:, :key] = np.uint8(0)
    if dist in ("uniform", "gensort"):
        words = [random_bits(seed, 10 + w, idx, xp) for w in range((key + 7) // 8)]
        rec[:, :key] = xp.stack(words, axis=1).view(np.uint8).reshape(n, -1)[:, :key]
    else:
        value = _numbers(dist, np.dtype(np.uint64), seed, idx, xp, total)
        rec[:, : min(key, 8)] = _big_endian(value, xp)[:, : min(key, 8)]
    return xp.ascontiguousarray(rec)


def _big_endian(value, xp):
    """uint64 -> (n, 8) bytes, most significant first (no non-native dtypes: CuPy has none)."""
    shifts = xp.asarray(np.arange(56, -8, -8, dtype=np.uint64))
    return ((value[:, None] >> shifts[None, :]) & np.uint64(255)).astype(np.uint8)


def check_dist(dist: str, fmt_or_dtype) -> FileFormat | np.dtype:
    """The record format or dtype to generate, or a DistsortError for an unusable combination."""
    if dist not in DISTRIBUTIONS:
        raise DistsortError(f"unknown --dist {dist!r}: choose one of {', '.join(DISTRIBUTIONS)}")
    if isinstance(fmt_or_dtype, FileFormat):
        spec = fmt_or_dtype if fmt_or_dtype.kind == "records" else fmt_or_dtype.native_dtype
    else:
        spec = parse_dtype(fmt_or_dtype).newbyteorder("=")
    if dist == "gensort" and not isinstance(spec, FileFormat):
        raise DistsortError(
            "--dist gensort makes byte records, not keys of a --dtype: `gen FILE --dist gensort "
            "--record-size 100 --key-size 10` writes them and `sort FILE -o OUT --record-size "
            "100 --key-size 10` sorts them (the default job and bench sort numbers)"
        )
    return spec


def generate(dist: str, fmt_or_dtype, start: int, stop: int, seed: int = 0, xp=np,
             total: int | None = None):
    """Elements [start, stop) of the global data set (dist, fmt_or_dtype, seed), see module doc.

    Returns a 1-D array of the dtype in native byte order, or (n, record_size) uint8 records;
    NumPy or CuPy as xp. `total` (the global count) spreads sorted/reverse over the full range.
    """
    spec = check_dist(dist, fmt_or_dtype)
    records = isinstance(spec, FileFormat)
    if not records and spec.kind in "bMm":
        return _stood_in(dist, spec, start, stop, seed, xp, total)
    n = max(int(stop) - int(start), 0)
    shape = (n, spec.record_size) if records else (n,)
    out = xp.empty(shape, dtype=np.uint8 if records else spec)
    step = _CHUNK if xp is np else _GPU_CHUNK
    for lo in range(int(start), int(start) + n, step):
        hi = min(lo + step, int(start) + n)
        idx = xp.arange(lo, hi, dtype=np.uint64)
        piece = (_records(dist, spec, seed, idx, xp, total) if records
                 else _numbers(dist, spec, seed, idx, xp, total))
        out[lo - start : hi - start] = piece
    return out


def _stood_in(dist: str, dtype: np.dtype, start: int, stop: int, seed: int, xp, total):
    """bool, datetime64 and timedelta64 keys: the distribution's unsigned values of their
    stand-ins' width, turned into keys that order as those values do (keys.StandIns: NaT is
    the largest time). bool takes each value's top bit (sorted stays sorted; uniform is half
    True). Time keys are NumPy arrays whatever xp (CuPy has no datetime64)."""
    stand = StandIns(dtype, descending=False)
    xp = np if stand.time else xp
    codes = generate(dist, stand.code_dtype, start, stop, seed, xp, total)
    return stand.decode(codes) if stand.time else stand.bits(codes >> np.uint8(7))


def gen_format(path, dist: str, dtype=None, record_size=None, key_size=None) -> FileFormat:
    """The format `distsort gen` writes: from the options and the name (.npy or raw), where
    gensort without record options means the benchmark's 100-byte records with 10-byte keys."""
    if dist == "gensort" and dtype is None and record_size is None and key_size is None:
        record_size, key_size = 100, 10
    if dtype is not None and _kind(dtype) in ("S", "U", "V", "c"):
        raise DistsortError(f"--dtype {dtype}: gen makes numbers, bool and time keys and byte "
                            "records, not complex numbers, bytes or strings (sort takes .npy "
                            "files of those)")
    fmt = output_format(path, dtype=dtype, record_size=record_size, key_size=key_size)
    check_dist(dist, fmt)
    return fmt


def _kind(dtype) -> str:
    """A dtype's kind letter, or "" where the text names none (parse_dtype says why)."""
    try:
        return np.dtype(dtype).kind
    except (TypeError, ValueError, SyntaxError):
        return ""


def gen_file(comm, path, count: int, fmt: FileFormat, dist: str, seed: int = 0, xp=np,
             chunk: int = 1 << 24) -> None:
    """Collective: write the global data set of `count` elements to `path`, each rank its range."""
    agree(comm, lambda: check_dist(dist, fmt))
    start, stop = rank_range(count, comm.Get_rank(), comm.Get_size())
    with ShardWriter(path, fmt, count, comm) as writer:
        for lo in range(start, stop, chunk):
            hi = min(lo + chunk, stop)
            writer.write(lo, generate(dist, fmt, lo, hi, seed, xp, total=count))
        writer.commit()
