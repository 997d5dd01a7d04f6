"""MkDocs hook: fills the manual's generated tables from the declarations the code reads.

A page asks for a table with an HTML comment on a line of its own, so the Markdown stays
readable where it is not built (GitHub):

    <!-- newsbag:config-fields -->      the config's top-level keys and an envs entry's (newsbag.config_fields)
    <!-- newsbag:model-stage-fields --> a model stage's keys (newsbag.config_fields)
    <!-- newsbag:runner-options -->     every runners/<family>.tool.json, one table per family
    <!-- newsbag:fusion-section -->     the fusion stage's own keys and a variant's (newsbag.fusion.options)
    <!-- newsbag:stage-options -->      every builtin stage's options, from their declarations
    <!-- newsbag:leaderboard-legend --> the leaderboard columns, from newsbag.columns
    <!-- newsbag:revisions -->          every code revision, its number and its code (newsbag.revisions)

The tables are generated, never written by hand, so they cannot drift from what the config
loader accepts: every one is `newsbag.options.markdown_table` of the declaration the loader
parses that level with.
"""

from __future__ import annotations

import re
from dataclasses import fields
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RUNNERS = ROOT / "runners"
MARKER = re.compile(r"^<!-- newsbag:([a-z-]+) -->$", re.MULTILINE)


def config_fields_markdown() -> str:
    """The config's top-level keys, then the keys of one ``envs`` entry."""
    from newsbag.config_fields import EnvFields, PipelineFields
    from newsbag.options import markdown_table

    return f"{markdown_table(PipelineFields)}\n**each entry of `envs`**\n\n{markdown_table(EnvFields)}"


def model_stage_fields_markdown() -> str:
    from newsbag.config_fields import ModelStageFields
    from newsbag.options import markdown_table

    return markdown_table(ModelStageFields)


def fusion_section_markdown() -> str:
    """The fusion stage's own keys, then the keys of one variant (its method's params are with the stages)."""
    from newsbag.fusion.options import FusionSection, VariantFields
    from newsbag.options import markdown_table

    return f"{markdown_table(FusionSection)}\n**each entry of `variants`**\n\n{markdown_table(VariantFields)}"


def runner_options_markdown(runners_dir: Path = RUNNERS) -> str:
    """One section per runner family: its description, revision and parameter table, from the
    options its tool.json loads into (`newsbag.tool_spec.parameter_options`)."""
    from newsbag.options import markdown_table
    from newsbag.tool_spec import load_tool_spec, parameter_options

    parts = []
    for path in sorted(runners_dir.glob("*.tool.json")):
        tool = load_tool_spec(path.name.removesuffix(".tool.json"), runners_dir)
        parts.append(f"### `{tool.get('family', path.name.removesuffix('.tool.json'))}`\n")
        parts.append(f"{tool.get('description', '')}\n")
        parts.append(f"Declared in `runners/{path.name}` (revision {tool['revision']}).\n")
        if fields(declared := parameter_options(tool)):
            parts.append(markdown_table(declared))
    return "\n".join(parts)


def stage_options_markdown() -> str:
    """The builtin stages' option tables, from the stages' own declarations."""
    from newsbag.builtin import kinds, options_markdown

    return "\n".join(f"### `{kind}`\n\n{options_markdown(kind)}\n" for kind in kinds())


def leaderboard_legend_markdown() -> str:
    from newsbag.columns import legend_markdown

    return legend_markdown()


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
    "config-fields": config_fields_markdown,
    "model-stage-fields": model_stage_fields_markdown,
    "fusion-section": fusion_section_markdown,
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
