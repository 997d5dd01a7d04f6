import json

from newsbag import columns
from newsbag.evaluate import EVAL_KEYS
from newsbag.fusion.metrics import METRIC_KEYS
from newsbag.fusion.page import SOURCE_KEYS


def test_every_column_of_every_table_is_declared_once_with_a_direction():
    names = [c.name for c in columns.COLUMNS]
    assert len(names) == len(set(names))
    tables = (columns.VARIANT_COLUMNS, columns.SOURCE_COLUMNS, columns.EVAL_COLUMNS, columns.EVAL_PER_PAGE_COLUMNS)
    used = {c for t in tables for c in t}
    assert used == set(names)     # nothing undeclared, nothing declared for no table
    # every metric the writers produce has a column
    assert set(METRIC_KEYS) | set(SOURCE_KEYS) <= set(columns.SOURCE_COLUMNS)
    assert set(EVAL_KEYS) <= set(columns.EVAL_COLUMNS)
    by_name = {c.name: c for c in columns.COLUMNS}
    assert by_name["score"].direction == "higher is better" and not by_name["score"].uses_gt
    assert by_name["xcol"].direction == "lower is better" and by_name["xcol"].uses_gt
    assert by_name["over_merge"].direction == "lower is better"
    assert by_name["b1x"].direction == "higher is better"


def test_tables_lead_with_rank_name_mark_and_the_ranking_number():
    assert columns.VARIANT_COLUMNS[:4] == ("rank", "name", "recommended", "score")
    assert columns.SOURCE_COLUMNS[:4] == ("rank", "name", "recommended", "score")
    assert columns.EVAL_COLUMNS[:4] == ("rank", "name", "best", columns.EVAL_MEASURE)
    # score's parts right after it
    assert columns.VARIANT_COLUMNS[4:9] == ("line_coverage", "cross_share", "lonely_line_share", "empty_share",
                                            "overlap_share")


def test_legend_is_json_and_markdown_and_says_score_uses_no_ground_truth():
    legend = json.loads(json.dumps(columns.LEGEND))
    assert {e["name"] for e in legend} >= {"score", "b1x", "xcol", "over_merge", "degenerate_pages"}
    assert all(set(e) == {"name", "meaning", "direction", "uses_gt", "tables"} for e in legend)
    md = columns.legend_markdown()
    assert md.startswith("`score` uses no ground truth") and "newsbag evaluate --gt" in md
    row = next(line for line in md.splitlines() if line.startswith("| `xcol` |"))
    assert row.split(" | ")[2:4] == ["lower is better", "yes"]
    assert len([line for line in md.splitlines() if line.startswith("| `")]) == len(columns.COLUMNS)


def test_the_manual_renders_the_legend_as_declared():
    """docs/hooks.py fills the manual's legend marker from `legend_markdown` (no hand-written copy)."""
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "docs" / "hooks.py"
    spec = importlib.util.spec_from_file_location("docs_hooks", path)
    hooks = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(hooks)
    assert hooks.render_markers("<!-- newsbag:leaderboard-legend -->") == columns.legend_markdown()
    assert "<!-- newsbag:leaderboard-legend -->" in (path.parent / "fusion.md").read_text()
