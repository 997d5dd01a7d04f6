"""The newsbag modules a module imports, read from its source: what a code revision covers.

Imports are read with `ast`, nothing is imported, so the guard and the docs can ask for the code
of any stage without its dependencies. Every import counts, also one inside a function: a stage
imports its heavy modules lazily, and their code makes its output all the same. Stdlib only.
"""

from __future__ import annotations

import ast
from functools import cache
from pathlib import Path

__all__ = ["SRC", "import_closure"]

SRC = Path(__file__).resolve().parent
_PACKAGE = "newsbag"


def _module_file(parts: list[str], src: Path) -> Path | None:
    """The file of module `parts` (relative to the package), or None when it is no module of it."""
    base = src.joinpath(*parts)
    if base.with_suffix(".py").is_file():
        return base.with_suffix(".py")
    if (base / "__init__.py").is_file():
        return base / "__init__.py"
    return None


def _package_of(path: Path, src: Path) -> list[str]:
    """The package `path` is in, as parts relative to `src` (a package's __init__ is in itself)."""
    parts = list(path.relative_to(src).with_suffix("").parts)
    return parts[:-1]


def _targets(node: ast.AST, package: list[str]) -> list[list[str]]:
    """Module paths (relative to the package) an import node may name; names that are no module
    (functions, classes) are dropped later, when no file answers them."""
    if isinstance(node, ast.Import):
        return [alias.name.split(".")[1:] for alias in node.names if alias.name.split(".")[0] == _PACKAGE]
    if not isinstance(node, ast.ImportFrom):
        return []
    module = node.module.split(".") if node.module else []
    if node.level:
        base = package[:len(package) - node.level + 1] + module
    elif module and module[0] == _PACKAGE:
        base = module[1:]
    else:
        return []
    return [base, *(base + [alias.name] for alias in node.names)]


@cache
def _imports(path: Path, src: Path) -> frozenset[Path]:
    package = _package_of(path, src)
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        for parts in _targets(node, package):
            if (file := _module_file(parts, src)) is not None:
                found.add(file)
    found.discard(path)
    return frozenset(found)


def import_closure(modules: tuple[str, ...], src: Path = SRC) -> list[str]:
    """`modules` and every package module they import, directly or through others, sorted.

    >>> "contract.py" in import_closure(("fusion/fuse.py",))
    True
    """
    src = src.resolve()
    seen: set[Path] = set()
    todo = [(src / m).resolve() for m in modules]
    while todo:
        path = todo.pop()
        if path not in seen:
            seen.add(path)
            todo.extend(_imports(path, src))
    return sorted(str(p.relative_to(src)) for p in seen)
