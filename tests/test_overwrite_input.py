"""overwrite_input: the engine may use the keys' memory only where the caller said so, or where
the keys are the sort's own copy (api._sort_numeric)."""

import numpy as np

import distsort
from distsort.local.engine import NumpyEngine


def test_the_engine_overwrites_the_callers_keys_only_when_asked(monkeypatch):
    asked = []
    sort = NumpyEngine.sort

    def spy(self, keys, *args, **options):
        asked.append(bool(options.get("overwrite")))
        return sort(self, keys, *args, **options)

    monkeypatch.setattr(NumpyEngine, "sort", spy)
    x = np.random.default_rng(0).integers(0, 2**32, 5000, dtype=np.uint32)
    before = x.copy()
    kept = distsort.sort(x, backend="cpu")
    np.testing.assert_array_equal(x, before)  # not asked: the caller's keys as they were
    given = distsort.sort(x, backend="cpu", overwrite_input=True)
    assert asked == [False, True]
    np.testing.assert_array_equal(kept, np.sort(before))
    np.testing.assert_array_equal(given, np.sort(before))
