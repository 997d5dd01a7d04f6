"""The run's page listing, ranked by review priority: scores.tsv and what index.html shows."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping

from .. import manifest, rundir
from ..columns import LEGEND, SCORE_NOTE
from ..io import atomic_write_text
from . import reading
from .evaluation import EVALUATION_JS
from .gallery import THUMB
from .render import ARTICLE_COLOR, CLASS_COLORS
from .state import Outcome

_FAILED_LISTED = 200   # failed pages index.html names; scores.tsv lists them all


def _tsv_cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, list):
        value = "; ".join(map(str, value))
    return str(value).replace("\t", " ").replace("\n", " ")


# Page-list columns of the review priority: (key in info.json's "priority", label, definition,
# shown by default). The gallery shows the definitions in a legend: no tooltip reaches a touch screen.
_PRIORITY_COLUMNS = [
    ("review_priority", "priority", "how worth a look the page is (higher = look first; not a quality score): "
     "the sum of the next four", True),
    ("source_disagreement", "src Δ", "share of block boxes without a same-class partner between two sources "
     "(mean over source pairs)", True),
    ("fused_disagreement", "fused Δ", "share of boxes unmatched between the reference fused variant and each "
     "source", True),
    ("line_coverage", "lines", "share of text lines at least half inside one text region of the reference fused "
     "variant (low = text the layout misses; 1 - this enters the priority)", True),
    ("failed_share", "failed", "share of the sources that failed on the page", False),
]
# Pages whose layout scores (one per variant and source) the page view's strip plot can show:
# the highest-priority ones, so a 100k-page gallery stays small.
_STRIP_PAGES = 2000


def gallery_context(run_dir: Path, ranked: list, failed: list, source_dirs: dict, gallery_dirs: dict,
                     recommended: str | None, top_name: str, *, absent: int, boards: Mapping[str, str | None] = {}
                     ) -> dict:
    """What index.html shows: leaderboards, one metrics row per reviewed page, failed pages, and
    how many pages of the run it leaves out (`absent`: not reviewed yet or out of date), so a
    partial or sharded review never reads as the whole run. `boards`: the file name of each full board."""
    reference = recommended or (sorted(gallery_dirs)[0] if gallery_dirs else None)
    metrics = reading.per_page_metrics(run_dir, reference)
    metric_keys = sorted({k for m in metrics.values() for k in m}, key=lambda k: (k != "score", k))
    columns = [{"key": k, "label": label, "definition": text, "extra": not shown}
               for k, label, text, shown in _PRIORITY_COLUMNS]
    columns += [{"key": f"v.{k}", "label": f"{reference} {k}" if k != "score" else f"{reference} score",
                 "definition": (f"layout score of fusion/{reference} on the page, without ground truth (higher = "
                                "better layout; the leaderboards' score)") if k == "score"
                 else f"fusion/{reference} per-page metric {k} (see the leaderboard legend)",
                 "extra": k != "score"} for k in metric_keys]
    transcripts = rundir.discover_transcripts(run_dir)
    leaderboards = [("Fusion variants", reading.leaderboard(rundir.fusion_dir(run_dir) / "variant_leaderboard.tsv")),
                    ("Sources", reading.leaderboard(rundir.fusion_dir(run_dir) / "source_leaderboard.tsv"))]
    strip_names, strip = reading.layout_scores(run_dir, {o.page_id for o in ranked[:_STRIP_PAGES]})
    rows = []
    for rank, o in enumerate(ranked, 1):
        s = o.info["priority"]
        row = [o.page_id, rank, *(s.get(k) for k, *_ in _PRIORITY_COLUMNS)]
        row += [metrics.get(o.page_id, {}).get(k) for k in metric_keys]
        row += [", ".join(s.get("failed_sources") or []), "; ".join(s.get("reasons") or []), o.info.get("path", ""),
                boards.get(o.page_id), reading.transcript_variants(run_dir, o.page_id, transcripts),
                strip.get(o.page_id)]
        rows.append(row)
    return {
        "run": {
            "name": run_dir.resolve().name, "pages_ok": len(ranked), "pages_failed": len(failed),
            "pages_absent": absent, "transcript_links": reading.transcript_links(run_dir, manifest.members(run_dir, [])),
            "sources": list(source_dirs), "fused": sorted(gallery_dirs), "recommended": recommended,
            "reference": reference,
        },
        "leaderboards": leaderboards,
        "data": {"columns": columns, "rows": rows, "pages_dir": "pages", "top_dir": f"{top_name}/pages",
                 "thumb": THUMB, "transcripts_dir": "../outputs/transcripts",
                 "strip": strip_names, "recommended": recommended, "reference": reference,
                 "fields": ["page_id", "rank", *(c["key"] for c in columns), "failed_sources", "reasons", "path",
                            "board", "transcripts", "layout"],
                 "colors": {k: f"rgb{v}" for k, v in CLASS_COLORS.items()}},
        "columns": columns,
        "leaderboard_legend": [c for c in LEGEND
                               if any(c["name"] in board["columns"] for _, board in leaderboards)],
        "score_note": SCORE_NOTE,
        "failed": [{"page_id": o.page_id, "error": o.error} for o in failed[:_FAILED_LISTED]],
        "colors": CLASS_COLORS,
        "article_color": ARTICLE_COLOR,
        "scores_tsv": "scores.tsv",
        "evaluation_js": EVALUATION_JS,
    }


def write_scores(path: Path, ranked: list[Outcome], failed: list[Outcome]) -> Path:
    """scores.tsv at `path`: one row per ranked page, best first, then one per failed page."""
    columns = ["rank", "page_id", "status", *(k for k, *_ in _PRIORITY_COLUMNS), "failed_sources",
               "reasons_or_error"]
    lines = ["\t".join(columns)]
    for rank, o in enumerate(ranked, 1):
        s = o.info["priority"]
        lines.append("\t".join(_tsv_cell(v) for v in (
            rank, o.page_id, "ok", *(s[k] for k, *_ in _PRIORITY_COLUMNS), s["failed_sources"], s["reasons"])))
    for o in failed:
        lines.append("\t".join(_tsv_cell(v) for v in ("", o.page_id, "failed", *[""] * (len(columns) - 4), o.error)))
    atomic_write_text(path, "\n".join(lines) + "\n", keep_same=True)
    return path
