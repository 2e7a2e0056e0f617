"""Every program in examples/ runs under `mpiexec -n 2` on the CPU backend and says it is right."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ["library_sort.py", "key_value_records.py", "out_of_core_file.py"]

pytestmark = pytest.mark.examples


def find_mpiexec() -> str | None:
    """The mpiexec that goes with this Python (a venv's MPICH wheel), else one on PATH."""
    beside = Path(sys.executable).parent / "mpiexec"
    if beside.exists():
        return str(beside)
    return shutil.which("mpiexec") or shutil.which("mpirun")


def mpiexec_command(ranks: int) -> list[str]:
    mpiexec = find_mpiexec()
    if mpiexec is None:
        pytest.skip("no mpiexec next to this Python or on PATH")
    version = subprocess.run([mpiexec, "--version"], capture_output=True, text=True, timeout=30)
    open_mpi = "Open MPI" in version.stdout + version.stderr or "OpenRTE" in version.stdout
    return [mpiexec, "-n", str(ranks)] + (["--oversubscribe"] if open_mpi else [])


def example_env(**extra: str) -> dict[str, str]:
    path = os.pathsep.join(p for p in [str(ROOT), os.environ.get("PYTHONPATH", "")] if p)
    return {
        **os.environ,
        "DISTSORT_BACKEND": "cpu",
        "PYTHONPATH": path,
        "OMPI_ALLOW_RUN_AS_ROOT": "1",  # Open MPI refuses root (CI containers) without these
        "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
        **extra,
    }


def run_example(name: str, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess:
    cmd = mpiexec_command(2) + [sys.executable, str(ROOT / "examples" / name)]
    return subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=600)


@pytest.mark.parametrize("name", EXAMPLES)
def test_example_runs_and_is_right(name, tmp_path):
    result = run_example(name, tmp_path, example_env())
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    assert "WRONG" not in result.stdout and "FAILED" not in result.stdout, output
    assert ": ok" in result.stdout, output


def test_examples_are_all_tested():
    assert sorted(p.name for p in (ROOT / "examples").glob("*.py")) == sorted(EXAMPLES)


def test_example_fails_on_a_wrong_result(tmp_path):
    # a sort that returns its shard reversed: the example must notice and exit non-zero
    (tmp_path / "sitecustomize.py").write_text(
        "import distsort\n"
        "_sort = distsort.sort\n"
        "distsort.sort = lambda *a, **k: _sort(*a, **k)[::-1].copy()\n"
    )
    env = example_env(PYTHONPATH=os.pathsep.join([str(tmp_path), str(ROOT)]))
    result = run_example("library_sort.py", tmp_path, env)
    assert result.returncode != 0
    assert "WRONG" in result.stdout
