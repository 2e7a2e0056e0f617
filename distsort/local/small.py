"""Driver of small.cu: a key-only radix sort of few keys (radix.SMALL_MAX) in one launch.

Why: radix.py's sort of 2^20 keys is a handful of microseconds of device work behind several
launches' worth of host time (bench/RESULTS.md, run 235: 0.18 ms against CUB's 0.11); one
cooperative launch does the histogram and every pass (small.cu). The result lands where
radix_sort's would after all its passes, whichever passes the kernel finds it can skip.
"""

from __future__ import annotations

import functools

import numpy as np

from ..cuda_source import load_module
from ..keys import UNSIGNED
from .radix import BLOCK, WORD_NAME, digit_passes, onesweep_defines, sm_count

FLAGS = 8 * 256 + 16  # small.cu: SMALL_FLAGS, the words before the look-back flags
SMALL_ITEMS = {4: 16, 8: 18}  # keys per thread of a tile, by key width (run 236)


def compile_all() -> None:
    """Compile both instances (python -m distsort compile)."""
    _module()


@functools.cache
def _module():
    names = tuple(f"radix_small<{WORD_NAME[kb]}>" for kb in (4, 8))
    items = {"ITEMS32_KEYS": SMALL_ITEMS[4], "ITEMS64_KEYS": SMALL_ITEMS[8]}
    defines = dict(onesweep_defines()) | items | {"RADIX_KEY_CODES": 1}
    return load_module("local/small.cu", names, tuple(defines.items()))


@functools.cache
def _kernel(device: int, key_bytes: int) -> tuple:
    """The kernel on a device, and the most blocks that are resident at once (a cooperative
    launch refuses more)."""
    import cupy

    kernel = _module().get_function(f"radix_small<{WORD_NAME[key_bytes]}>").kernel  # Function:
    # its call takes enable_cooperative_groups, the RawKernel's does not
    per_sm = cupy.cuda.driver.occupancyMaxActiveBlocksPerMultiprocessor(kernel.ptr, BLOCK, 0)
    return kernel, max(1, per_sm) * sm_count(device)


def small_sort(keys, begin_bit: int, end_bit: int, low, overwrite: bool, out, code: int = 0):
    """Keys (1-D, contiguous uint32/uint64, 2 <= n < radix.SMALL_MAX) sorted on bits [begin_bit,
    end_bit) of key - low (at least one pass), as radix.radix_sort sorts them with mode 'keys'
    (code: keys.NumericCodec.code, the digits are the keys' codes'). out: the first ping-pong
    buffer (radix._scratch); the second is keys with overwrite, else a new array. The result is
    in out after an odd number of passes, else in the second: where radix_sort's would be after
    all of its passes, whichever the kernel skips."""
    import cupy

    n, kb = keys.size, keys.dtype.itemsize
    passes = len(digit_passes(begin_bit, end_bit))
    second = keys if overwrite else (cupy.empty_like(keys) if passes > 1 else out)
    result = out if passes % 2 else second
    kernel, most = _kernel(keys.device.id, kb)
    tiles = -(-n // (BLOCK * SMALL_ITEMS[kb]))
    region = tiles * 256
    words = cupy.zeros(FLAGS + passes * region, dtype=np.uint32)
    args = (keys, out, second, result, np.uint64(n), UNSIGNED[kb](int(low)), np.int32(begin_bit),
            np.int32(end_bit), np.int32(code), words, np.uint32(region))
    kernel((min(most, tiles),), (BLOCK,), args, 0, None, True)  # cooperative: all resident
    return result
