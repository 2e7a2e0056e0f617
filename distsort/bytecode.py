"""Python's bytecode for the packages a job imports, compiled ahead by `distsort compile`.

A process started with PYTHONDONTWRITEBYTECODE=1 (a common container setting) reads bytecode
but never writes it. Where packages were installed without it (uv's default, `pip install
--no-compile`, a source tree), every process then compiles NumPy's, CuPy's and distsort's
sources again as it imports them, a good part of a job's start on a machine set up so
(bench/RESULTS.md, runs 405-406). `compile` writes the bytecode where an installer would have,
in each package's __pycache__ folders, where they can be written; Python's own library is left
as it came.
"""

from __future__ import annotations

import compileall
import importlib
import os
import sys
import sysconfig

JOB_IMPORTS = ("distsort.commands", "cupy", "cupy.cuda.nccl", "tqdm")  # a job's, beyond these


def package_folders() -> list[str]:
    """The folders (and single-file modules) of the top-level packages this process has
    loaded from outside Python's own library, after loading those a job may import."""
    for name in JOB_IMPORTS:
        try:
            importlib.import_module(name)
        except Exception:  # not installed, or no CUDA: a job would not load it either
            pass
    base = {"base": sys.base_prefix, "platbase": sys.base_exec_prefix,
            "installed_base": sys.base_prefix, "installed_platbase": sys.base_exec_prefix}
    own = {os.path.realpath(sysconfig.get_path(key, vars=base))
           for key in ("stdlib", "platstdlib")}
    found = []
    for name, module in list(sys.modules.items()):
        if "." in name or module is None:
            continue
        paths = list(getattr(module, "__path__", None) or [])
        origin = getattr(module, "__file__", None)
        if not paths and origin and origin.endswith(".py"):
            paths = [origin]
        found += [p for p in paths if os.path.exists(p) and not _python_own(p, own)]
    return sorted(set(found))


def _python_own(path: str, libraries: set[str]) -> bool:
    """Whether path is in Python's own library (its site-packages are not)."""
    real = os.path.realpath(path)
    parts = real.split(os.sep)
    return (any(real.startswith(lib + os.sep) for lib in libraries)
            and "site-packages" not in parts and "dist-packages" not in parts)


def compile_packages() -> int:
    """Write the missing or stale bytecode of package_folders(); the number of folders and
    modules whose bytecode could not all be written (read-only, or sources that do not
    compile on this Python)."""
    failed = 0
    for path in package_folders():
        if os.path.isdir(path):
            ok = compileall.compile_dir(path, quiet=2)
        else:
            ok = compileall.compile_file(path, quiet=2)
        failed += not ok
    return failed
