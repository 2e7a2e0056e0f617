"""The budget an out-of-core refusal names is one the plan takes (outofcore/layout.py)."""

from __future__ import annotations

import pytest

from distsort.outofcore import layout


@pytest.mark.parametrize("gpu", [False, True])
@pytest.mark.parametrize("counts", [[3_000_000], [750_000] * 4, [5, 40_000, 0],
                                    [1 << 22, 1 << 22], [30_000], [20_000_000]])
@pytest.mark.parametrize("cost", [4, 12, 48, 104])
def test_the_budget_a_refusal_names_is_taken(counts, cost, gpu):
    """Across budgets from a few bytes up, wherever the plan refuses one, the budget its
    message names is taken (the runs' rows round to pages: found once in a fuzz, 3 M keys at
    1 KiB named 140640 bytes and refused them)."""
    refused = 0
    for budget in [2**k + j for k in range(4, 26) for j in (0, 3, 1000)]:
        if layout._cut(counts, cost, budget, gpu) is None:
            refused += 1
            need = layout.least_budget(counts, cost, budget, gpu)
            assert need > budget and layout._cut(counts, cost, need, gpu) is not None
    assert refused  # the smallest budgets are refused
