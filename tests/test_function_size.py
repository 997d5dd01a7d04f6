"""No function in src/ or runners/ runs over 80 lines (def to last line, docstring included):
a function that long holds several decisions that cannot be read or tested alone."""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
MAX_LINES = 80

def function_lengths(source: str) -> dict[str, int]:
    """Qualified name ("Class.method", "outer.inner") -> lines of every function in `source`."""
    out: dict[str, int] = {}

    def walk(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                name = prefix + child.name
                out[name] = child.end_lineno - child.lineno + 1
                walk(child, name + ".")
            elif isinstance(child, ast.ClassDef):
                walk(child, prefix + child.name + ".")
            else:
                walk(child, prefix)

    walk(ast.parse(source), "")
    return out


def _all_lengths() -> dict[str, int]:
    out = {}
    for folder in ("src", "runners"):
        for path in sorted((REPO / folder).rglob("*.py")):
            rel = path.relative_to(REPO).as_posix()
            for name, n in function_lengths(path.read_text(encoding="utf-8")).items():
                out[f"{rel}::{name}"] = n
    return out


def test_lengths_count_methods_and_nested_functions_from_def_to_last_line():
    source = ("class A:\n    def m(self):\n        def inner():\n            pass\n        return 1\n\n"
              "def f():\n    pass\n")
    assert function_lengths(source) == {"A.m": 4, "A.m.inner": 2, "f": 2}


def test_no_function_over_80_lines():
    over = sorted(name for name, n in _all_lengths().items() if n > MAX_LINES)
    assert over == [], f"functions over {MAX_LINES} lines: split them"
