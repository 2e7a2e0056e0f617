"""Our radix sort engine (distsort/local/radix.py) against NumPy's stable sorts, on the GPU."""

from __future__ import annotations

import numpy as np
import pytest

from distsort.local import radix
from distsort.local.engine import get_engine
from distsort.local.radix import SYNC_MIN, RadixEngine

pytestmark = pytest.mark.gpu

DTYPES = [np.uint8, np.uint16, np.uint32, np.uint64]
PATTERNS = ["all-equal", "sorted", "reverse", "few-distinct"]


@pytest.fixture(scope="module")
def cp():
    return pytest.importorskip("cupy")


@pytest.fixture(scope="module")
def engine():
    return RadixEngine(min_n=0)  # our kernels at every size


def tile_of(dtype, mode: str = "keys") -> int:
    return radix.tile_keys(8 if np.dtype(dtype).itemsize == 8 else 4, mode)


def size_of(name: str, dtype, mode: str) -> int:
    """A named size; "tile" is the tile of the passes that `mode` runs (key-only passes take
    more keys per tile than those that carry values)."""
    tile = tile_of(dtype, mode)
    return {"0": 0, "1": 1, "tile-1": tile - 1, "tile+1": tile + 1, "2^20+3": (1 << 20) + 3}[name]


def random_keys(rng, dtype, n: int) -> np.ndarray:
    return rng.integers(0, np.iinfo(dtype).max, n, dtype=dtype, endpoint=True)


def pattern_keys(rng, dtype, n: int, pattern: str) -> np.ndarray:
    if pattern == "all-equal":
        return np.full(n, np.iinfo(dtype).max // 3, dtype=dtype)
    if pattern == "few-distinct":
        return rng.choice(random_keys(rng, dtype, 5), n)
    x = np.sort(random_keys(rng, dtype, n))
    return x if pattern == "sorted" else x[::-1].copy()


@pytest.mark.parametrize("size", ["0", "1", "tile-1", "tile+1", "2^20+3"])
@pytest.mark.parametrize("dtype", DTYPES)
def test_sort_and_argsort_sizes(cp, engine, dtype, size):
    rng = np.random.default_rng(1)
    x = random_keys(rng, dtype, size_of(size, dtype, "keys"))
    got = engine.sort(cp.asarray(x))
    assert got.dtype == x.dtype
    np.testing.assert_array_equal(got.get(), np.sort(x))
    x = random_keys(rng, dtype, size_of(size, dtype, "argsort"))
    order = engine.argsort(cp.asarray(x))
    assert order.dtype == np.int64
    np.testing.assert_array_equal(order.get(), np.argsort(x, kind="stable"))


@pytest.mark.parametrize("n", [70001, SYNC_MIN + 5])  # below / above the constant-digit skip
@pytest.mark.parametrize("pattern", PATTERNS)
@pytest.mark.parametrize("dtype", DTYPES)
def test_patterns(cp, engine, dtype, pattern, n):
    x = pattern_keys(np.random.default_rng(2), dtype, n, pattern)
    np.testing.assert_array_equal(engine.sort(cp.asarray(x)).get(), np.sort(x))
    order = engine.argsort(cp.asarray(x)).get()
    np.testing.assert_array_equal(order, np.argsort(x, kind="stable"))


@pytest.mark.parametrize(
    "vdtype", [np.uint32, np.float32, np.uint64, np.int64, np.float64, np.int16]
)
@pytest.mark.parametrize("kdtype", DTYPES)
def test_pairs(cp, engine, kdtype, vdtype):
    rng = np.random.default_rng(3)
    n = 3 * tile_of(kdtype) + 17
    x = rng.choice(random_keys(rng, kdtype, n // 4), n)  # duplicates: payload order matters
    v = rng.integers(-1000, 1000, n).astype(vdtype)
    got_k, got_v = engine.sort_pairs(cp.asarray(x), cp.asarray(v))
    order = np.argsort(x, kind="stable")
    np.testing.assert_array_equal(got_k.get(), x[order])
    assert got_v.dtype == v.dtype
    np.testing.assert_array_equal(got_v.get(), v[order])


@pytest.mark.parametrize("kdtype", [np.uint32, np.uint64])
def test_stability_large(cp, engine, kdtype):
    rng = np.random.default_rng(4)
    n = SYNC_MIN + 12345
    x = rng.integers(0, 1000, n).astype(kdtype) << np.array(20, kdtype)  # 10 varying bits
    k, idx = engine.sort_pairs(cp.asarray(x), cp.arange(n, dtype=cp.uint32))
    np.testing.assert_array_equal(idx.get(), np.argsort(x, kind="stable"))
    np.testing.assert_array_equal(k.get(), np.sort(x))


@pytest.mark.parametrize(
    "dtype,begin_bit,end_bit",
    [
        (np.uint32, 8, 24),
        (np.uint32, 0, 16),
        (np.uint32, 4, 13),
        (np.uint64, 20, 61),
        (np.uint16, 3, 11),
    ],
)
def test_bit_range_sorts_those_bits_stably(cp, engine, dtype, begin_bit, end_bit):
    rng = np.random.default_rng(5)
    x = random_keys(rng, dtype, 50001)
    width = end_bit - begin_bit
    digit = (x >> np.array(begin_bit, dtype)) & np.array((1 << width) - 1, dtype)
    order = np.argsort(digit, kind="stable")
    np.testing.assert_array_equal(engine.sort(cp.asarray(x), begin_bit, end_bit).get(), x[order])
    np.testing.assert_array_equal(engine.argsort(cp.asarray(x), begin_bit, end_bit).get(), order)


def test_24_varying_bits(cp, engine):
    rng = np.random.default_rng(6)
    x = (rng.integers(0, 1 << 24, SYNC_MIN + 3) + 0x5A000000).astype(np.uint32)
    np.testing.assert_array_equal(engine.sort(cp.asarray(x), 0, 24).get(), np.sort(x))
    np.testing.assert_array_equal(engine.sort(cp.asarray(x)).get(), np.sort(x))  # skips a pass


def test_unaligned_view_and_fallback(cp):
    x = np.random.default_rng(7).integers(0, 2**32, 100003, dtype=np.uint32)
    d = cp.asarray(x)[1:]
    np.testing.assert_array_equal(RadixEngine(min_n=0).sort(d).get(), np.sort(x[1:]))
    small = RadixEngine(min_n=1 << 20)  # CUB below min_n
    np.testing.assert_array_equal(small.sort(d).get(), np.sort(x[1:]))
    np.testing.assert_array_equal(small.argsort(d).get(), np.argsort(x[1:], kind="stable"))
    default = RadixEngine()  # CUB at this size, and for 16-bit keys
    np.testing.assert_array_equal(default.sort(d).get(), np.sort(x[1:]))
    h = x.astype(np.uint16)
    np.testing.assert_array_equal(default.sort(cp.asarray(h)).get(), np.sort(h))
    k, v = default.sort_pairs(d, d + 1)
    np.testing.assert_array_equal(k.get(), np.sort(x[1:]))
    np.testing.assert_array_equal(v.get(), np.sort(x[1:]) + 1)


def test_get_engine_names(cp):
    assert get_engine("gpu").name == "radix"
    assert get_engine("gpu", "radix").name == "radix"
    assert get_engine("gpu", "cub").name == "cub"


# (end_bit, passes): an even number of passes ends in the input, an odd one in the scratch
PARITY = [(16, 2), (24, 3)]


def same(a, b) -> bool:
    """Whether device arrays a and b start at the same address (one is the other's buffer)."""
    return a.data.ptr == b.data.ptr


@pytest.mark.parametrize("with_scratch", [False, True])
@pytest.mark.parametrize("end_bit,passes", PARITY)
@pytest.mark.parametrize("size", ["tile+1", "2^20+3"])
@pytest.mark.parametrize("dtype", [np.uint32, np.uint64])
def test_overwrite_sort(cp, engine, dtype, size, end_bit, passes, with_scratch):
    rng = np.random.default_rng(8)
    n = size_of(size, dtype, "keys")
    x = rng.integers(0, 1 << end_bit, n, dtype=np.uint64).astype(dtype)
    keys = cp.asarray(x)
    scratch = cp.zeros(n + 7, dtype=dtype) if with_scratch else None  # longer than needed
    got = engine.sort(keys, 0, end_bit, overwrite=True, scratch=scratch)
    assert got.dtype == x.dtype and got.size == n
    np.testing.assert_array_equal(got.get(), np.sort(x))
    if passes % 2 == 0:
        assert same(got, keys)
    elif with_scratch:
        assert same(got, scratch)
    else:
        assert not same(got, keys)


@pytest.mark.parametrize("end_bit,passes", PARITY)
@pytest.mark.parametrize("dtype", [np.uint32, np.uint64])
def test_scratch_without_overwrite_keeps_input(cp, engine, dtype, end_bit, passes):
    rng = np.random.default_rng(9)
    x = rng.integers(0, 1 << end_bit, 70001, dtype=np.uint64).astype(dtype)
    keys, scratch = cp.asarray(x), cp.empty(70001, dtype=dtype)
    got = engine.sort(keys, 0, end_bit, scratch=scratch)
    np.testing.assert_array_equal(got.get(), np.sort(x))
    np.testing.assert_array_equal(keys.get(), x)  # overwrite=False: input untouched
    assert same(got, scratch) == (passes % 2 == 1)
    order = engine.argsort(keys, 0, end_bit, scratch=scratch)
    np.testing.assert_array_equal(order.get(), np.argsort(x, kind="stable"))
    np.testing.assert_array_equal(keys.get(), x)


@pytest.mark.parametrize("with_scratch", [False, True])
@pytest.mark.parametrize("end_bit,passes", PARITY)
@pytest.mark.parametrize("vdtype", [np.float32, np.uint64, np.int16])
@pytest.mark.parametrize("kdtype", [np.uint32, np.uint64])
def test_overwrite_pairs_and_argsort(cp, engine, kdtype, vdtype, end_bit, passes, with_scratch):
    rng = np.random.default_rng(10)
    n = 3 * tile_of(kdtype) + 17
    x = rng.integers(0, 1 << end_bit, n // 4, dtype=np.uint64).astype(kdtype)
    x = rng.choice(x, n)  # duplicates: payload order matters
    v = rng.integers(-1000, 1000, n).astype(vdtype)
    order = np.argsort(x, kind="stable")
    keys, vals = cp.asarray(x), cp.asarray(v)
    scratch = cp.empty(n, dtype=kdtype) if with_scratch else None
    got_k, got_v = engine.sort_pairs(keys, vals, 0, end_bit, overwrite=True, scratch=scratch)
    np.testing.assert_array_equal(got_k.get(), x[order])
    assert got_v.dtype == v.dtype
    np.testing.assert_array_equal(got_v.get(), v[order])
    if passes % 2 == 0:
        assert same(got_k, keys)
        assert same(got_v, vals) == (v.itemsize in (4, 8))  # other payloads are gathered
    elif with_scratch:
        assert same(got_k, scratch)
    got = engine.argsort(cp.asarray(x), 0, end_bit, overwrite=True, scratch=scratch)
    assert got.dtype == np.int64
    np.testing.assert_array_equal(got.get(), order)


@pytest.mark.parametrize("kdtype", [np.uint32, np.uint64])
def test_overwrite_after_skipped_passes(cp, engine, kdtype):
    """From SYNC_MIN keys on constant digits are skipped: 10 varying bits at 20-29 leave the
    passes at bits 16 and 24, two, so the result is back in the input."""
    rng = np.random.default_rng(11)
    n = SYNC_MIN + 12345
    x = rng.integers(0, 1000, n).astype(kdtype) << np.array(20, kdtype)
    keys, vals = cp.asarray(x), cp.arange(n, dtype=cp.uint32)
    got_k, got_v = engine.sort_pairs(keys, vals, overwrite=True, scratch=cp.empty_like(keys))
    np.testing.assert_array_equal(got_v.get(), np.argsort(x, kind="stable"))
    np.testing.assert_array_equal(got_k.get(), np.sort(x))
    assert same(got_k, keys) and same(got_v, vals)
    same_keys = cp.full(n, 5, dtype=kdtype)  # no pass runs at all
    got = engine.sort(same_keys, overwrite=True)
    assert same(got, same_keys) and bool((got == 5).all())
    got = engine.sort(same_keys, scratch=cp.zeros(n, dtype=kdtype))
    assert not same(got, same_keys) and bool((got == 5).all())


@pytest.mark.parametrize("kdtype", [np.uint32, np.uint64])
@pytest.mark.parametrize("varying", [(20, 30), (0, 8)])
def test_first_pass_queued_before_the_skips_are_known(cp, engine, kdtype, varying):
    """Key sorts from SYNC_MIN keys on queue the first pass before the host has read which
    passes are constant; the kernel does nothing where it is. Bits 20-29 vary: pass 0 is
    skipped on the device, passes 2 and 3 run; bits 0-7 and 16-23 vary: passes 0 and 2 run.
    Two passes in both, so the result is back in the input."""
    rng = np.random.default_rng(13)
    n = SYNC_MIN + 777
    lo, hi = varying
    x = rng.integers(0, 1 << (hi - lo), n).astype(kdtype) << np.array(lo, kdtype)
    if lo == 0:
        x |= rng.integers(0, 256, n).astype(kdtype) << np.array(16, kdtype)
    keys = cp.asarray(x)
    got = engine.sort(keys, overwrite=True, scratch=cp.empty_like(keys))
    np.testing.assert_array_equal(got.get(), np.sort(x))
    assert same(got, keys)


@pytest.mark.parametrize("overwrite", [False, True])
def test_empty_bit_range_from_sync_min(cp, engine, overwrite):
    """No bit to sort (end_bit = begin_bit: the finish of a rank whose key range is one key)
    from SYNC_MIN keys on, where the constant-digit check runs: no pass, the keys as they are."""
    x = cp.asarray(np.random.default_rng(15).integers(0, 1 << 32, SYNC_MIN + 9, dtype=np.uint64)
                   .astype(np.uint32))
    want = x.copy()
    got = engine.sort(x, 0, 0, overwrite=overwrite)
    assert bool((got == want).all()) and same(got, x) == overwrite


@pytest.mark.parametrize("dtype", [np.uint8, np.uint16])
def test_overwrite_and_low_narrow_dtypes(cp, engine, dtype):
    """uint8/16 keys are widened to uint32 for our kernels; a scratch of their dtype is unused."""
    rng = np.random.default_rng(12)
    x = rng.integers(100, 151, 70001).astype(dtype)
    scratch = cp.empty(70001, dtype=dtype)
    got = engine.sort(cp.asarray(x), 0, 6, low=100, overwrite=True, scratch=scratch)
    assert got.dtype == x.dtype
    np.testing.assert_array_equal(got.get(), np.sort(x))
    order = engine.argsort(cp.asarray(x), 0, 6, low=100, overwrite=True)
    np.testing.assert_array_equal(order.get(), np.argsort(x, kind="stable"))


def test_overwrite_small_and_bad_scratch(cp, engine):
    one = cp.asarray(np.array([7], dtype=np.uint32))
    assert same(engine.sort(one, overwrite=True), one)
    assert not same(engine.sort(one), one)
    k, v = engine.sort_pairs(one, one + 1, overwrite=True)
    assert same(k, one) and int(v[0]) == 8
    keys = cp.arange(100, dtype=cp.uint32)[::-1].copy()
    bad = [
        cp.empty(99, dtype=cp.uint32),  # too short
        cp.empty(100, dtype=cp.uint64),  # other dtype
        cp.empty(200, dtype=cp.uint32)[::2],  # not contiguous
    ]
    for scratch in bad:
        with pytest.raises(ValueError, match="scratch"):
            engine.sort(keys, overwrite=True, scratch=scratch)
    with pytest.raises(ValueError, match="overlaps"):
        engine.sort(keys[:50], overwrite=True, scratch=keys[25:])
    with pytest.raises(ValueError, match="low"):
        engine.sort(keys, low=1 << 32)


def low_of(where: str, dtype, k: int) -> int:
    """The smallest key of a range of 2^k keys: straddling the dtype's top bit, or at its top."""
    bits = 8 * np.dtype(dtype).itemsize
    return (1 << (bits - 1)) - (1 << (k - 1)) if where == "middle" else (1 << bits) - (1 << k)


LOW_CASES = [(np.uint32, k) for k in (7, 20, 24)] + [(np.uint64, k) for k in (7, 20, 24, 33)]


@pytest.mark.parametrize("size", ["0", "1", "tile-1", "tile+1", "2^20+3"])
@pytest.mark.parametrize("where", ["middle", "top"])
@pytest.mark.parametrize("dtype,k", LOW_CASES)
def test_low_rebased(cp, engine, dtype, k, where, size):
    """Keys in [low, low + 2^k), sorted on the k bits of key - low, come back as they were."""
    rng = np.random.default_rng(13)
    n = size_of(size, dtype, "keys")  # sort, argsort and pairs of the same keys
    low = low_of(where, dtype, k)
    x = (rng.integers(0, 1 << k, n, dtype=np.uint64) + np.uint64(low)).astype(dtype)
    if n >= 2:
        x[0], x[-1] = low + (1 << k) - 1, low  # both ends of the range, out of order
    order = np.argsort(x, kind="stable")
    got = engine.sort(cp.asarray(x), 0, k, low=low)
    assert got.dtype == x.dtype
    np.testing.assert_array_equal(got.get(), x[order])
    np.testing.assert_array_equal(engine.argsort(cp.asarray(x), 0, k, low=low).get(), order)
    v = np.arange(n, dtype=np.uint32)
    got_k, got_v = engine.sort_pairs(cp.asarray(x), cp.asarray(v), 0, k, low=low, overwrite=True)
    np.testing.assert_array_equal(got_k.get(), x[order])
    np.testing.assert_array_equal(got_v.get(), order)


@pytest.mark.parametrize("dtype,k", LOW_CASES)
def test_low_saves_passes(cp, engine, monkeypatch, dtype, k):
    """A range of 2^k keys around the top bit (all of the key's bits vary) takes ceil(k/8)
    passes with low, where without it the sort takes a pass per byte of the key."""
    launched = []
    launch = radix.onesweep
    monkeypatch.setattr(radix, "onesweep",
                        lambda *a, **kw: launched.append(a[3]) or launch(*a, **kw))
    low = low_of("middle", dtype, k)
    x = np.random.default_rng(14).integers(0, 1 << k, 100003, dtype=np.uint64) + np.uint64(low)
    x = x.astype(dtype)
    end_bit = (int(x.max()) - low).bit_length()
    got = engine.sort(cp.asarray(x), end_bit=end_bit, low=low)
    np.testing.assert_array_equal(got.get(), np.sort(x))
    assert len(launched) == -(-k // 8)
    launched.clear()
    plain_end = (int(x.min()) ^ int(x.max())).bit_length()  # what varying bits alone allow
    np.testing.assert_array_equal(engine.sort(cp.asarray(x), end_bit=plain_end).get(), np.sort(x))
    assert len(launched) == np.dtype(dtype).itemsize


def test_low_on_the_cub_route(cp):
    """Where CUB sorts (small arrays by default), low and the bit range are ignored, correctly."""
    low = (1 << 31) - (1 << 23)
    x = (np.random.default_rng(15).integers(0, 1 << 24, 100003) + low).astype(np.uint32)
    default = RadixEngine()
    got = default.sort(cp.asarray(x), 0, 24, low=low, overwrite=True)
    np.testing.assert_array_equal(got.get(), np.sort(x))
    order = default.argsort(cp.asarray(x), 0, 24, low=low, scratch=cp.empty_like(cp.asarray(x)))
    np.testing.assert_array_equal(order.get(), np.argsort(x, kind="stable"))
    for name in ("cub", "radix"):
        k, v = get_engine("gpu", name).sort_pairs(cp.asarray(x), cp.asarray(x), 0, 24, low=low)
        np.testing.assert_array_equal(k.get(), np.sort(x))
        np.testing.assert_array_equal(v.get(), np.sort(x))


def test_narrow_routing(cp):
    """A sort that saves a pass is ours from MIN_N["narrow64"] (64-bit keys) or MIN_N["narrow"]
    keys, CUB below; never from more keys than the full-width sort (CUB sorts every bit)."""
    assert radix.MIN_N["narrow64"] <= radix.MIN_N["sort64"]
    assert radix.MIN_N["narrow"] <= radix.MIN_N["sort"]
    default = RadixEngine()
    for dtype, route, bits in ((cp.uint64, "narrow64", 33), (cp.uint32, "narrow", 24)):
        n = radix.MIN_N[route]
        keys = cp.empty(n, dtype=dtype)
        assert default._ours(keys, "sort", 0, bits)
        assert not default._ours(keys[: n // 2], "sort", 0, bits)


@pytest.mark.slow
@pytest.mark.parametrize("dtype", [np.uint32, np.uint64])
def test_2_pow_28(cp, engine, dtype):
    """2^28 keys against CUB (cupy.sort / cupy.argsort, both stable), NumPy being too slow here."""
    x = cp.random.randint(0, np.iinfo(dtype).max, 1 << 28, dtype=dtype)
    assert bool((engine.sort(x) == cp.sort(x)).all())
    if dtype == np.uint32:
        assert bool((engine.argsort(x) == cp.argsort(x)).all())


@pytest.mark.slow
def test_wide_look_back_flags(cp, engine):
    """From 2^30 keys on, the look-back flags take two words each (radix.WIDE_ROWS): two 8-bit
    passes over 2^30 + 3 keys, stable, against CUB's stable argsort of the same 16 bits."""
    x = cp.random.randint(0, 1 << 32, radix.WIDE_ROWS + 3, dtype=cp.uint64).astype(cp.uint32)
    want = x[cp.argsort(x & cp.uint32(0xFFFF))]
    assert bool((engine.sort(x, 0, 16) == want).all())


def test_the_engine_notes_when_cub_sorts_for_it(cp):
    """What a job's summary names: CUB where the engine handed it a call, ours where it ran."""
    def descending(n: int, dtype):
        return cp.arange(n, 0, -1).astype(dtype)

    engine = RadixEngine()
    engine.sort(descending(1000, cp.uint32))
    assert engine.used == {"cub"}
    engine.used.clear()
    engine.sort(descending(radix.MIN_N["sort"], cp.uint32))
    assert engine.used == {"radix"}
    engine.argsort(descending(1000, cp.uint64))
    assert engine.used == {"cub", "radix"}
