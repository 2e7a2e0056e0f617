"""The radix engine's digit width choice and overrides (no GPU needed: CuPy is not imported)."""

from __future__ import annotations

import pytest

from distsort.local import radix
from distsort.local.radix import DIGIT_BITS, DIGIT_BITS_ENV, RadixEngine, digit_bits_for


@pytest.mark.parametrize(
    "key_bytes,bits,width", [(4, 16, 8), (4, 24, 8), (4, 30, 10), (4, 32, 11), (8, 64, 11)]
)
def test_default_policy_fewest_passes_narrowest_width(key_bytes, bits, width):
    assert digit_bits_for(key_bytes, bits) == width


def test_policy_covers_every_range():
    for key_bytes in (4, 8):
        for bits in range(1, 8 * key_bytes + 1):
            width = digit_bits_for(key_bytes, bits)
            assert width in DIGIT_BITS
            assert -(-bits // width) == -(-bits // max(DIGIT_BITS))


def test_override_and_environment(monkeypatch):
    monkeypatch.delenv(DIGIT_BITS_ENV, raising=False)
    assert RadixEngine().digit_bits is None
    assert RadixEngine(digit_bits=9).digit_bits == 9
    monkeypatch.setenv(DIGIT_BITS_ENV, "10")
    assert RadixEngine().digit_bits == 10
    assert RadixEngine(digit_bits=7).digit_bits == 7
    monkeypatch.setenv(DIGIT_BITS_ENV, "12")
    with pytest.raises(ValueError, match="digit width"):
        RadixEngine()
    with pytest.raises(ValueError, match="digit width"):
        RadixEngine(digit_bits=6)


def test_histogram_counters_fit_every_width():
    for key_bytes in (4, 8):
        for bits in DIGIT_BITS:
            passes = -(-8 * key_bytes // bits)
            assert passes * (1 << bits) * radix.hist_lanes(key_bytes, bits) * 4 <= radix.HIST_SMEM
