"""Our GPU engine: an LSD radix sort with Onesweep-style passes (kernels in radix.cu).

One sort: one histogram kernel counts the digits of every pass in a single read of the keys, a
tiny kernel scans the counts, then one kernel per 8-bit digit moves keys (and values) once: read
once, written once, global offsets from a chained scan with decoupled look-back. Only the digits
in [begin_bit, end_bit) are sorted, and from SYNC_MIN keys on, a pass whose digit is the same for
every key (seen in the histogram) is skipped.

Range rebasing: given `low`, the smallest key there can be, the digits are those of key - low, so
keys known to lie in [low, high] need only end_bit = (high - low).bit_length() bits: a rank whose
keys span 2^24 values sorts in 3 passes even where the keys themselves differ in 32 bits.

Memory: by default the input is left as it is and the passes ping-pong between two new arrays
(3x the keys' bytes, and as much again for 4/8-byte values). With overwrite=True the input is one
of the two buffers and `scratch` (or a new array) the other, so input + one scratch: the result
lands in the input after an even number of passes, in the scratch after an odd one.

Where CUB (cupy.sort / cupy.argsort, through CubEngine) runs instead of our kernels:
- below the sizes in MIN_N, per operation, where CUB measured faster (bench/local_sort.py,
  bench/RESULTS.md): launch and Python overheads weigh more there, and full-width key-only
  sorts only pay off on large arrays; a bit range narrower than the key ("narrow") saves passes;
  except that from GRAPH_MIN to GRAPH_MAX keys, on either side of MIN_N, a sort, argsort or
  sort of pairs of a kind seen before (its size, bits, low and code: float keys and descending
  orders too) replays our kernels as a CUDA graph (graphs.py), which costs the host one launch,
  not seven, and never waits for it;
- uint8/uint16 keys (CUB sorts them natively in 1-2 narrow passes; ours would widen them);
- 2^32 keys or more (our kernels keep 32-bit positions);
- keys that are not uint8/16/32/64, or not 1-D.
RadixEngine(min_n=k) overrides all of these sizes (and the uint8/16 rule): ours from k keys on;
uint8/uint16 keys are then widened to uint32 and sorted on their 8 or 16 bits. Payloads of 4 or
8 bytes ride through the passes; any other payload is gathered once at the end by the permutation.
CuPy is imported lazily, so this module imports where there is none.
"""

from __future__ import annotations

import ctypes
import functools
from typing import TYPE_CHECKING

import numpy as np

from ..cuda_source import compile_apart, load_module
from ..keys import UNSIGNED
from .cub import CubEngine
from .graphs import Graphs
from .rows import take

if TYPE_CHECKING:
    from typing_extensions import Unpack

    from .engine import SortOptions

RADIX_BITS = 8
BLOCK = 256  # threads per onesweep block; must match radix.cu
HIST_BLOCK = 1024  # histogram block; one per SM (radix.cu)
HIST_LANES = {4: 32, 8: 16}  # copies of each histogram counter, by key width (radix.cu)
ITEMS = {4: 18, 8: 16}  # keys per thread by key width; passed to radix.cu as ITEMS32/ITEMS64
KEY_ITEMS = {4: 24, 8: 18}  # the same for key-only passes (ITEMS32_KEYS/ITEMS64_KEYS)
# compile-time switches of radix.cu (see there); bench/local_sort.py --tune compares settings
DEFINES = {"RADIX_LOOKBACK_WINDOW": 4, "RADIX_EARLY_COUNTS": 1, "RADIX_KEY_BLOCKS": 3}
SYNC_MIN = 1 << 22  # from here on the host learns which digits are constant, to skip them
MAX_PASSES = 8  # 64-bit keys, 8-bit digits
# From these sizes on our kernels run, CUB below: the smallest power of two from which ours was
# at least as fast in bench/local_sort.py (bench/RESULTS.md). "sort" is for
# 32-bit keys, "sort64" for 64-bit ones, "narrow" for a bit range (of key - low) that saves
# passes. "narrow64" (64-bit keys, a pass or more saved) is not measured but inferred: with all
# 8 passes ours was about even with CUB at 2^24 and a little slower below, and CUB sorts all 64
# bits whatever the range, so one pass fewer (1/8 less work) wins from 2^24. "coded" and
# "coded64": signed and float keys, which our passes order by their codes as they go, where CUB
# needs a pass to make the codes and one to undo them (measured through the API). Below
# GRAPH_MAX a sort of a kind seen before is our graph instead, on either side of these sizes.
MIN_N = {
    "sort": 1 << 25,
    "sort64": 1 << 24,
    "coded": 1 << 25,
    "coded64": 1 << 23,
    "narrow": 1 << 25,
    "narrow64": 1 << 24,
    "argsort": 1 << 25,
    "pairs": 1 << 21,
}
MAX_N = (1 << 32) - 1
# Sorts of a kind seen before, from GRAPH_MIN to GRAPH_MAX keys, replayed as graphs (graphs.py):
# from GRAPH_MIN they beat CUB's sort, and up to GRAPH_MAX our kernels launched one by one too,
# whose host waits to learn which digits vary (2^24-2^26 keys of every width: 1.10-1.31x CUB
# against 0.84-1.14x, bench/history/graph_max.py); from there skipping those digits, which a
# graph cannot, is worth more than the host's time. "coded": float keys and descending orders,
# where CUB's route adds a pass to make the codes and one to undo them
GRAPH_MIN, GRAPH_MAX = 1 << 16, 1 << 27
GRAPHED = ("sort", "sort64", "narrow", "narrow64", "coded", "coded64", "argsort", "pairs")
FLAGS_ONCE_BYTES = 64 << 20  # up to this, all passes' look-back flags are zeroed by one memset
NULL = np.uintp(0)  # a null device pointer, for kernel arguments left out
WIDE_ROWS = 1 << 30  # from here a tile's look-back flag takes two words (radix.cu: counts < 2^30)

WORD_NAME = {4: "u32", 8: "u64"}  # the kernels' template names of 4- and 8-byte words
_WORD_CHAR = {kb: np.dtype(UNSIGNED[kb]).char for kb in WORD_NAME}  # their dtypes' codes
_VALUE_DTYPE = {"u32": np.uint32, "u64": np.uint64, "i64": np.int64}
CODE_LOAD, CODE_STORE = 16, 32  # a pass's code: which ends meet raw keys (onesweep.cuh)
# codes (keys.NumericCodec.code) with a build of radix.cu of their own (onesweep.cuh:
# RADIX_FIXED_CODE): ascending signed and float keys; the others' kernels read their code
FIXED_CODES = (1, 2)
MODES = {"sort": "keys", "argsort": "argsort", "pairs": "pairs"}  # radix_sort's, by operation
BUILDS = (0, -1, *FIXED_CODES)  # radix.cu's builds (_build): plain, coded, fixed codes
KEYS_ONLY = ("u32", "u32", 0)  # the (value in, value out, mode) of a pass without values
# (value in, value out, mode) of every onesweep instance; mode 0 keys, 1 read values, 2 index
_VALUE_KINDS = (
    KEYS_ONLY,
    ("u32", "u32", 1),
    ("u64", "u64", 1),
    ("u32", "u32", 2),
    ("u32", "i64", 2),
    ("u32", "i64", 1),
)


def _cupy():
    import cupy

    return cupy


def _histogram_name(key_bytes: int, passes: int) -> str:
    return f"radix_histogram<{WORD_NAME[key_bytes]},{passes}>"


def _onesweep_name(key: str, vin: str, vout: str, mode: int) -> str:
    return f"radix_onesweep<{key},{vin},{vout},{mode}>"


def compile_all() -> None:
    """Compile every instance a sort may use (python -m distsort compile), all builds at once."""
    compile_apart([functools.partial(_module, build) for build in BUILDS])


def _build(code: int) -> int:
    """The build of radix.cu whose kernels run with this code (keys.NumericCodec.code, with
    CODE_LOAD and CODE_STORE): 0 the plain one, a fixed code's own, or -1 the coded build
    that reads its code from the kernels' argument."""
    kind = code & (CODE_LOAD - 1)
    return kind if kind == 0 or kind in FIXED_CODES else -1


@functools.cache
def _module(build: int):
    """Compile a build of radix.cu (_build) once per process (and once per machine:
    cuda_source.py). The coded builds order raw signed and float keys by their codes
    (RADIX_KEY_CODES), apart so that the passes over codes stay as they are; a fixed code's
    knows its code at compile time (RADIX_FIXED_CODE: onesweep.cuh)."""
    names = ["radix_scan"] + [_histogram_name(kb, p) for kb in (4, 8) for p in range(1, kb + 1)]
    names += [_onesweep_name(k, *v) for k in ("u32", "u64") for v in _VALUE_KINDS]
    coded = (("RADIX_KEY_CODES", 1), ("RADIX_FIXED_CODE", build)) if build else ()
    return load_module("local/radix.cu", tuple(names), onesweep_defines() + coded)


def onesweep_defines() -> tuple:
    """The tile sizes and look-back settings of onesweep.cuh, for every module that includes it."""
    defines = {"ITEMS32": ITEMS[4], "ITEMS64": ITEMS[8], "ITEMS32_KEYS": KEY_ITEMS[4],
               "ITEMS64_KEYS": KEY_ITEMS[8], **DEFINES}
    return tuple(defines.items())


@functools.cache
def _kernel(device: int, name: str, code: int = 0):
    """A compiled kernel of radix.cu on a device (looked up once: launches stay cheap), of the
    build that runs this code (_build)."""
    kernel = _module(_build(code)).get_function(name)
    if name.startswith("radix_histogram"):  # up to 8 passes x 256 bins x 16 copies, 4 bytes
        kernel.max_dynamic_shared_size_bytes = 128 << 10
    return kernel


@functools.cache
def sm_count(device: int) -> int:
    return _cupy().cuda.Device(device).attributes["MultiProcessorCount"]


@functools.cache
def placeholder(device: int):
    """A one-word device array standing in for the value arrays of keys-only passes."""
    return _cupy().empty(1, dtype=np.uint32)


def value_words(values):
    """Values of 4 or 8 bytes as the unsigned words of their width, which the kernels move."""
    return values.view(UNSIGNED[values.dtype.itemsize])


def digit_passes(begin_bit: int, end_bit: int) -> list[tuple[int, int]]:
    """(shift, bits) of each LSD pass over [begin_bit, end_bit), least significant first."""
    return [(s, min(RADIX_BITS, end_bit - s)) for s in range(begin_bit, end_bit, RADIX_BITS)]


def _aligned(cp, a):
    """1-D, contiguous and 16-byte aligned (the histogram reads 16-byte vectors)."""
    a = cp.ascontiguousarray(a).ravel()
    return a if a.data.ptr % 16 == 0 else a.copy()


def tile_keys(key_bytes: int, mode: str) -> int:
    """Keys per onesweep tile: key-only passes (mode 'keys') and those that carry values."""
    return BLOCK * (KEY_ITEMS if mode == "keys" else ITEMS)[key_bytes]


def flag_words(tiles: int, rows: int) -> int:
    """32-bit words of one pass's look-back flags: 256 digits per tile, two words when wide."""
    return tiles * 256 * (2 if rows >= WIDE_ROWS else 1)


class _State:
    """Device scratch of one sort: digit counts, digit bases, tile counters, look-back flags."""

    def __init__(self, cp, n: int, key_bytes: int, npasses: int, mode: str):
        self.tiles = -(-n // tile_keys(key_bytes, mode))
        self.wide = n >= WIDE_ROWS
        self.region = flag_words(self.tiles, n)  # u32 words per pass
        self.once = self.region * 4 * npasses <= FLAGS_ONCE_BYTES
        head = 2 * npasses * 256 + 32
        regions = npasses if self.once else 1
        self.words = cp.zeros(head + regions * self.region, dtype=cp.uint32)
        self.counts = self.words[: npasses * 256]
        self.bases = self.words[npasses * 256 : 2 * npasses * 256]
        self.counters = self.words[2 * npasses * 256 : head - 16]
        self.skip = self.words[head - 16 : head]  # radix_scan: 1 where a pass's digit is constant
        self.flags = self.words[head:]

    def pass_args(self, p: int, i: int) -> tuple:
        """Bases, tile counter and zeroed flags for pass p, the i-th pass that runs."""
        if self.once:
            flags = self.flags[p * self.region : (p + 1) * self.region]
        else:
            flags = self.flags
            if i > 0:
                flags.fill(0)
        return self.bases[p * 256 : (p + 1) * 256], self.counters[p : p + 1], flags


@functools.cache
def _constant_words(device: int) -> tuple:
    """Page-locked host words, one per pass, that radix_scan sets where a pass's digit is the
    same for every key: (their device address, a NumPy view), kept for the process's lifetime.
    Read on the host after the scan, with no copy: a copy from the device (even of 32 bytes)
    waits for the copies other streams have in flight, which held each out-of-core run back by
    a whole download."""
    runtime = _cupy().cuda.runtime
    host = runtime.hostAlloc(4 * MAX_PASSES, getattr(runtime, "hostAllocMapped", 2))  # kept
    words = np.ctypeslib.as_array((ctypes.c_uint32 * MAX_PASSES).from_address(host))
    return host, words  # unified addressing: kernels take the host address as it is


def _active_passes(npasses: int, device: int, scanned) -> list[int]:
    """All passes, less those whose digit is constant: known once the event `scanned`,
    recorded after radix_scan, has completed; where there is none (fewer than SYNC_MIN keys,
    or no pass at all), all passes."""
    if scanned is None:
        return list(range(npasses))
    scanned.synchronize()  # radix_scan has set the words
    constant = _constant_words(device)[1]
    return [p for p in range(npasses) if not constant[p]]


def _histogram(keys, low, state: _State, bits: tuple, code: int, learn: bool, in_end=None):
    """Digit counts and bases of every pass of bits (as digit_counts); from SYNC_MIN keys on,
    where learn, returns an event recorded once the constant-digit flags are set (else None)."""
    if keys.size < SYNC_MIN or not learn:
        digit_counts(keys, low, bits, state.counts, state.bases, code=code, in_end=in_end)
        return None
    constant = _constant_words(keys.device.id)[0]
    digit_counts(keys, low, bits, state.counts, state.bases, constant, state.skip, code)
    scanned = _cupy().cuda.Event(block=False, disable_timing=True)
    scanned.record()
    return scanned


def digit_counts(keys, low, bits: tuple, counts, bases, constant: int = 0, skip=None,
                 code: int = 0, in_end=None) -> None:
    """Add the digit counts of every pass of bits = (begin_bit, end_bit, passes) of key - low to
    counts (passes x 256 uint32, 16-byte aligned keys), then write each pass's exclusive scan to
    bases; flag the passes whose digit never varies at `constant` (a mapped host address) and in
    `skip` (device words), where given. code: the keys' digits are those of their codes
    (keys.NumericCodec.code), 0 where they are codes. in_end: a device word that, where not 0,
    is the address of the keys read instead (radix.cu: Ends)."""
    n, kb, dev = keys.size, keys.dtype.itemsize, keys.device.id
    nvec = n // (16 // kb)
    grid = max(1, min(sm_count(dev), -(-nvec // HIST_BLOCK)))
    smem = bits[2] * 256 * HIST_LANES[kb] * 4
    args = (keys, np.uint64(n), low) + tuple(np.int32(b) for b in bits[:2]) + (np.int32(code),)
    hist = _kernel(dev, _histogram_name(kb, bits[2]), code)
    hist((grid,), (HIST_BLOCK,), args + (counts, _or_null(in_end)), shared_mem=smem)
    scan = _kernel(dev, "radix_scan")
    scan((1,), (256,), (counts, np.int32(bits[2]), bases, np.uint64(constant), _or_null(skip)))


def _or_null(words):
    """A kernel's optional device array argument: the array, or a null pointer."""
    return NULL if words is None else words


def _value_plan(mode: str, vals, i: int, last: bool) -> tuple[str, str, int]:
    """(value in, value out, kernel mode) of the i-th pass that runs."""
    if mode == "keys":
        return KEYS_ONLY
    if mode == "pairs":
        word = WORD_NAME[vals.dtype.itemsize]
        return word, word, 1
    return "u32", "i64" if last else "u32", 2 if i == 0 else 1


def onesweep(src, dst, kinds, shift_bits, low, pass_args, wide: bool, tiles: int,
             descriptors=(), skip=None, code: int = 0, ends: tuple = (None, None)) -> None:
    """Launch one onesweep pass over `tiles` tiles: src/dst are (keys, values) arrays, kinds the
    value kind, pass_args (bases, tile counter, zeroed flags); descriptors, where given, are
    (tile_start, tile_rows) uint32 arrays, one entry per tile (radix.cu), else
    tiles are consecutive TILE-key runs of src; skip, where given, a device word that, where
    set by radix_scan, makes the pass do nothing; code as in digit_counts, with CODE_LOAD and
    CODE_STORE where the pass reads or writes raw keys (_PingPong.pass_code); ends, where given,
    the device words (in_end, out_ends) that stand for src and dst (radix.cu: Ends)."""
    vin, vout, vmode = kinds
    name = _onesweep_name(WORD_NAME[src[0].dtype.itemsize], vin, vout, vmode)
    kernel = _kernel(src[0].device.id, name, code)
    scalars = (np.uint64(src[0].size), low, np.int32(shift_bits[0]), np.int32(shift_bits[1]),
               np.int32(code))
    tail = tuple(pass_args) + (np.int32(wide),)
    tail += tuple(descriptors) + (NULL,) * (2 - len(descriptors))
    tail += tuple(_or_null(w) for w in (skip, *ends))
    kernel((tiles,), (BLOCK,), src[:1] + dst[:1] + src[1:] + dst[1:] + scalars + tail)


def _scratch(cp, keys, scratch):
    """The first ping-pong key buffer: scratch[:n] where given (checked), else a new array."""
    if scratch is None:
        return cp.empty_like(keys)
    if scratch.dtype != keys.dtype or scratch.ndim != 1 or not scratch.flags.c_contiguous:
        got = f"{scratch.ndim}-D {scratch.dtype}" + ("" if scratch.flags.c_contiguous else " view")
        raise ValueError(f"scratch must be a 1-D contiguous {keys.dtype} array, not {got}")
    if scratch.size < keys.size:
        raise ValueError(f"scratch holds {scratch.size} keys, fewer than the {keys.size} sorted")
    out = scratch[: keys.size]
    lo, hi = keys.data.ptr, keys.data.ptr + keys.nbytes
    if out.data.ptr < hi and lo < out.data.ptr + out.nbytes:
        raise ValueError("scratch overlaps the keys")
    return out


def radix_sort(
    keys,
    vals=None,
    mode: str = "keys",
    begin_bit: int = 0,
    end_bit: int = 64,
    low: int = 0,
    overwrite: bool = False,
    scratch=None,
    code: int = 0,
    learn: bool = True,
    ends=None,
):
    """Sort unsigned 32/64-bit keys (1-D, aligned, 2 <= n < 2^32) on bits [begin_bit, end_bit)
    of key - low (taken modulo 2^bits: keys below low would sort after the others).
    With code (keys.NumericCodec.code), the words are the bits of signed or float keys, ordered
    by their codes (low and the bits are then the codes'), and written back as they were.
    learn=False: every pass runs, with no wait for the host to learn which digits are constant
    (a sort captured as a graph cannot wait). ends: four device words (uint64) that, where not
    0, stand for the keys (and values) the histogram and the first pass read and for the keys
    and values the last pass writes (radix.cu: Ends), so a sort captured as a graph serves
    other arrays (graphs.py); with learn=False and at least one pass.

    mode 'keys': returns (keys, None); 'pairs': vals (uint32/uint64) permuted alike;
    'argsort': returns (keys, int64 permutation). Stable. The keys returned are the input keys
    (low is only subtracted to take digits).

    The passes ping-pong between two key buffers (two value buffers in 'pairs'): the first is
    scratch[:n] where scratch is given (1-D, contiguous, the keys' dtype, not overlapping them),
    else a new array; the second is keys itself (and vals) with overwrite, else a new array.
    So an even number of passes that run leaves the result in keys (and vals), an odd number in
    the scratch; what is returned is whichever buffer holds it. With overwrite, the contents of
    keys and vals afterwards are unspecified unless they are what is returned.
    """
    cp = _cupy()
    n, kb = keys.size, keys.dtype.itemsize
    if not 0 <= int(low) < 1 << (8 * kb):
        raise ValueError(f"low={low} is not a {keys.dtype} value")
    low = UNSIGNED[kb](int(low))
    passes = digit_passes(begin_bit, min(end_bit, 8 * kb))
    if ends is not None and (learn or not passes):
        raise ValueError("ends are for sorts of at least one pass with learn=False")
    state = _State(cp, n, kb, len(passes), mode)
    scanned = None
    if passes:
        bits = (begin_bit, min(end_bit, 8 * kb), len(passes))
        scanned = _histogram(keys, low, state, bits, code, learn,
                             None if ends is None else ends[:1])
    pong = _PingPong(cp, keys, vals, mode, overwrite, scratch, code, ends)
    # Keys only: the first pass is queued before the host reads which passes vary (it returns at
    # once on the device where its digit does not), so the GPU does not wait for the host.
    guessed = None
    if scanned is not None and mode == "keys":
        guessed = pong.run(state, 0, 0, passes[0], low, last=False, skip=state.skip[:1])
    active = _active_passes(len(passes), keys.device.id, scanned)
    if not active:  # already in order on these bits
        return _unsorted(cp, keys, vals, mode, pong.keys[0] if not overwrite else None)
    start = 0
    if guessed is not None and active[0] == 0:
        (pong.src, pong.raw), start = guessed, 1
    for i in range(start, len(active)):
        p = active[i]
        pong.src, pong.raw = pong.run(state, i, p, passes[p], low, last=i == len(active) - 1)
    return pong.src[0], None if mode == "keys" else pong.src[1]


def _unsorted(cp, keys, vals, mode: str, copy) -> tuple:
    """radix_sort's result where no pass is needed: the input as it is, or copied into `copy`
    (the keys) and a new array (the values) where that is given."""
    if copy is not None:
        copy[...] = keys
    out_k = keys if copy is None else copy
    if mode == "keys":
        return out_k, None
    if mode == "argsort":
        return out_k, cp.arange(keys.size, dtype=cp.int64)
    return out_k, vals if copy is None else vals.copy()


class _PingPong:
    """The key (and value) buffers that one sort's passes alternate between (radix_sort), each
    allocated when a pass first writes it; src is what the next pass reads."""

    def __init__(self, cp, keys, vals, mode: str, overwrite: bool, scratch, code: int, ends):
        self.cp, self.n, self.vals, self.mode, self.code = cp, keys.size, vals, mode, code
        self.ends = ends  # radix_sort's: the first pass reads ends[:2], the last writes ends[2:]
        self.dummy = placeholder(keys.device.id)
        self.keys = [_scratch(cp, keys, scratch), keys if overwrite else None]
        self.values = [None, vals if overwrite and mode == "pairs" else None]
        self.src = (keys, vals if mode == "pairs" else self.dummy)
        self.raw = True  # src's keys are the caller's words, not yet their codes (code)

    def pass_code(self, raw_out: bool) -> int:
        """The kernels' code for a pass from src that writes raw keys (raw_out) or codes: with
        the ends that meet raw keys (CODE_LOAD, CODE_STORE); 0 where neither does, so the
        passes between a sort's first and last run the plain build (onesweep.cuh)."""
        if not self.code or not (self.raw or raw_out):
            return 0
        return self.code | CODE_LOAD * self.raw | CODE_STORE * raw_out

    def run(self, state: _State, i: int, p: int, shift_bits, low, last: bool, skip=None):
        """Launch pass p, the i-th that runs, from src; returns the (keys, values) it writes
        and whether those keys are raw (the last pass's; a guessed first pass's, skip given,
        which may prove the only one) or codes."""
        _, vout, vmode = kinds = _value_plan(self.mode, self.vals, i, last)
        if self.keys[i % 2] is None:
            self.keys[i % 2] = self.cp.empty_like(self.src[0])
        values = self.values[i % 2]
        if vmode and (values is None or values.dtype != _VALUE_DTYPE[vout]):
            values = self.values[i % 2] = self.cp.empty(self.n, dtype=_VALUE_DTYPE[vout])
        dst = (self.keys[i % 2], values if vmode else self.dummy)
        pair = self.src if vmode == 1 else (self.src[0], self.dummy)
        raw_out = last or skip is not None
        ends = (None, None) if self.ends is None else \
            (self.ends[:2] if i == 0 else None, self.ends[2:] if last else None)
        onesweep(pair, dst, kinds, shift_bits, low, state.pass_args(p, i), state.wide,
                 state.tiles, skip=skip, code=self.pass_code(raw_out), ends=ends)
        return dst, raw_out


class RadixEngine:
    """LocalSortEngine on our radix kernels; see the module docstring for where CUB runs.

    It also sorts raw numbers (the option codec, a keys.NumericCodec: keys of its dtype, in its
    order): our passes order 4- and 8-byte keys by their codes as they go (no pass encodes or
    decodes them); where CUB sorts, ascending integers go as they are, other keys are encoded
    before and decoded after. A codec that
    merges bits (canonical) is for argsort only: the keys it would give back are not theirs."""

    name = "radix"
    orders_numbers = True

    def __init__(self, min_n: int | None = None):
        self.min_n = min_n
        self._cub = None
        self.used: set[str] = set()
        self.graphs = Graphs()

    def release(self) -> None:
        """Let go of the kept graphs' buffers."""
        self.graphs.release()

    def within_budget(self):
        """A context in which no sort keeps a graph (graphs.Graphs.held_off): the out-of-core
        sort's, whose device memory is planned to a budget."""
        return self.graphs.held_off()

    def workspace_bytes(self, rows: int, row_bytes: int) -> int:
        """The passes' second buffer (the pipeline lends the sent rows as it, where they fit),
        the tiles' flags and the digit counts; where CUB sorts instead, its double buffer."""
        if rows < min(MIN_N.values()):
            return self._fallback().workspace_bytes(rows, row_bytes)
        return rows * row_bytes + (1 << 20)

    def _fallback(self):
        if self._cub is None:
            self._cub = CubEngine()
            self._cub.used = self.used  # what it sorts is noted as this engine's
        return self._cub

    def _ours(self, keys, op: str, begin_bit: int = 0, end_bit: int | None = None) -> bool:
        """Whether our kernels run for this call (else CUB)."""
        return self._route(keys, op, begin_bit, end_bit) != "cub"

    def _route(self, keys, op: str, begin_bit: int = 0, end_bit: int | None = None,
               low: int = 0, code: int = 0) -> str:
        """Who sorts this call: "cub", "ours", or "graph" (ours, replayed: graphs.py). Asked
        once a call: it notes a sighting of the call's kind (low and code included: a rank's
        low changes from sort to sort, and a graph holds it)."""
        kb = keys.dtype.itemsize
        if keys.ndim != 1 or keys.dtype.kind != "u" or kb not in (1, 2, 4, 8):
            return "cub"
        if not 2 <= keys.size <= MAX_N:
            return "cub"
        if self.min_n is not None:
            return "ours" if keys.size >= self.min_n else "cub"
        if kb < 4:
            return "cub"
        end = 8 * kb if end_bit is None else min(end_bit, 8 * kb)
        if op == "coded":
            op += "64" if kb == 8 else ""
        elif op == "sort":  # CUB (cupy.sort) sorts every bit: fewer passes are ours to win
            narrow = len(digit_passes(max(0, begin_bit), end)) < kb
            op = ("narrow" if narrow else "sort") + ("64" if kb == 8 else "")
        kind = (keys.size, keys.dtype.char, op, begin_bit, end_bit, int(low), code)
        if GRAPH_MIN <= keys.size < GRAPH_MAX and op in GRAPHED and self.graphs.ready(kind):
            return "graph"
        return "ours" if keys.size >= MIN_N[op] else "cub"

    def _run(self, keys, vals, mode: str, bits: tuple, low: int = 0, overwrite: bool = False,
             scratch=None, code: int = 0, replay: bool = False):
        """radix_sort on keys widened to 32 bits where narrower; bits is (begin_bit, end_bit);
        replay: by a graph (_route said "graph"), into new arrays whatever overwrite and
        scratch allow."""
        cp = _cupy()
        self.used.add("radix")
        width = 8 * keys.dtype.itemsize
        begin_bit = max(0, bits[0])
        end_bit = max(begin_bit, width if bits[1] is None else min(bits[1], width))
        if replay and end_bit > begin_bit:  # 32 or 64 bits, read where they are (aligned)
            return self._replayed(_aligned(cp, keys), vals, mode, (begin_bit, end_bit), low,
                                  code)
        if width >= 32:
            work = _aligned(cp, keys)
            copied = work.data.ptr != keys.data.ptr
        else:  # widened: a copy of ours, which a scratch of the caller's dtype cannot hold
            work, copied, scratch = keys.astype(cp.uint32), True, None
        # a copy of the keys is ours to overwrite, unless the caller's values ride along
        mine = overwrite or (copied and mode != "pairs")
        out_k, out_v = radix_sort(work, vals, mode, begin_bit, end_bit, low, mine, scratch, code)
        return (out_k if width >= 32 else out_k.astype(keys.dtype)), out_v

    def _replayed(self, keys, vals, mode: str, bits: tuple, low: int, code: int) -> tuple:
        """radix_sort's (keys, positions, values or None) of a sort by its graph (where _route
        said "graph": one is kept, or this kind was seen before): new arrays."""
        def sort(buffers, ends) -> tuple:
            out = radix_sort(*buffers, mode, *bits, low, True, None, code, learn=False,
                             ends=ends)
            return (None, out[1]) if mode == "argsort" else out  # its keys: not copied out

        placeholder(keys.device.id)  # kept by the process: made from CuPy's pool, not a graph's
        given = (keys, vals)
        replayed = self.graphs.run(_graph_kind(keys, mode, bits, low, code, vals), given, sort)
        return replayed if replayed is not None else self._run(keys, vals, mode, bits, low,
                                                               code=code)

    def replay(self, keys, op: str, codec, values=None):
        """op ('sort', 'argsort', or 'pairs' with values of 4 or 8 bytes; all bits) of raw
        numbers in the codec's order by the graph kept for its kind, where one is: the sorted
        keys, the positions, or both of the pairs, new arrays; else None, with nothing noted
        (the caller sorts as usual, which sights and captures). For callers whose layers would
        otherwise hold up a small sort's one launch (api.py)."""
        kb, vals = keys.dtype.itemsize, None
        if kb not in WORD_NAME or keys.ndim != 1 or not keys.flags.c_contiguous:
            return None
        if op == "pairs":
            if (values.ndim != 1 or values.dtype.itemsize not in WORD_NAME
                    or not values.flags.c_contiguous or values.size != keys.size):
                return None
            vals = value_words(values)
        mode = MODES[op]
        kind = _graph_kind(keys, mode, (0, 8 * kb), 0, codec.code, vals)
        replayed = self.graphs.replay(kind, (_aligned(_cupy(), keys), vals))
        if replayed is None:
            return None
        self.used.add("radix")
        if op == "argsort":
            return replayed[1]
        out_k = replayed[0].view(keys.dtype)
        return out_k if op == "sort" else (out_k, replayed[1].view(values.dtype))

    def sort(self, keys, begin_bit: int = 0, end_bit: int | None = None,
             **options: Unpack[SortOptions]):
        """Keys sorted ascending; see LocalSortEngine (engine.py) for low, overwrite, scratch.

        With overwrite (and scratch), the result is keys or scratch[:n] where our kernels run
        (not replayed): keys after an even number of passes, the scratch after an odd one
        (radix_sort).
        """
        keys, codec = _cupy().asarray(keys), options.pop("codec", None)
        if codec is not None:
            return _numbers(self, codec, "sort", keys, (begin_bit, end_bit), options)[0]
        route = self._route(keys, "sort", begin_bit, end_bit, options.get("low", 0))
        if route == "cub":
            if keys.size < 2:
                return keys if options.get("overwrite") else keys.copy()
            return self._fallback().sort(keys)
        return self._run(keys, None, "keys", (begin_bit, end_bit), **options,
                         replay=route == "graph")[0]

    def argsort(self, keys, begin_bit: int = 0, end_bit: int | None = None,
                **options: Unpack[SortOptions]):
        """Stable permutation (int64) that sorts keys ascending; keys may be overwritten."""
        cp = _cupy()
        keys, codec = cp.asarray(keys), options.pop("codec", None)
        if codec is not None:
            return _numbers(self, codec, "argsort", keys, (begin_bit, end_bit), options)[1]
        route = self._route(keys, "argsort", begin_bit, end_bit, options.get("low", 0))
        if route == "cub":
            if keys.size < 2:
                return cp.arange(keys.size, dtype=cp.int64)
            return self._fallback().argsort(keys).astype(cp.int64, copy=False)
        return self._run(keys, None, "argsort", (begin_bit, end_bit), **options,
                         replay=route == "graph")[1]

    def sort_pairs(self, keys, values, begin_bit: int = 0, end_bit: int | None = None,
                   **options: Unpack[SortOptions]):
        """(sorted keys, values permuted alike), stable; values is 1-D of any dtype.

        With overwrite, 4- and 8-byte values share the keys' ping-pong where our kernels run
        (not replayed: then new arrays): they come back in values after an even number of
        passes, else in a new array (scratch is for keys only).
        """
        cp = _cupy()
        keys, values, codec = cp.asarray(keys), cp.asarray(values), options.pop("codec", None)
        if codec is not None:
            return _numbers(self, codec, "pairs", keys, (begin_bit, end_bit), options, values)
        route = self._route(keys, "pairs", begin_bit, end_bit, options.get("low", 0))
        if route == "cub":
            if keys.size < 2:
                return (keys, values) if options.get("overwrite") else (keys.copy(),
                                                                        values.copy())
            return self._fallback().sort_pairs(keys, values)
        bits, replay = (begin_bit, end_bit), route == "graph"
        if values.dtype.itemsize not in (4, 8) or values.ndim != 1:
            return _ordered_pairs(self, keys, keys, values, bits, options, replay)
        words = value_words(cp.ascontiguousarray(values))
        out_k, out_v = self._run(keys, words, "pairs", bits, **options, replay=replay)
        return out_k, out_v.view(values.dtype)


def _ordered_pairs(engine: RadixEngine, words, keys, values, bits: tuple, options: dict,
                   replay: bool) -> tuple:
    """(keys, values) sorted by the words' stable order, for values the passes cannot carry
    (not 4 or 8 bytes, or rows): an argsort (replayed where `replay`: then it gives no keys),
    then the gathers."""
    out_k, order = engine._run(words, None, "argsort", bits, **options, replay=replay)
    sorted_keys = take(keys, order) if out_k is None else out_k.view(keys.dtype)
    return sorted_keys, take(values, order)


def _graph_kind(keys, mode: str, bits: tuple, low, code: int, vals=None) -> tuple:
    """The kind of sort a kept graph serves (graphs.py): the keys' count and width, and what
    its kernels hold (mode, bits, low, code, the values' width); the same for raw numbers as
    for their words."""
    width = "" if vals is None else _WORD_CHAR[vals.dtype.itemsize]
    return (keys.size, _WORD_CHAR[keys.dtype.itemsize], mode, *bits, int(low), code, width)


def _numbers(engine: RadixEngine, codec, op: str, keys, bits: tuple, options: dict,
             values=None) -> tuple:
    """(keys, values or order) of RadixEngine's op ('sort', 'argsort', 'pairs') on raw numbers
    in the codec's order: our passes take the codes as they go; CUB sorts ascending integers as
    they are, other keys' codes made by one pass before and decoded by one after."""
    cp = _cupy()
    if codec.lossy and op != "argsort":
        raise ValueError("a canonical codec loses keys' bits: it is for argsort only")
    words = keys.view(UNSIGNED[keys.dtype.itemsize])
    plain = codec.code in (0, 1)  # ascending integers: CUB orders them as they are
    route = "coded" if op == "sort" and not plain else op  # else CUB encodes and decodes
    narrow = keys.dtype.itemsize < 4
    who = "cub" if narrow else engine._route(words, route, *bits, options.get("low", 0),
                                              codec.code)
    if who == "cub":
        codes = keys if plain else codec.encode(keys, cp)
        # CUB, decided above (asking again would count a second sighting: graphs.py); narrow
        # keys' codes are the engine's to route (widened where min_n says)
        to = engine if narrow else engine._fallback()
        if op == "argsort":
            return None, to.argsort(codes, *bits, **options)
        if op == "sort":
            out_k, out_v = to.sort(codes, *bits, **options), None
        else:
            out_k, out_v = to.sort_pairs(codes, values, *bits, **options)
        return (out_k if plain else codec.decode(out_k, cp)), out_v
    code = {"code": codec.code}
    if op == "pairs" and (values.dtype.itemsize not in (4, 8) or values.ndim != 1):
        return _ordered_pairs(engine, words, keys, values, bits, {**options, **code},
                              who == "graph")
    vals = value_words(cp.ascontiguousarray(values)) if op == "pairs" else None
    mode = MODES[op]
    out_k, out_v = engine._run(words, vals, mode, bits, **options, **code,
                               replay=who == "graph")  # a replayed argsort gives no keys
    return (None if out_k is None else out_k.view(keys.dtype),
            out_v.view(values.dtype) if op == "pairs" else out_v)
