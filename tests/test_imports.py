"""The package's modules import one another without a cycle (type-only imports aside), and no
module imports another's private names."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "distsort"


def modules() -> dict[str, Path]:
    found = {}
    for path in PACKAGE.rglob("*.py"):
        parts = ("distsort",) + path.relative_to(PACKAGE).with_suffix("").parts
        found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def runtime_imports(path: Path):
    """The ImportFrom nodes of a module, those under `if TYPE_CHECKING:` left out."""
    tree = ast.parse(path.read_text())
    skip = {id(n) for node in ast.walk(tree) if isinstance(node, ast.If)
            and getattr(node.test, "id", None) == "TYPE_CHECKING" for n in ast.walk(node)}
    return [n for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and id(n) not in skip]


def imported(name: str, path: Path, node: ast.ImportFrom, known: dict) -> set[str]:
    """The package's modules an import names: the module itself, or each module in it."""
    if not node.level:
        base = node.module or ""
    else:
        package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
        package = package[: len(package) - node.level + 1]
        base = ".".join(package + ([node.module] if node.module else []))
    subs = {f"{base}.{a.name}" for a in node.names} & set(known)
    return subs or ({base} & set(known))


def test_the_import_graph_has_no_cycle():
    known = modules()
    graph = {name: set().union(*[imported(name, path, n, known) for n in runtime_imports(path)])
             - {name} for name, path in known.items()}
    # a module's own package imports it (its __init__): not a dependency of the module on it
    graph = {m: {d for d in deps if not m.startswith(d + ".")} for m, deps in graph.items()}
    state: dict[str, int] = {}

    def visit(module: str, trail: list[str]) -> None:
        state[module] = 1
        for dep in sorted(graph[module]):
            assert state.get(dep) != 1, "import cycle: " + " -> ".join(trail + [module, dep])
            if dep not in state:
                visit(dep, trail + [module])
        state[module] = 2

    for module in sorted(graph):
        if module not in state:
            visit(module, [])


def test_no_module_imports_another_modules_private_names():
    offenders = [f"{path.relative_to(PACKAGE)}: {a.name}" for path in modules().values()
                 for node in runtime_imports(path) for a in node.names
                 if a.name.startswith("_") and not a.name.endswith("__")]
    assert offenders == []
