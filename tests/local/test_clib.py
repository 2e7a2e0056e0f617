"""The CPU backend's C kernels build with every C compiler found here (local/clib.py): where
they do not, library() is None and CPU ranks silently sort with NumPy alone, and the kernels'
own tests skip themselves."""

from __future__ import annotations

import glob
import os
import shutil

import pytest

from distsort.local import clib


def compilers() -> list[str]:
    """cc, gcc and clang on PATH, and their versioned names (gcc-11, clang-14, ...)."""
    found = {shutil.which(name) for name in ("cc", "gcc", "clang")}
    for folder in os.environ.get("PATH", "").split(os.pathsep):
        found.update(glob.glob(os.path.join(folder, "gcc-[0-9]*")))
        found.update(glob.glob(os.path.join(folder, "clang-[0-9]*")))
    return sorted(path for path in found if path and os.access(path, os.X_OK))


@pytest.mark.skipif(not compilers(), reason="no C compiler here")
@pytest.mark.parametrize("compiler", compilers() or ["none"])
def test_the_kernels_build(tmp_path, compiler):
    built = clib._build([compiler, *clib.FLAGS, *clib.SOURCES], str(tmp_path), "cpu-x.so")
    assert built is not None, f"{compiler} cannot build {clib.SOURCES}"
    assert clib._load(built) is not None
    program = clib._build([compiler, *clib.WATCHER_FLAGS, clib.WATCHER], str(tmp_path), "w")
    assert program is not None and os.access(program, os.X_OK), f"{compiler}: {clib.WATCHER}"
