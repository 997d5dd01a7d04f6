"""The import graph of src/newsbag: no cycle among modules, no module imports one from a layer above
its own (read with `ast`, so a lazy import inside a function counts too), the layers keep their bands'
true order and hold at most `MAX_LAYER` modules each, and pure content imports only its whitelist."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src"

# The bands, low to high: the order the layers must keep. A module knows only what sits below it: page
# content knows nothing of files, files nothing of the run directory, the run directory nothing of
# the config, the config nothing of the stages, the stages nothing of who plans and runs them.
BANDS = ("base", "contract", "declared options", "pure content", "disk", "run directory", "configuration",
         "stages", "orchestration", "command line")

MAX_LAYER = 8   # modules in one layer: in a larger one any direction goes unnoticed

# Low to high: a module may import modules of its own layer and of the layers below. Each layer is
# (band, what it holds, its modules); a new module goes in the lowest layer its imports allow.
LAYERS: tuple[tuple[str, str, frozenset[str]], ...] = (
    ("base", "the package, errors and closed vocabularies", frozenset({
        "newsbag", "newsbag.errors", "newsbag.labels", "newsbag.columns", "newsbag.folder_names",
        "newsbag.export"})),   # the export formats
    ("base", "stdlib helpers: tables, JSON text, paths, processes, progress", frozenset({
        "newsbag.tables", "newsbag.jsontext", "newsbag.anchoring", "newsbag.resources", "newsbag.parallel",
        "newsbag.progress", "newsbag.liveness", "newsbag.runner_events"})),
    ("base", "declaring options and the face every stage shows the planner, code revisions from the import graph",
     frozenset({"newsbag.options", "newsbag.stage_protocol", "newsbag.revisions", "newsbag.codegraph"})),
    ("contract", "the page contract and what a reader accepts of a page", frozenset({
        "newsbag.contract", "newsbag.page_repair"})),
    ("declared options", "each builtin stage's options and the config's own keys (stdlib only: the config "
     "checks them, pure code reads them)",
     frozenset({"newsbag.fusion", "newsbag.fusion.options", "newsbag.review", "newsbag.review.options",
                "newsbag.transcription", "newsbag.transcription.options", "newsbag.export.options",
                "newsbag.config_fields"})),
    ("pure content", "geometry: boxes, their overlaps and matches, the column grid", frozenset({
        "newsbag.sweep", "newsbag.fusion.geometry", "newsbag.fusion.match", "newsbag.fusion.degenerate",
        "newsbag.fusion.segments", "newsbag.fusion.grid", "newsbag.fusion.rules", "newsbag.fusion.xycut"})),
    ("pure content", "page structure: reading order, paragraphs, pooled sources, no-ground-truth metrics", frozenset({
        "newsbag.fusion.order", "newsbag.fusion.paragraphs", "newsbag.fusion.regions", "newsbag.fusion.pooling",
        "newsbag.fusion.metrics", "newsbag.articles"})),
    ("pure content", "fusion methods: one page fused by every variant", frozenset({
        "newsbag.fusion.consensus", "newsbag.fusion.paragraph_regions", "newsbag.fusion.fuse",
        "newsbag.fusion.page"})),
    ("pure content", "reading a page: transcript crops, line votes, review priority, boards drawn", frozenset({
        "newsbag.transcription.transcript", "newsbag.transcription.vote", "newsbag.transcription.cascade",
        "newsbag.review.score", "newsbag.review.render"})),
    ("pure content", "export documents: regions as writers need them, PAGE-XML, ALTO, METS", frozenset({
        "newsbag.export.layout", "newsbag.export.serialize", "newsbag.export.alto", "newsbag.export.pagexml",
        "newsbag.export.mets"})),
    ("pure content", "choices: the pages to correct first, the tuning protocol and search space", frozenset({
        "newsbag.suggest", "newsbag.tuning", "newsbag.tuning.protocol", "newsbag.tuning.space"})),
    ("disk", "bytes on disk: atomic writes, record locks, scratch folders", frozenset({
        "newsbag.io", "newsbag.locks", "newsbag.scratch"})),
    ("disk", "files read or written whole: page JSON, page images, runner reports, COCO datasets", frozenset({
        "newsbag.page_reader", "newsbag.images", "newsbag.image_depth", "newsbag.reports", "newsbag.export.coco"})),
    ("disk", "ground truth read from its files", frozenset({
        "newsbag.groundtruth.labels", "newsbag.groundtruth.model", "newsbag.groundtruth.xmlfiles",
        "newsbag.groundtruth.alto", "newsbag.groundtruth.pagexml", "newsbag.groundtruth.coco",
        "newsbag.groundtruth.nzz", "newsbag.groundtruth.read"})),
    ("run directory", "its layout, output fingerprints, failure records, the pages a source computes next",
     frozenset({"newsbag.rundir", "newsbag.freshness", "newsbag.failures", "newsbag.source_plan"})),
    ("run directory", "the run's pages: inputs, page ids, the manifest, runners' page outcomes", frozenset({
        "newsbag.inputs", "newsbag.manifest", "newsbag.pages", "newsbag.page_outcomes"})),
    ("run directory", "outputs read back: the pin, leaderboards, transcript files, ground truth matched to pages",
     frozenset({"newsbag.fusion.pin", "newsbag.fusion.leaderboard", "newsbag.transcription.files",
                "newsbag.groundtruth", "newsbag.groundtruth.match"})),
    ("run directory", "the review's pages: gallery data, scans, board states, the listing, boards", frozenset({
        "newsbag.review.reading", "newsbag.review.evaluation", "newsbag.review.gallery", "newsbag.review.scan",
        "newsbag.review.state", "newsbag.review.listing", "newsbag.review.boards"})),
    ("run directory", "Slurm: the job ledger, queue, submit settings, limits, the canary", frozenset({
        "newsbag.slurm", "newsbag.slurm.client", "newsbag.slurm.jobs", "newsbag.slurm.queue",
        "newsbag.slurm.recovery", "newsbag.slurm.settings", "newsbag.slurm.canary", "newsbag.slurm.limits"})),
    ("configuration", "runner tool specs, the builtin registry, the pipeline config", frozenset({
        "newsbag.tool_spec", "newsbag.builtin", "newsbag.builtin_entry", "newsbag.config"})),
    ("stages", "model stages: runner subprocesses, their restarts, probes of their envs", frozenset({
        "newsbag.source_run", "newsbag.orchestrator", "newsbag.runner_probe"})),
    ("stages", "builtin stages: fusion, review, export and correction bundles", frozenset({
        "newsbag.fusion.stage", "newsbag.review.stage", "newsbag.export.stage", "newsbag.export.bundle"})),
    ("stages", "the transcription stage and its recognisers", frozenset({
        "newsbag.transcription.resolution", "newsbag.transcription.bag", "newsbag.transcription.recognizer_choice",
        "newsbag.transcription.stage"})),
    ("stages", "the stage table: every stage of a config as the planner walks it", frozenset({"newsbag.stages"})),
    ("orchestration", "scoring against ground truth, the recommendation, tuning, correction choice", frozenset({
        "newsbag.evaluate", "newsbag.evaluate_text", "newsbag.recommend", "newsbag.tuning.pages",
        "newsbag.tuning.run", "newsbag.corrections"})),
    ("orchestration", "plans: what the next run redoes, per stage and per Slurm job", frozenset({
        "newsbag.planner", "newsbag.status", "newsbag.slurm.plan"})),
    ("orchestration", "runs and their reports: the pipeline, the summary, stale text views, the doctor", frozenset({
        "newsbag.pipeline", "newsbag.summary", "newsbag.transcription.views", "newsbag.doctor"})),
    ("command line", "log lines and the click kit every command shares", frozenset({
        "newsbag.logsetup", "newsbag.cli_kit"})),
    ("command line", "the commands", frozenset({
        "newsbag.cli", "newsbag.cli_slurm", "newsbag.cli_suggest", "newsbag.cli_tune", "newsbag.__main__"})),
)

# What pure content may import besides the stdlib and the modules of its own band. The house rule is
# numpy, shapely, `contract` and `labels`; each exception says why it is no side effect.
PURE_THIRD_PARTY = {"numpy", "shapely"}
PURE_NEWSBAG = {"newsbag.contract", "newsbag.labels"}
PURE_EXCEPTIONS: dict[str, tuple[set[str], str]] = {
    "newsbag.review.render": ({"PIL"}, "draws a board in memory: an image in, an image out, nothing written"),
    "newsbag.transcription.vote": ({"rapidfuzz"}, "aligns readings by edit distance (C speed, no state)"),
    "newsbag.fusion.page": ({"newsbag"}, "a fused page records the package version (`__version__`), a constant"),
    "newsbag.tuning.space": ({"newsbag.options"}, "the search space is read from the methods' declared options"),
}


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
    for k, (_, _, names) in enumerate(LAYERS):
        if module in names:
            return k
    raise LookupError(module)


def _where(module: str) -> str:
    band, held, _ = LAYERS[_layer(module)]
    return f"{band}: {held}"


def _third_party(path: Path) -> set[str]:
    """The top-level names of what `path` imports from outside the stdlib and newsbag, anywhere in its file."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            found.add(node.module.split(".")[0])
    return found - set(sys.stdlib_module_names) - {"newsbag", "__future__"}


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


def test_every_module_has_one_layer():
    unplaced = [name for name in MODULES if not any(name in names for _, _, names in LAYERS)]
    assert unplaced == [], f"add these modules to a layer in LAYERS: {unplaced}"
    placed = [name for _, _, names in LAYERS for name in names]
    assert sorted(n for n in set(placed) if placed.count(n) > 1) == []
    assert sorted(set(placed) - set(MODULES)) == []   # a module renamed or removed leaves no name behind


@pytest.mark.parametrize("band, held, names", LAYERS, ids=[held for _, held, _ in LAYERS])
def test_no_layer_holds_more_than_the_cap(band, held, names):
    assert len(names) <= MAX_LAYER, f"layer {band}: {held} holds {len(names)} modules: split it by what they do"


def test_the_bands_run_in_their_true_order():
    order = [BANDS.index(band) for band, _, _ in LAYERS]
    assert order == sorted(order), [band for band, _, _ in LAYERS]
    assert set(BANDS) == {band for band, _, _ in LAYERS}


def test_no_import_cycle():
    assert _cycles(GRAPH) == []


@pytest.mark.parametrize("name", sorted(MODULES))
def test_no_import_from_a_higher_layer(name):
    upward = sorted(f"{m} ({_where(m)})" for m in GRAPH[name] if _layer(m) > _layer(name))
    assert upward == [], f"{name} ({_where(name)}) imports from above"


def _band_modules(*bands: str) -> set[str]:
    return {name for band, _, names in LAYERS if band in bands for name in names}


@pytest.mark.parametrize("name", sorted(_band_modules("pure content")))
def test_pure_content_imports_only_the_whitelist(name):
    """Pure content reads no file, clock or config: it imports the stdlib, numpy, shapely, the contract,
    the labels, the declared options (data) and pure modules, and nothing else without a reason."""
    extra, _ = PURE_EXCEPTIONS.get(name, (set(), ""))
    allowed = PURE_THIRD_PARTY | PURE_NEWSBAG | _band_modules("pure content", "declared options") | extra
    assert sorted((_third_party(MODULES[name]) | GRAPH[name]) - allowed) == []


@pytest.mark.parametrize("name", sorted(_band_modules("declared options")))
def test_declared_options_import_only_the_stdlib_and_the_base(name):
    assert sorted(_third_party(MODULES[name]) | (GRAPH[name] - _band_modules("base", "declared options"))) == []


def test_every_whitelist_exception_is_used():
    unused = [name for name, (extra, _) in PURE_EXCEPTIONS.items()
              if _layer(name) not in {k for k, (band, _, _) in enumerate(LAYERS) if band == "pure content"}
              or not extra <= (_third_party(MODULES[name]) | GRAPH[name])]
    assert unused == []


def test_the_whitelist_walk_sees_third_party_and_lazy_imports(tmp_path):
    path = tmp_path / "m.py"
    path.write_text("import os\nimport numpy as np\nfrom shapely.geometry import box\n"
                    "def f():\n    from PIL import Image\n    from . import x\n")
    assert _third_party(path) == {"numpy", "shapely", "PIL"}


STAGE_PACKAGES = ("fusion", "review", "export", "transcription")


@pytest.mark.parametrize("package", STAGE_PACKAGES)
def test_every_stage_package_has_the_same_shape(package):
    """`options` declares (the config reads it without the stage), `stage` does the disk and the plan."""
    assert _where(f"newsbag.{package}.options").startswith("declared options:")
    assert _where(f"newsbag.{package}.stage").startswith("stages:")


def test_runners_import_nothing_of_newsbag():
    # A runner runs in its model's env, where newsbag is not installed (DESIGN §2).
    offenders = []
    for path in sorted((SRC.parent / "runners").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level else [])
            offenders += [f"{path.name}: {n}" for n in names if n == "newsbag" or n.startswith("newsbag.")]
    assert offenders == []
