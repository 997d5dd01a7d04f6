"""The import graph of src/newsbag: no cycle among modules, and no module imports one from a
layer above its own (read with `ast`, so a lazy import inside a function counts too)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src"

# Low to high: a module may import modules of its own layer and of the layers below. A name
# ending in ".*" stands for every module of that package (the package itself included) not
# listed by its own name.
LAYERS: tuple[tuple[str, frozenset[str]], ...] = (
    ("base: vocabularies, errors, small stdlib helpers", frozenset({
        "newsbag", "newsbag.errors", "newsbag.labels", "newsbag.resources", "newsbag.tables",
        "newsbag.parallel", "newsbag.progress", "newsbag.sweep", "newsbag.columns", "newsbag.options",
        "newsbag.revisions", "newsbag.codegraph", "newsbag.liveness", "newsbag.slurm", "newsbag.slurm.client",
        "newsbag.runner_events"})),   # the lines runners print: events or text for the log
    ("contract", frozenset({"newsbag.contract", "newsbag.page_repair"})),   # page JSON checked and repaired
    ("bytes on disk, locks and scratch folders", frozenset({"newsbag.io", "newsbag.jsontext", "newsbag.locks",
                                                            "newsbag.scratch",
                                                            "newsbag.page_reader"})),   # page files read by the contract
    ("run directory, inputs and configuration", frozenset({
        "newsbag.rundir", "newsbag.reports", "newsbag.freshness", "newsbag.failures", "newsbag.builtin", "newsbag.config",
        "newsbag.tool_spec", "newsbag.builtin_entry", "newsbag.anchoring",   # what the config checks and anchors
        "newsbag.upstream", "newsbag.inputs", "newsbag.images", "newsbag.manifest",
        "newsbag.image_depth",   # the 8-bit copy's scaling, which images uses
        "newsbag.pages",
        "newsbag.page_outcomes",   # what a runner call's pages came to, as the run directory records it
        # the builtin stages' declared options, which the config checks (their packages import nothing)
        "newsbag.fusion", "newsbag.fusion.variants", "newsbag.review", "newsbag.review.options", "newsbag.export",
        "newsbag.export.options", "newsbag.transcription_options",
        # Slurm: the ledger and settings in RUN/slurm and what is read from them, partition limits, the canary
        "newsbag.slurm.jobs", "newsbag.slurm.settings", "newsbag.slurm.queue", "newsbag.slurm.recovery",
        "newsbag.slurm.canary", "newsbag.slurm.limits"})),
    ("page content: fusion, reading order, export and review builders", frozenset({
        "newsbag.articles", "newsbag.transcript", "newsbag.fusion.*", "newsbag.export.*", "newsbag.review.render",
        "newsbag.review.score", "newsbag.review.gallery", "newsbag.review.reading", "newsbag.review.evaluation",
        "newsbag.review.scan", "newsbag.review.state", "newsbag.review.boards", "newsbag.review.listing",
        "newsbag.suggest", "newsbag.groundtruth.*", "newsbag.text_vote",
        "newsbag.transcription_cascade"})),
    ("stages and their orchestration", frozenset({
        "newsbag.fusion.stage", "newsbag.review.stage", "newsbag.export.stage", "newsbag.source_run",
        "newsbag.evaluate", "newsbag.evaluate_text", "newsbag.transcription", "newsbag.transcript_files", "newsbag.text_views",
        "newsbag.orchestrator",
        "newsbag.status", "newsbag.doctor", "newsbag.pipeline", "newsbag.summary",
        "newsbag.slurm.plan",   # which stages have work: it reads the run's status
        "newsbag.export.bundle", "newsbag.corrections",   # correction bundles: written like an export
        "newsbag.recommend", "newsbag.tuning.*",   # pinning and tuning the recommended variant
        # the recognisers the transcription stage reads with, and what it checks of a page first
        "newsbag.transcription_bag", "newsbag.recognizer_choice", "newsbag.transcript_resolution",
        "newsbag.runner_probe"})),
    ("command line", frozenset({"newsbag.cli", "newsbag.cli_kit", "newsbag.cli_slurm", "newsbag.cli_suggest",
                                "newsbag.cli_tune", "newsbag.logsetup", "newsbag.__main__"})),
)


def _modules() -> dict[str, Path]:
    """Dotted module name -> file, for every module under src/newsbag."""
    out = {}
    for path in sorted((SRC / "newsbag").rglob("*.py")):
        parts = list(path.relative_to(SRC).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


MODULES = _modules()


def _imported(name: str, path: Path) -> set[str]:
    """The newsbag modules `name` imports anywhere in its file, relative imports resolved,
    plus the packages those live in (importing ``a.b.c`` runs ``a/__init__`` and ``a/b/__init__``)
    unless `name` is inside them already."""
    package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = package[:len(package) - node.level + 1] if node.level else []
            module = ".".join(base + ([node.module] if node.module else []))
            for alias in node.names:
                found.add(f"{module}.{alias.name}" if f"{module}.{alias.name}" in MODULES else module)
    implied = {".".join(m.split(".")[:k]) for m in found for k in range(1, m.count(".") + 1)}
    implied = {p for p in implied if not name.startswith(p + ".")}
    return {m for m in found | implied if m in MODULES and m != name}


GRAPH = {name: _imported(name, path) for name, path in MODULES.items()}


def _layer(module: str) -> int:
    for k, (_, names) in enumerate(LAYERS):
        if module in names:
            return k
    parts = module.split(".")
    for cut in range(len(parts), 0, -1):
        for k, (_, names) in enumerate(LAYERS):
            if ".".join(parts[:cut]) + ".*" in names:
                return k
    raise LookupError(module)


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sorted(out)


def test_the_walk_sees_lazy_relative_and_parent_imports():
    # a function-level import (cli imports its commands' modules lazily)
    assert "newsbag.pipeline" in GRAPH["newsbag.cli"]
    # `from .. import rundir` inside a subpackage, and `from .. import __version__`
    assert "newsbag.rundir" in GRAPH["newsbag.fusion.stage"] and "newsbag" in GRAPH["newsbag.fusion.page"]
    # importing newsbag.fusion.geometry from outside runs newsbag/fusion/__init__.py
    assert {"newsbag.fusion.geometry", "newsbag.fusion"} <= GRAPH["newsbag.review.score"]


def test_cycle_finder_on_a_small_graph():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": set()}
    assert _cycles(graph) == [["a", "b", "c"]]


def test_every_module_has_a_layer():
    unplaced = []
    for name in MODULES:
        try:
            _layer(name)
        except LookupError:
            unplaced.append(name)
    assert unplaced == [], f"add these modules to a layer in LAYERS: {unplaced}"


def test_no_import_cycle():
    assert _cycles(GRAPH) == []


@pytest.mark.parametrize("name", sorted(MODULES))
def test_no_import_from_a_higher_layer(name):
    upward = sorted(f"{m} ({LAYERS[_layer(m)][0]})" for m in GRAPH[name] if _layer(m) > _layer(name))
    assert upward == [], f"{name} ({LAYERS[_layer(name)][0]}) imports from above"


def test_runners_import_nothing_of_newsbag():
    # A runner runs in its model's env, where newsbag is not installed (DESIGN §2).
    offenders = []
    for path in sorted((SRC.parent / "runners").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level else [])
            offenders += [f"{path.name}: {n}" for n in names if n == "newsbag" or n.startswith("newsbag.")]
    assert offenders == []
