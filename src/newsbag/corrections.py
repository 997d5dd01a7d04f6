"""`suggest`: read a run's disagreement and layouts, pick the pages to correct, write them as a correction bundle."""

from __future__ import annotations

import logging
import math
from collections import defaultdict
from pathlib import Path

import numpy as np

from . import manifest, rundir
from .errors import InputError, first_line
from .export.bundle import BundleResult, write_bundle
from .labels import coarse_for
from .page_reader import read_page
from .review.reading import number, tsv_rows
from .suggest import PageFacts, Pick, issue_of, layout_signature, pick_pages

__all__ = ["MEASURES", "CORRECTIONS_DIR", "page_disagreement", "suggest_pages", "run_suggest"]

log = logging.getLogger(__name__)

CORRECTIONS_DIR = "corrections"
# Where a page's disagreement comes from, first found first: the review's source disagreement
# (share of block boxes without a same-class partner between two sources, mean over source pairs:
# RUN/review/scores.tsv), else fusion's leave-one-out box agreement (share of a source's text boxes
# that a box of another model family matches, per_page_source_metrics.tsv), as 1 - its mean over
# the page's sources. One measure for the whole run, so pages are ranked on one scale.
MEASURES = {"review": "review source disagreement (review/scores.tsv)",
            "fusion": "1 - mean leave-one-out box agreement of the sources (fusion/per_page_source_metrics.tsv)"}
# The pick looks at the pages that disagree most, this many per page asked for (at least
# _POOL_MIN): reading every fused page of a 100k-page run for its layout would take minutes.
_POOL_PER_PICK, _POOL_MIN = 50, 2000
_TEXTUAL = ("text", "title")


def _finite(cell: str | None) -> float | None:
    """A TSV cell (`tsv_rows`) as a finite number, else None."""
    value = number(cell)
    return float(value) if isinstance(value, (int, float)) and math.isfinite(value) else None


def page_disagreement(run_dir: Path) -> tuple[str, dict[str, float | None]]:
    """(measure, page id -> disagreement in 0..1 or None where it cannot be measured) of a run:
    the first of `MEASURES` the run has.

    Raises:
        InputError: the run has neither table (fusion has not run).
    """
    review = {r["page_id"]: _finite(r.get("source_disagreement"))
              for r in tsv_rows(rundir.review_dir(run_dir) / "scores.tsv") if r.get("status") == "ok"}
    if review:
        return "review", review
    agreement: dict[str, list[float]] = defaultdict(list)
    seen: set[str] = set()
    for r in tsv_rows(rundir.fusion_dir(run_dir) / "per_page_source_metrics.tsv"):
        seen.add(r["page_id"])
        value = _finite(r.get("loo_box_agreement"))
        if value is not None:
            agreement[r["page_id"]].append(value)
    if not seen:
        raise InputError(f"{run_dir}: no per-page disagreement (review/scores.tsv, "
                         "outputs/fusion/per_page_source_metrics.tsv); run newsbag fuse first")
    return "fusion", {p: 1.0 - float(np.mean(agreement[p])) if agreement[p] else None for p in seen}


def _layout(run_dir: Path, variant: str, page_id: str) -> str:
    """The layout signature of a page's fused layout (`suggest.layout_signature`)."""
    page = read_page(rundir.fused_dir(run_dir, variant) / f"{page_id}.json", page_id, members=False)
    text = [r["bbox_xyxy"] for r in page["regions"] if coarse_for(str(r.get("class"))) in _TEXTUAL]
    return layout_signature(np.asarray(text, float).reshape(-1, 4), len(page["regions"]), page["image"]["width"])


def suggest_pages(run_dir: Path, n: int, variant: str) -> tuple[str, list[Pick]]:
    """(measure, the `n` picks) among the run's pages that have the fused `variant`: the most
    disagreeing (`_POOL_PER_PICK` per pick), their issues and layouts read, spread by `pick_pages`.
    A page whose fused layout cannot be read is named in one line and left out."""
    measure, disagreement = page_disagreement(run_dir)
    made = rundir.page_files(rundir.fused_dir(run_dir, variant))
    ranked = sorted((p for p in manifest.manifest_page_ids(run_dir) if p in made),
                    key=lambda p: (-(disagreement.get(p) or 0.0), p))
    facts = []
    for page_id in ranked[:max(_POOL_PER_PICK * n, _POOL_MIN)]:
        try:
            layout = _layout(run_dir, variant, page_id)
        except (OSError, ValueError) as exc:
            log.warning("suggest: page %s: %s; left out", page_id, first_line(exc))
            continue
        issue, year = issue_of(page_id)
        facts.append(PageFacts(page_id, disagreement.get(page_id) or 0.0, issue, year, layout))
    return measure, pick_pages(facts, n)


def run_suggest(run_dir: Path, n: int, out: Path | None = None) -> tuple[str, list[Pick], BundleResult]:
    """Pick `n` pages of the run to correct (`suggest_pages`, on its recommended fused variant) and
    write them as a correction bundle in `out` (default RUN/corrections; `export.bundle.write_bundle`).

    Returns:
        (measure, picks, what the bundle write did).

    Raises:
        InputError: the run has no recommended fused variant, or no disagreement table.
    """
    run_dir = Path(run_dir)
    variant = rundir.recommended_variant(run_dir)
    if variant is None or variant not in rundir.discover_fused(run_dir):
        raise InputError(f"{run_dir}: no recommended fused variant to suggest pages of; run newsbag fuse first")
    measure, picks = suggest_pages(run_dir, n, variant)
    facts = {p.facts.page_id: {"rank": p.rank, "disagreement": p.facts.disagreement, "issue": p.facts.issue,
                               "year": p.facts.year, "layout": p.facts.layout, "gain": p.gain} for p in picks}
    bundle = write_bundle(run_dir, out or run_dir / CORRECTIONS_DIR, [p.facts.page_id for p in picks], facts, variant)
    return measure, picks, bundle
