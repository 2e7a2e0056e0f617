"""Fixtures of the local engines' tests."""

from __future__ import annotations

import pytest


@pytest.fixture
def three_threads(monkeypatch):
    """The process's pool with 3 threads for the test (its own executor, shut down after)."""
    from distsort import workers

    monkeypatch.setitem(workers._pool, "threads", 3)
    monkeypatch.delitem(workers._pool, "executor", raising=False)
    yield
    executor = workers._pool.pop("executor", None)
    if executor is not None:
        executor.shutdown()
