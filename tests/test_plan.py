"""The one choice between the in-memory sort and the out-of-core one (plan.py), on one rank."""

from __future__ import annotations

import pytest

from distsort import plan
from distsort.runtime import get_runtime


@pytest.fixture
def rt():
    return get_runtime(None, "cpu")


def test_a_small_sort_asks_for_no_budget_and_stays_in_memory(rt, monkeypatch):
    def asked(*args):
        raise AssertionError("the free memory was asked for")

    monkeypatch.setattr(plan, "default_budget", asked)
    rows = plan.SMALL_SORT_BYTES // plan.in_memory_bytes(rt, 1, 8)
    assert plan.out_of_core(rt, rows, 8, None) is None


def test_a_larger_sort_asks_and_goes_out_of_core_past_the_budget(rt, monkeypatch):
    monkeypatch.setattr(plan, "default_budget", lambda backend, sharers: 1 << 20)
    rows = 2 * plan.SMALL_SORT_BYTES // plan.in_memory_bytes(rt, 1, 8)
    assert plan.out_of_core(rt, rows, 8, None) == 1 << 20
    monkeypatch.setattr(plan, "default_budget", lambda backend, sharers: 1 << 40)
    assert plan.out_of_core(rt, rows, 8, None) is None


def test_a_named_budget_holds_for_the_smallest_sort(rt):
    assert plan.out_of_core(rt, 1000, 8, "1KiB") == 1024
    assert plan.out_of_core(rt, 1000, 8, "1MiB") is None
