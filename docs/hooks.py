"""MkDocs hook: fills the manual's generated tables from the declarations the code reads.

A page asks for a table with an HTML comment on a line of its own, so the Markdown stays
readable where it is not built (GitHub):

    <!-- newsbag:runner-options -->     every runners/<family>.tool.json, one table per family
    <!-- newsbag:stage-options -->      every builtin stage's options, from their declarations
    <!-- newsbag:leaderboard-legend --> the leaderboard columns, from newsbag.columns
    <!-- newsbag:revisions -->          every code revision, its number and its code (newsbag.revisions)

The tables are generated, never written by hand, so they cannot drift from what the config
loader accepts.
"""

from __future__ import annotations

import importlib
import json
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RUNNERS = ROOT / "runners"
MARKER = re.compile(r"^<!-- newsbag:([a-z-]+) -->$", re.MULTILINE)


def _cell(value: object) -> str:
    """One table cell: JSON for values, pipes escaped so a description cannot split the row."""
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    return text.replace("|", "\\|").replace("\n", " ")


def _parameter_row(name: str, spec: dict) -> str:
    notes = []
    if "enum" in spec:
        notes.append("one of " + ", ".join(f"`{v}`" for v in spec["enum"]))
    if "minimum" in spec or "maximum" in spec:
        notes.append(f"range {spec.get('minimum', '')}..{spec.get('maximum', '')}")
    if spec.get("path"):
        notes.append("a path, relative to the config file")
    if spec.get("fingerprint") is False:
        notes.append("changing it redoes nothing")
    description = spec.get("description", "")
    if notes:
        description = f"{description} ({'; '.join(notes)})" if description else "; ".join(notes)
    return (f"| `{name}` | {spec.get('type', '')} | `{_cell(spec.get('default'))}` | "
            f"{_cell(description)} |")


def runner_options_markdown(runners_dir: Path = RUNNERS) -> str:
    """One section per runner family: its description, revision and parameter table."""
    parts = []
    for path in sorted(runners_dir.glob("*.tool.json")):
        tool = json.loads(path.read_text(encoding="utf-8"))
        family = tool.get("family", path.name.removesuffix(".tool.json"))
        parts.append(f"### `{family}`\n")
        parts.append(f"{tool.get('description', '')}\n")
        parts.append(f"Declared in `runners/{path.name}` (revision {tool.get('revision', 0)}).\n")
        parameters = tool.get("parameters", {})
        if parameters:
            parts.append("| parameter | type | default | description |\n|---|---|---|---|")
            parts.extend(_parameter_row(name, spec) for name, spec in parameters.items())
            parts.append("")
    return "\n".join(parts)


def _optional(attr: str, *modules: str):
    """The function `attr` of the first of `modules` that has it, or None while none does."""
    for module in modules:
        try:
            return getattr(importlib.import_module(module), attr)
        except (ImportError, AttributeError):
            continue
    return None


def stage_options_markdown() -> str:
    """The builtin stages' option tables, from the stages' own declarations."""
    render = _optional("options_markdown", "newsbag.builtin", "newsbag.stages")
    from newsbag.builtin import kinds

    if render is None:
        return ("!!! note\n    This build of newsbag does not declare its builtin stages' options "
                "in one place yet; the stages are: " + ", ".join(f"`{k}`" for k in kinds()) + ".\n")
    return "\n".join(f"### `{kind}`\n\n{render(kind)}\n" for kind in kinds())


def leaderboard_legend_markdown() -> str:
    render = _optional("legend_markdown", "newsbag.columns")
    if render is None:
        return ("!!! note\n    This build of newsbag has no column legend module; the columns are "
                "described in the text above.\n")
    return render()


def revisions_markdown() -> str:
    """One row per code revision: its number, the modules it is named by, and every module in its code."""
    from newsbag.revisions import REVISIONS, code_files

    rows = ["| entry | revision | named by | its code (what these import, less the infrastructure) |",
            "|---|---|---|---|"]
    for key, rev in REVISIONS.items():
        code = ", ".join(f"`{m}`" for m in code_files(key))
        rows.append(f"| `{key}` | {rev.number} | {', '.join(f'`{e}`' for e in rev.entries)} | {code} |")
    return "\n".join(rows) + "\n"


GENERATORS = {
    "runner-options": runner_options_markdown,
    "stage-options": stage_options_markdown,
    "leaderboard-legend": leaderboard_legend_markdown,
    "revisions": revisions_markdown,
}


def render_markers(markdown: str) -> str:
    """`markdown` with every marker replaced by its table; an unknown marker is an error."""

    def replace(match: re.Match) -> str:
        name = match.group(1)
        if name not in GENERATORS:
            raise ValueError(f"unknown generated table {name!r} (known: {', '.join(GENERATORS)})")
        return GENERATORS[name]()

    return MARKER.sub(replace, markdown)


def on_page_markdown(markdown: str, page, config, files) -> str:  # noqa: ARG001 (MkDocs signature)
    return render_markers(markdown)
