"""GPU partition by splitters: the driver for partition.cu (stable, ties by global position)."""

from __future__ import annotations

import numpy as np

from ..arrays import module_of
from ..cuda_source import CTYPES, load_module
from ..transport import aligned_displacements
from .upload import on_device

TILE = 256 * 16  # keep in step with partition.cu: BLOCK threads x ITEMS keys per thread
MAX_BUCKETS = 256  # and its MAX_BUCKETS


def _names(ctype: str, buckets: int) -> dict[str, str]:
    """The two kernels' instances for keys of ctype and this many buckets (the scatter's is
    templated on the bits of the largest bucket number)."""
    bits = (buckets - 1).bit_length()
    return {"count": f"partition_count<{ctype}>", "scatter": f"partition_scatter<{ctype},{bits}>"}


def compile_all() -> None:
    """Compile every instance a sort may use (python -m distsort compile): every key width,
    every bucket count's bits."""
    for ctype in CTYPES.values():
        for bits in range(1, MAX_BUCKETS.bit_length()):
            _module(ctype, 1 << bits)


def _module(ctype: str, buckets: int):
    """Both kernels for keys of ctype and this many buckets, compiled when first asked for."""
    return load_module("local/partition.cu", tuple(_names(ctype, buckets).values()))


def supports(keys, buckets: int) -> bool:
    """True if the kernel handles these keys (one unsigned word) and this many buckets."""
    return keys.dtype.kind == "u" and keys.dtype.itemsize in CTYPES and buckets <= MAX_BUCKETS


def partition_keys(keys, offset: int, splitters: np.ndarray, want_dest: bool, align: int = 1):
    """Group keys by bucket (stable). Returns (grouped keys, dest or None, counts per bucket,
    where each bucket starts).

    splitters: (p-1, 2) uint64 host array of (key, global position); key i sits at global
    position offset + i. dest[i] is where key i went, for moving other columns alike. Buckets
    start at multiples of align rows; the gaps between them hold no keys. (The pipeline drives
    Launch chunk by chunk instead: steps/chunks.py.)
    """
    import cupy

    launch = Launch(keys, offset, splitters)
    counts = launch.tile_counts()
    per_bucket = cupy.asnumpy(counts.reshape(launch.buckets, launch.tiles).sum(axis=1))
    per_bucket = per_bucket.astype(np.int64, copy=False)
    bases = aligned_displacements(per_bucket, align)
    out = cupy.empty(int(bases[-1] + per_bucket[-1]), dtype=keys.dtype)
    dest = launch.scatter(counts, per_bucket, bases, out, want_dest)
    return out, dest, per_bucket, bases


class Launch:
    """The two kernels' shared arguments for one partition: (count, scatter) over tiles."""

    def __init__(self, keys, offset: int, splitters: np.ndarray):
        import cupy

        self.cp, self.keys, n = cupy, keys, len(keys)
        self.buckets, self.ctype = len(splitters) + 1, CTYPES[keys.dtype.itemsize]
        self.tiles = max((n + TILE - 1) // TILE, 1)
        sms = cupy.cuda.Device().attributes["MultiProcessorCount"]
        self.grid = min(self.tiles, sms * (4 if keys.dtype.itemsize <= 4 else 3))  # all resident
        split_keys, split_pos = on_device(splitters[:, 0].astype(keys.dtype),
                                          splitters[:, 1].astype(np.uint64))
        self.args = (keys, np.int64(n), np.uint64(offset), split_keys, split_pos,
                     np.int32(self.buckets - 1))

    def _kernel(self, kind: str, *more, shared_mem: int = 0) -> None:
        name = _names(self.ctype, self.buckets)[kind]
        fn = _module(self.ctype, self.buckets).get_function(name)
        fn((self.grid,), (TILE // 16,), self.args + more, shared_mem=shared_mem)

    def tile_counts(self):
        """counts[b * tiles + t]: keys of tile t that go to bucket b."""
        counts = self.cp.zeros(self.buckets * self.tiles, dtype=np.int64)
        self._kernel("count", counts, np.int64(self.tiles), shared_mem=self.buckets * 32 * 4)
        return counts

    def scatter(self, counts, per_bucket, bases, out, want_dest: bool):
        """Every key into out, bucket b's block starting at out[bases[b]] (per_bucket and bases
        on the host or the device); returns dest (where key i went) if wanted, else None."""
        cp = self.cp
        starts = cp.cumsum(counts) - counts
        xp = module_of(per_bucket)  # where the tables are: one upload, or none
        shift = bases - (xp.cumsum(per_bucket) - per_bucket)  # every bucket to its aligned start
        starts.reshape(self.buckets, self.tiles)[...] += cp.asarray(shift)[:, None]
        dest = cp.empty(len(self.keys), dtype=np.int64) if want_dest else None
        self._kernel("scatter", starts, np.int64(self.tiles), out,
                     dest if want_dest else np.uintp(0))
        return dest
