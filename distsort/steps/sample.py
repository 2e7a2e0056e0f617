"""Each rank's random sample of (key words, global position) rows, from which the splitters are
picked (splitters.py).

Sample size: a bucket receives more than (1+eps)·n/p keys only if fewer than its share of the
sample fell into a (1+eps)·n/p-wide window. With s samples per bucket, a Chernoff bound puts that
at most exp(-eps²·s / (2(1+eps))) per bucket; s = 2(1+eps)·ln(p/delta)/eps² keeps the chance that
any of the p buckets overflows below delta. eps = 0.04 keeps us under the promised 1.05 with room
for rounding; delta = 1e-9. When the whole data set is no larger than the sample would be, every
element is taken and the splitters are exact: every shard gets floor or ceil of n/p.
"""

from __future__ import annotations

import functools
import math

import numpy as np

from ..cuda_source import CTYPES, load_module
from ..mix import splitmix64

EPSILON = 0.04
DELTA = 1e-9


def samples_per_bucket(p: int, eps: float = EPSILON, delta: float = DELTA) -> int:
    """Samples per output shard that keep every shard under (1+eps)·n/p with prob. 1-delta."""
    return math.ceil(2 * (1 + eps) * math.log(max(p, 2) / delta) / eps**2)


def local_sample(words, counts: list[int], rank: int, backend, seed: int = 0, per_bucket=None,
                 codec=None):
    """This rank's share of the global sample, on the backend's device: rows of (key words...,
    global position), uint64, in position order. codec: the one word is raw numbers, whose
    codes (keys.NumericCodec) the rows hold.

    counts are all ranks' element counts. The sample is exact (every element) when the data set
    is small enough; otherwise each rank takes its share in proportion to its element count, by
    stratified sampling: the shard is cut into as many equal strata as it takes rows, and one
    element is drawn uniformly from each. The strata are drawn independently, so the count of
    sampled rows in any key window is a sum of independent trials with the same mean as plain
    random sampling and no larger variance: the bound above holds. The indices come out sorted.
    The fractions come from a counter-based generator (uniforms), so the GPU draw of one key
    word, one kernel (sample.cu), picks exactly the rows the vector operations pick elsewhere.
    """
    n, offset, xp = counts[rank], sum(counts[:rank]), backend.xp
    take = sample_sizes(counts, per_bucket)[rank]
    if take == n:
        picks = xp.arange(n, dtype=np.int64)
    else:
        base = stream_base(seed, rank)
        if backend.name == "gpu" and len(words) == 1 and take * n < 2**63:
            return _device_draw(words[0], n, take, base, offset)
        picks = stratified(n, backend.from_host(uniforms(base, take)), xp)
    rows = device_rows(words, picks, xp, extra=1, codec=codec)
    rows[:, -1] = xp.add(picks, offset)
    return rows


def sample_sizes(counts: list[int], per_bucket=None) -> list[int]:
    """Rows of every rank's share of the sample (local_sample), from all ranks' element counts:
    every element where the data set is no larger than the sample, else a share in proportion
    to the rank's count. Every rank knows them all without asking."""
    total, p = sum(counts), len(counts)
    want = (per_bucket or samples_per_bucket(p)) * p
    if total <= want:
        return list(counts)
    return [min(n, math.ceil(want * n / total)) for n in counts]


@functools.cache
def stream_base(seed: int, rank: int) -> int:
    """The first counter of this rank's random stream for this seed (cached: NumPy's
    per-call overhead for one value lands in the sample phase of every sort)."""
    return int(splitmix64(np.array([((seed << 32) | rank) & (2**64 - 1)], dtype=np.uint64))[0])


def uniforms(base: int, count: int) -> np.ndarray:
    """count fractions in [0, 1) from the stream at base: 53 bits of splitmix64(base + i)."""
    z = splitmix64(np.uint64(base) + np.arange(count, dtype=np.uint64))
    return (z >> np.uint64(11)).astype(np.float64) * 2.0**-53


def compile_all() -> None:
    """Compile every instance a sort may use (python -m distsort compile)."""
    for ctype in CTYPES.values():
        load_module("steps/sample.cu", (_sample_name(ctype),))


def _sample_name(ctype: str) -> str:
    return f"sample_rows<{ctype}>"


def _device_draw(keys, n: int, take: int, base: int, offset: int):
    """stratified() and device_rows() for one key word, in one kernel (sample.cu)."""
    import cupy

    name = _sample_name(CTYPES[keys.dtype.itemsize])
    kernel = load_module("steps/sample.cu", (name,)).get_function(name)
    rows = cupy.empty((take, 2), dtype=np.uint64)
    args = (keys, np.uint64(n), np.uint64(take), np.uint64(base), np.uint64(offset), rows)
    kernel((-(-take // 256),), (256,), args)
    return rows


def stratified(n: int, uniform, xp):
    """One index from each of len(uniform) equal strata of range(n), at the fraction uniform[i]
    (in [0, 1)) of stratum i: sorted, on the device of uniform (ufuncs: arrays.py)."""
    i = xp.arange(len(uniform) + 1, dtype=np.int64)
    edges = xp.floor_divide(xp.multiply(i, n), max(len(uniform), 1))
    return edges[:-1] + (uniform * (edges[1:] - edges[:-1])).astype(np.int64)


def device_rows(words, picks, xp, extra: int, codec=None):
    """Rows of uint64 on the words' device: the key words at the indices picks (codec: their
    codes), then `extra` zero columns left for the caller to fill (positions, run numbers)."""
    rows = xp.zeros((len(picks), len(words) + extra), dtype=np.uint64)
    for col, word in enumerate(words):
        rows[:, col] = word[picks] if codec is None else codec.encode(word[picks], xp)
    return rows
