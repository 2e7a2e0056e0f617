"""`distsort compile` writes the bytecode of the packages a job imports (distsort/bytecode.py)."""

import importlib
import importlib.util
import json
import sys

from distsort import bytecode


def _package(root, name: str, modules: dict[str, str]):
    folder = root / name
    folder.mkdir()
    for module, text in modules.items():
        (folder / f"{module}.py").write_text(text)
    return folder


def test_the_loaded_packages_get_their_bytecode_and_python_keeps_its_own(tmp_path, monkeypatch):
    monkeypatch.setattr(sys, "dont_write_bytecode", True)  # as PYTHONDONTWRITEBYTECODE=1
    folder = _package(tmp_path, "pkg_nobytecode", {"__init__": "from . import part\n",
                                                   "part": "X = 1\n", "unused": "Y = 2\n"})
    single = tmp_path / "lone_nobytecode.py"
    single.write_text("Z = 3\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    for name in ("pkg_nobytecode", "pkg_nobytecode.part", "lone_nobytecode"):
        monkeypatch.delitem(sys.modules, name, raising=False)
    importlib.import_module("pkg_nobytecode")
    importlib.import_module("lone_nobytecode")
    sources = [folder / "__init__.py", folder / "part.py", folder / "unused.py", single]
    cached = [importlib.util.cache_from_source(str(s)) for s in sources]
    assert not any(tmp_path.joinpath(c).exists() for c in cached)  # the imports wrote none

    folders = bytecode.package_folders()
    assert str(folder) in folders and str(single) in folders
    json_folder = json.__path__[0]
    assert json_folder not in folders  # Python's own library is left as it came
    assert bytecode.compile_packages() == 0
    assert all(tmp_path.joinpath(c).exists() for c in cached)  # the package's unused too


def test_a_folder_that_does_not_all_compile_is_counted(tmp_path, monkeypatch):
    monkeypatch.setattr(sys, "dont_write_bytecode", True)
    folder = _package(tmp_path, "pkg_halfbroken", {"__init__": "", "bad": "def (:\n"})
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "pkg_halfbroken", raising=False)
    importlib.import_module("pkg_halfbroken")
    assert bytecode.compile_packages() == 1
    assert tmp_path.joinpath(importlib.util.cache_from_source(str(folder / "__init__.py"))).exists()
