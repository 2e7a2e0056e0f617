"""The writer's two ways of putting bytes in the output file, chosen by a test."""

from __future__ import annotations

import os

import pytest

from distsort.io import writer


@pytest.fixture(params=["mapped", "positioned"])
def write_mode(request, monkeypatch) -> str:
    """Write outputs through a shared mapping or by positioned writes (parallel.FileRange),
    whatever the test folder's file system allows; the file is sized sparse either way, so a
    test of offsets past 4 GiB takes no disk space."""
    mapped = request.param == "mapped"

    def sized(fd: int, nbytes: int) -> bool:
        os.ftruncate(fd, nbytes)
        return mapped

    monkeypatch.setattr(writer, "reserve", sized)
    return request.param
