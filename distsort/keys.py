"""Order-preserving key encodings: every sortable key becomes unsigned words compared as integers.

Numeric keys (8-64 bit integers, float16/32/64) become one unsigned word of the same width, so the
radix sort, the splitters and the partition only ever compare unsigned integers. Byte keys (the
key prefix of fixed-size records, compared as memcmp) become several words, most significant first.

Floats follow NumPy's rule, NaN last in both orders. The plain encoding is a bijection on the bit
patterns (so decoding gives back the exact input bits, -0.0 and NaN payloads included): the usual
sign-flip transform, rotated so that the negative-signed NaNs, which the flip puts at the bottom,
land at the top beside the positive ones. In that order -0.0 sorts just before +0.0, which NumPy
treats as equal; where ties matter (stable sorts, argsort) the *canonical* encoding is used
instead: -0.0 becomes +0.0 and every NaN one NaN, so equal values have equal codes. That encoding
loses bits, so its callers carry the original keys along as a payload.

Descending order is the bitwise complement, rotated again so that NaN stays last.
"""

from __future__ import annotations

import functools

import numpy as np

from .cuda_source import CTYPES, load_module
from .errors import DistsortError
from .workers import spread, threads

UNSIGNED = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}  # by width in bytes


def check_sortable(dtype: np.dtype, what: str = "keys") -> np.dtype:
    """Return dtype if distsort can sort it, else raise a clear DistsortError."""
    dtype = np.dtype(dtype)
    numeric = dtype.kind in "iuf" and dtype.itemsize in UNSIGNED
    if not (numeric or dtype.kind in "bMm"):
        raise DistsortError(
            f"cannot sort {what} of dtype {dtype}: distsort sorts 8-64 bit integers, "
            "float16/32/64, bool, datetime64 and timedelta64 (and, in arrays and .npy files, "
            "complex64/128, fixed-size bytes and strings and structured rows); byte records "
            "sort with distsort.sort_records (on the command line: --record-size and --key-size)"
        )
    return dtype


class StandIns:
    """bool, datetime64 and timedelta64 keys sorted through unsigned stand-ins of their width.

    bool is uint8. A datetime64 or timedelta64 becomes a uint64 that ascends in the wanted
    order with NaT last in both orders, as NumPy puts it: its int64 bits with the sign flipped,
    less one, so that NaT (the smallest int64) wraps to the top; descending, the complement
    less one, which reverses the rest and keeps NaT on top. Either is a bijection, so the
    stand-ins sort ascending (sort_descending) and decode to the exact bits. encode takes the
    keys or their bits (the form files and devices move them in: payload.stored)."""

    SIGN, ONE = np.uint64(1 << 63), np.uint64(1)

    def __init__(self, dtype: np.dtype, descending: bool):
        self.dtype = np.dtype(dtype).newbyteorder("=")
        self.time = self.dtype.kind in "Mm"
        self.descending = descending
        self.code_dtype = np.dtype(np.uint64 if self.time else np.uint8)

    @property
    def sort_descending(self) -> bool:
        """The order to sort the stand-ins in: time stand-ins carry the order themselves."""
        return self.descending and not self.time

    def encode(self, keys):
        codes = keys.view(self.code_dtype)
        if not self.time:
            return codes
        codes = (codes ^ self.SIGN) - self.ONE  # a new array: the keys stay as they are
        return ~codes - self.ONE if self.descending else codes

    def bits(self, codes):
        """The keys' bits (bool, or uint64) from their stand-ins, in a new array."""
        if not self.time:
            return codes.view(np.bool_)
        codes = ~(codes + self.ONE) if self.descending else codes
        return (codes + self.ONE) ^ self.SIGN

    def decode(self, codes):
        """The keys (NumPy: of the dtype) from their stand-ins."""
        return self.bits(codes).view(self.dtype)


def stand_ins(dtype, descending: bool) -> StandIns | None:
    """StandIns for bool, datetime64 and timedelta64 keys; None for numbers."""
    return StandIns(dtype, descending) if np.dtype(dtype).kind in "bMm" else None


def numeric_codec(dtype: np.dtype, descending: bool = False,
                  canonical: bool = False) -> NumericCodec:
    """NumericCodec(dtype, descending, canonical), made once per kind: a codec holds nothing
    beyond its dtype's constants, whose making cost each small API call microseconds. Kinds
    by their type too: np.dtype('l') == np.dtype('q'), but keys come back as the type given."""
    dtype = np.dtype(dtype)
    return _codec(dtype, dtype.type, bool(descending), bool(canonical))


@functools.lru_cache(maxsize=64)
def _codec(dtype: np.dtype, kind: type, descending: bool, canonical: bool) -> NumericCodec:
    return NumericCodec(dtype, descending, canonical)


class NumericCodec:
    """Encode one numeric dtype to unsigned words of the same width and back."""

    def __init__(self, dtype: np.dtype, descending: bool = False, canonical: bool = False):
        self.dtype = np.dtype(dtype)
        if self.dtype.kind not in "iuf" or self.dtype.itemsize not in UNSIGNED:
            raise TypeError(f"NumericCodec takes numbers, not {self.dtype} (keys.StandIns)")
        self.native = self.dtype.newbyteorder("=")
        self.word = np.dtype(UNSIGNED[self.dtype.itemsize])
        self.bits = 8 * self.dtype.itemsize
        self.descending = descending
        self.is_float = self.dtype.kind == "f"
        self.canonical = canonical and self.is_float
        w = self.word.type
        self._sign = w(1 << (self.bits - 1))
        self._kind = 2 if self.is_float else 1 if self.dtype.kind == "i" else 0
        self.identity = self._kind == 0 and not descending  # the codes are the keys' bits
        ones, zero = w(~w(0)), w(0)
        nan_half = self._qnan = zero  # nan_half: the codes one sign's NaN patterns occupy
        if self.is_float:
            nan_half = w((1 << np.finfo(self.native).nmant) - 1)
            self._qnan = np.array(np.nan, self.native).view(self.word)[()]
        neg = ones if self.is_float else self._sign if self._kind == 1 else zero
        pos = zero if self._kind == 0 else self._sign
        self._words = (neg, pos, nan_half, descending, w(2 * nan_half) if descending else zero)

    @property
    def code(self) -> int:
        """The radix kernels' word for this encoding (keycode.cuh): kind | descending << 2 |
        canonical << 3; they sort raw keys by it, so no pass encodes or decodes them."""
        return self._kind | self.descending << 2 | self.canonical << 3

    @property
    def lossy(self) -> bool:
        """True if decode(encode(x)) may differ from x in its bits (-0.0, NaN payloads)."""
        return self.canonical

    def encode(self, x, xp, merged=None):
        """Keys of self.dtype (any byte order) -> unsigned codes, ascending in the wanted order.
        merged (a 1-element uint32 array of xp, or None): set to 1 where canonical codes merged
        some key's bits into another's (-0.0 into 0.0, a NaN into the one NaN), so that
        decode would not give them back; left as it is where none did."""
        if x.dtype != self.native:
            x = x.astype(self.native)
        u = x.view(self.word)
        if self.identity:
            return u
        if xp is not np:
            if merged is None:
                merged = _unread_word(x.device.id)
            return self._on_gpu("encode", u, self.canonical, merged)
        if self.canonical:
            return _blockwise(u, functools.partial(self._canonical_block, merged))
        return self._on_cpu("encode", u, self._code_block)

    def decode(self, u, xp, in_place: bool = False):
        """Unsigned codes -> keys in the native byte order of self.dtype. in_place: the codes
        (host ones) are given up, and the keys may take their memory (none new to fault in)."""
        if self.identity:
            return u.view(self.native)
        if xp is not np:
            return self._on_gpu("decode", u).view(self.native)
        return self._on_cpu("decode", u, self._bits_block, in_place).view(self.native)

    def c_words(self) -> list[int]:
        """The C kernels' words of this encoding (code.h: neg, pos, rot, flip, top)."""
        neg, pos, rot, flip, top = self._words
        return [int(w) for w in (neg, pos, rot, ~self.word.type(0) if flip else 0, top)]

    def _on_cpu(self, way: str, u: np.ndarray, block, in_place: bool = False) -> np.ndarray:
        """One pass of codes.c a way (a run of the words on each of the pool's threads), in
        u's own memory where in_place; or NumPy's steps a block at a time (`block`) where there
        is no C library."""
        from .local import clib

        lib = clib.library()
        if lib is None or not u.flags.c_contiguous:
            return _blockwise(u, block)
        words = self.c_words()
        kernel = getattr(lib, f"{way}_u{self.bits}")
        out = u if in_place and u.flags.writeable else np.empty_like(u)
        spread(lambda lo, hi: kernel(clib.pointer(u, lo), clib.pointer(out, lo), hi - lo, *words),
               len(u), max(BLOCK, -(-len(u) // threads())))
        return out

    # NumPy: keycode.cuh's KeyCoder (code = (((u ^ (u's top bit ? neg : pos)) - rot) ^ flip)
    # - top), a block at a time in place, so that each key is read once and written once.
    def _code_block(self, src, dst, tmp) -> None:
        neg, pos, rot, flip, top = self._words
        if self._kind == 2:
            _top_bit_select(src, tmp, neg, pos)
            np.bitwise_xor(src, tmp, out=dst)
            np.subtract(dst, rot, out=dst)
        else:
            np.bitwise_xor(src, pos, out=dst)  # integers: neg == pos
        if flip:
            np.invert(dst, out=dst)
            np.subtract(dst, top, out=dst)

    def _canonical_block(self, merged, src, dst, tmp) -> None:
        """_code_block of the canonical bits: every NaN the one quiet NaN, -0.0 0.0 (merged[0]
        set where that changed a key). A block at a time: no array of the whole's size is made
        (whole-array steps took most of a CPU check of floats: bench/RESULTS.md, session 41)."""
        np.copyto(dst, src)
        np.copyto(dst, self._qnan, where=np.isnan(src.view(self.native)))
        np.copyto(dst, self.word.type(0), where=dst == self._sign)
        if merged is not None and not np.array_equal(dst, src):
            merged[0] = 1
        self._code_block(dst, dst, tmp)

    def _bits_block(self, src, dst, tmp) -> None:
        neg, pos, rot, flip, top = self._words
        if flip:
            np.add(src, top, out=dst)
            np.invert(dst, out=dst)
            src = dst
        if self._kind == 2:
            np.add(src, rot, out=dst)
            _top_bit_select(dst, tmp, pos, neg)
            np.bitwise_xor(dst, tmp, out=dst)
        else:
            np.bitwise_xor(src, pos, out=dst)

    def _on_gpu(self, way: str, u, *flags):
        """One fused kernel (keys.cu) a way, on CuPy arrays."""
        import cupy

        out = cupy.empty_like(u)
        n = len(u)
        if n:
            kernel = _module().get_function(f"{way}_keys<{CTYPES[self.word.itemsize]}>")
            blocks = min((n + 255) // 256, 2**20)
            head = (u, out, np.int64(n), np.int32(self._kind))
            if way == "encode":
                canonical, merged = flags
                args = head + (np.int32(canonical), np.int32(self.descending), merged)
            else:
                args = head + (np.int32(self.descending),)
            kernel((blocks,), (256,), args)
        return out


@functools.cache
def _unread_word(device: int):
    """A device word for encode's `merged` where no caller reads it (one a device: a small call
    pays no allocation and fill for it)."""
    import cupy

    return cupy.zeros(1, dtype=np.uint32)


BLOCK = 1 << 16  # keys a NumPy block works on: its temporaries stay in the cache


def _blockwise(u, work):
    """A new array of work(src, dst, tmp) over u's blocks; tmp: a block of scratch words. The
    blocks are shared out among the process's pool threads (workers.py), a run of them each:
    NumPy lets go of the GIL inside each operation."""
    out = np.empty_like(u)

    def run(lo: int, hi: int) -> None:
        tmp = np.empty(min(hi - lo, BLOCK), dtype=u.dtype)
        for start in range(lo, hi, BLOCK):
            stop = min(start + BLOCK, hi)
            work(u[start:stop], out[start:stop], tmp[: stop - start])

    blocks = -(-len(u) // BLOCK)
    spread(run, len(u), BLOCK * max(1, -(-blocks // threads())))
    return out


def _top_bit_select(src, tmp, one, zero) -> None:
    """tmp = one where src's top bit is set, else zero (an arithmetic shift makes the mask)."""
    signed = tmp.view(tmp.dtype.str.replace("u", "i"))
    np.right_shift(src.view(signed.dtype), 8 * src.itemsize - 1, out=signed)
    np.bitwise_and(tmp, one ^ zero, out=tmp)
    np.bitwise_xor(tmp, zero, out=tmp)


_KERNELS = tuple(f"{kernel}<{c}>" for kernel in ("encode_keys", "decode_keys", "record_word")
                 for c in CTYPES.values())


def compile_all() -> None:
    """Compile every instance a sort may use (python -m distsort compile)."""
    _module()


def _module():
    return load_module("keys.cu", _KERNELS)


def record_key_words(records, key_size: int, xp, descending: bool = False) -> list:
    """Byte keys (first key_size bytes of each row of an (n, record_size) uint8 array) -> words.

    Eight bytes make one big-endian uint64 word; a last, shorter piece is zero-padded on the right
    into the smallest unsigned type that holds it, which keeps memcmp order. Most significant first.
    """
    words = []
    for start in range(0, key_size, 8):
        size = min(8, key_size - start)
        width = 1 if size == 1 else 2 if size == 2 else 4 if size <= 4 else 8
        word_type = UNSIGNED[width]
        if xp is not np:  # one kernel a word (keys.cu)
            words.append(_record_word_on_gpu(records, word_type, start, size, descending))
            continue
        piece = np.zeros((records.shape[0], width), np.uint8)  # zero-padded on the right
        piece[:, :size] = records[:, start:start + size]
        word = piece.view(f">u{width}").reshape(-1).astype(word_type)  # big-endian, then ours
        words.append(~word if descending else word)
    return words


def _record_word_on_gpu(records, word_type, start: int, size: int, descending: bool):
    import cupy

    records = cupy.ascontiguousarray(records)
    n, record_size = records.shape
    out = cupy.empty(n, dtype=word_type)
    if n:
        kernel = _module().get_function(f"record_word<{CTYPES[np.dtype(word_type).itemsize]}>")
        kernel((min((n + 255) // 256, 2**20),), (256,),
               (records, out, np.int64(n), np.int64(record_size), np.int32(start),
                np.int32(size), np.int32(descending)))
    return out
