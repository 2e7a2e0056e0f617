"""The settings table (distsort/settings.py), its page (docs/settings.md) and the code agree,
and values are read as their kinds with clear errors."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from distsort import settings
from distsort.errors import DistsortError

ROOT = Path(__file__).resolve().parent.parent
NAME = re.compile(r"DISTSORT_[A-Z_]+[A-Z]")
# the package's modules may read the environment's DISTSORT_* only through settings.value;
# binding.py is loaded by launch/distsort-run without the package and reads the mapping it is given
DIRECT_READ = re.compile(r"(environ|getenv|env)(\.get)?\(?\[?\s*[\"']DISTSORT_")


def code_files() -> list[Path]:
    files = [p for p in (ROOT / "distsort").rglob("*.py") if p.name != "settings.py"]
    files += [p for p in (ROOT / "launch").rglob("*") if p.is_file()]
    return files + [p for p in (ROOT / "docker").rglob("*") if p.is_file()]


def names_in(files: list[Path]) -> set[str]:
    return {n for p in files for n in NAME.findall(p.read_text(errors="replace"))}


def test_every_variable_the_code_names_is_in_the_table_and_no_other():
    used = names_in(code_files())
    assert used - set(settings.SETTINGS) == set(), "named in the code, missing from the table"
    assert set(settings.SETTINGS) - used == set(), "in the table, read by nothing"


def test_the_package_reads_its_variables_only_through_settings():
    offenders = [str(p.relative_to(ROOT)) for p in (ROOT / "distsort").rglob("*.py")
                 if p.name not in ("settings.py", "binding.py")
                 and DIRECT_READ.search(p.read_text())]
    assert offenders == []


def test_the_page_lists_the_table():
    lines = (ROOT / "docs" / "settings.md").read_text().splitlines()
    rows = [line.split("|")[1:3] for line in lines if line.startswith("| `DISTSORT_")]
    page = {name.strip(" `"): default.strip(" `") for name, default in rows}
    table = {name: s.default or "(none)" for name, s in settings.SETTINGS.items()}
    assert page == table


def test_values_come_as_their_kinds_and_blank_means_the_default(monkeypatch):
    monkeypatch.setenv("DISTSORT_TIMEOUT", "2.5")
    monkeypatch.setenv("DISTSORT_PROGRESS", "1")
    monkeypatch.setenv("DISTSORT_DEVICE", " 4 ")
    monkeypatch.setenv("DISTSORT_BACKEND", "  ")
    assert settings.value("DISTSORT_TIMEOUT") == 2.5
    assert settings.value("DISTSORT_PROGRESS") is True
    assert settings.value("DISTSORT_DEVICE") == 4
    assert settings.value("DISTSORT_BACKEND") == "auto"
    monkeypatch.delenv("DISTSORT_DEVICE")
    assert settings.value("DISTSORT_DEVICE") is None  # no default: the code's own choice
    assert settings.value("DISTSORT_PROGRESS", {"DISTSORT_PROGRESS": "0"}) is False


@pytest.mark.parametrize("name, text", [("DISTSORT_TIMEOUT", "soon"), ("DISTSORT_DEVICE", "2.5"),
                                        ("DISTSORT_PROGRESS", "yes"), ("DISTSORT_DEVICE", "-1"),
                                        ("DISTSORT_TIMEOUT", "nan"), ("DISTSORT_TIMEOUT", "inf"),
                                        ("DISTSORT_TRANSPORT", "tcp"), ("DISTSORT_ENGINE", "fast"),
                                        ("DISTSORT_PINNED", "x"), ("DISTSORT_SHARED_GPU", "all"),
                                        ("DISTSORT_MPI_CHUNK_BYTES", "0"),
                                        ("DISTSORT_RANKS", "0")])
def test_a_value_of_the_wrong_kind_is_a_clear_error(monkeypatch, name, text):
    monkeypatch.setenv(name, text)
    with pytest.raises(DistsortError, match=f"{name}='{re.escape(text)}'"):
        settings.value(name)


def test_the_environment_is_checked_once_for_every_setting_set():
    """What the command line agrees on before any work: the first setting it cannot read."""
    settings.check_environment({"DISTSORT_TIMEOUT": "5", "DISTSORT_ENGINE": " ", "HOME": "x"})
    with pytest.raises(DistsortError, match="DISTSORT_SHARED_GPU='bogus': choose one of fold"):
        settings.check_environment({"DISTSORT_TIMEOUT": "5", "DISTSORT_SHARED_GPU": "bogus"})
