"""arrays.py on the host: the helpers the device code uses in place of CuPy's operators."""

import numpy as np
import pytest

from distsort.arrays import ceil_div, module_of
from distsort.check import _hash_rows
from distsort.mix import splitmix64
from distsort.steps.sample import stratified
from distsort.steps.splitters import classify
from distsort.transport import aligned_displacements


@pytest.mark.parametrize("d", [1, 3, 64])
def test_ceil_div_is_the_blocks_that_hold_each_count(d):
    counts = np.random.default_rng(d).integers(0, 1000, 257, dtype=np.int64)
    counts[:3] = [0, d, d + 1]
    np.testing.assert_array_equal(ceil_div(counts, d), -(-counts // d))


def test_a_host_array_and_a_numpy_scalar_live_in_numpy():
    assert module_of(np.zeros(3)) is np
    assert module_of(np.int64(3)) is np


def test_aligned_displacements_start_every_block_on_a_multiple():
    counts = np.array([0, 5, 3, 8, 1], dtype=np.int32)
    starts = aligned_displacements(counts, 4)
    np.testing.assert_array_equal(starts, [0, 0, 8, 12, 20])
    assert starts.dtype == np.int64


class _NoScalarOperators(np.ndarray):
    """A host array whose operators refuse a number: on a GPU rank CuPy's first such operator
    imports cupyx (arrays.py), so the device helpers reach their arrays by ufuncs only."""


def _refuse(name):
    def operator(self, other):
        if not isinstance(other, np.ndarray):
            raise AssertionError(f"{name} with {type(other).__name__}: use the ufunc")
        return getattr(np.ndarray, name)(self, other)
    return operator


for _name in ("add", "sub", "mul", "floordiv", "mod", "and", "or", "xor", "rshift", "lshift",
              "eq", "ne", "lt", "le", "gt", "ge"):
    for _form in (f"__{_name}__", f"__r{_name}__", f"__i{_name}__"):
        if hasattr(np.ndarray, _form):
            setattr(_NoScalarOperators, _form, _refuse(_form))


def test_the_strict_array_refuses_an_operator_with_a_number():
    with pytest.raises(AssertionError, match="ufunc"):
        np.arange(3).view(_NoScalarOperators) + 1


def test_the_hashes_and_blocks_use_no_operator_with_a_number():
    words = np.random.default_rng(1).integers(0, 2**63, (1000, 3), dtype=np.uint64)
    strict = words.view(_NoScalarOperators)
    plain = np.asarray  # the results compared as plain arrays
    np.testing.assert_array_equal(plain(splitmix64(strict[:, 0])), splitmix64(words[:, 0]))
    np.testing.assert_array_equal(plain(_hash_rows(strict)), _hash_rows(words))
    counts = words[:, 1].astype(np.int64)
    np.testing.assert_array_equal(plain(ceil_div(counts.view(_NoScalarOperators), 7)),
                                  -(-counts // 7))


@pytest.mark.parametrize("columns", [1, 2])  # one key word; two (the ties' search)
def test_the_sample_and_the_splitters_search_use_no_operator_with_a_number(columns):
    rng = np.random.default_rng(columns)
    uniform = rng.random(100)
    np.testing.assert_array_equal(
        np.asarray(stratified(10**6, uniform.view(_NoScalarOperators), np)),
        stratified(10**6, uniform, np))
    words = [rng.integers(0, 50, 10000).astype(np.uint64) for _ in range(columns)]
    splitters = np.array([[10] * columns + [5], [30] * columns + [9000]], np.uint64)
    strict = [w.view(_NoScalarOperators) for w in words]
    np.testing.assert_array_equal(np.asarray(classify(strict, 0, splitters, np)),
                                  classify(words, 0, splitters, np))
