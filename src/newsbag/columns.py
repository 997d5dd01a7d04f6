"""What every leaderboard and evaluation column means, declared once for the writers, the docs and the gallery.

Stdlib only: the gallery and the docs render `LEGEND` without importing fusion.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

__all__ = ["Column", "COLUMN", "COLUMNS", "LEGEND", "SCORE_NOTE", "VARIANT_COLUMNS", "SOURCE_COLUMNS", "EVAL_COLUMNS",
           "EVAL_PER_PAGE_COLUMNS", "EVAL_MEASURE", "EVAL_MEASURE_CLASS", "legend_markdown"]

HIGHER = "higher is better"
LOWER = "lower is better"
NEUTRAL = ""   # a count or a label: read it, do not rank by it

FUSION = ("outputs/fusion/variant_leaderboard.tsv", "outputs/fusion/source_leaderboard.tsv")
VARIANT, SOURCE = FUSION
EVAL = ("outputs/evaluation/variant_leaderboard.tsv", "outputs/evaluation/source_leaderboard.tsv")
PER_PAGE = "outputs/evaluation/per_page.tsv"

# The ground-truth measure `newsbag evaluate` ranks by: one predicted box per GT region is the
# structure a reader needs, and a page-sized box or one box per line both score low on it,
# where pixel F1 and region recall reward the page-sized box.
EVAL_MEASURE = "iou_f1"
EVAL_MEASURE_CLASS = "text"

SCORE_NOTE = ("`score` uses no ground truth: it measures how the run's own text-line evidence sits in the "
              "regions (covered, not split across a column gutter, not alone, not stacked). It ranks "
              "layouts of one run against each other; `newsbag evaluate --gt DIR` is the real check, "
              "against hand-made regions.")


@dataclass(frozen=True)
class Column:
    """One column: its meaning, which way is better, whether it needs ground truth, where it appears."""

    name: str
    meaning: str
    direction: str
    uses_gt: bool
    tables: tuple[str, ...]


COLUMNS: tuple[Column, ...] = (
    Column("rank", "position in the table, 1 = best: by `score` (ties: `loo_pixel_f1`, then name) in the fusion "
           f"leaderboards, by `{EVAL_MEASURE}` within its class in the evaluation ones", LOWER, False, FUSION + EVAL),
    Column("name", "the fusion variant, or the source (`stage/variant`)", NEUTRAL, False,
           FUSION + EVAL + (PER_PAGE,)),
    Column("recommended", "variants: `pinned` when `newsbag recommend`, `newsbag tune` or the config chose it, `chosen` when "
           "the highest `score` picked it; sources: `yes` on the region source with the highest `score` "
           "(the text-line evidence is no candidate)", NEUTRAL, False, FUSION),
    Column("score", "layout quality without ground truth, in [0, 1]: line_coverage x (1 - cross_share) x "
           "(1 - lonely_line_share/2) x (1 - empty_share/2) x (1 - overlap_share), averaged over the run's "
           "pages (a page without output counts as empty). It uses no ground truth: `newsbag evaluate --gt DIR` "
           "is the real check", HIGHER, False, FUSION),
    Column("line_coverage", "share of text lines at least half inside one text region (completeness)",
           HIGHER, False, FUSION),
    Column("cross_share", "share of text regions whose lines show a column gutter (regions across columns)",
           LOWER, False, FUSION),
    Column("lonely_line_share", "share of text lines that are the only line of their region (over-split)",
           LOWER, False, FUSION),
    Column("empty_share", "share of text regions holding no text line", LOWER, False, FUSION),
    Column("overlap_share", "share of the text area under two or more text regions (text counted twice)",
           LOWER, False, FUSION),
    Column("n_regions", "regions per page (text lines not counted)", NEUTRAL, False, FUSION),
    Column("n_text", "text and title regions per page", NEUTRAL, False, FUSION),
    Column("text_area_ratio", "share of the page under a text region", NEUTRAL, False, FUSION),
    Column("single_line_share", "share of text regions with at most one line (headlines are; not in `score`)",
           NEUTRAL, False, FUSION),
    Column("loo_pixel_f1", "pixel F1 of the source's text area against what most other detector families mark "
           "as text (leave one out; agreement, not truth)", HIGHER, False, (SOURCE,)),
    Column("loo_box_agreement", "share of the source's text boxes that a box of another family matches "
           "(IoU >= 0.5 or 80% inside)", HIGHER, False, (SOURCE,)),
    Column("degenerate_pages", "pages where the source returned one page-sized box or almost nothing while "
           "the other sources found dozens of text regions (`newsbag.fusion.degenerate`)", LOWER, False, (SOURCE,)),
    Column("n_pages", "pages the name has output on (fusion: current metrics; evaluation: pages with ground "
           "truth of the class)", NEUTRAL, False, FUSION + EVAL),
    Column("method", "the fusion method of the variant", NEUTRAL, False, (VARIANT,)),
    Column("family", "the detector family of the source", NEUTRAL, False, (SOURCE,)),
    Column("what", "the variant's recipe in words", NEUTRAL, False, (VARIANT,)),
    Column("best", f"`yes` on the best `{EVAL_MEASURE}` of its class (every name tied there; none when it is 0)",
           NEUTRAL, True, EVAL),
    Column("class", "the ground-truth class scored: text (text, title and line predictions vs GT text), image "
           "(vs GT graphic), table", NEUTRAL, True, EVAL),
    Column("iou_f1", "one-to-one F1 of predicted vs ground-truth regions at IoU >= 0.5 (one box per GT region); "
           "evaluation ranks by it", HIGHER, True, EVAL + (PER_PAGE,)),
    Column("pixel_f1", "pixel F1 of the union of predicted vs ground-truth regions (completeness; a page-sized "
           "box scores well)", HIGHER, True, EVAL),
    Column("pixel_p", "pixel precision of that union", HIGHER, True, EVAL),
    Column("pixel_r", "pixel recall of that union", HIGHER, True, EVAL),
    Column("b1x", "region recall without cross-column predictions: share of GT regions at least half covered by "
           "predictions that hold no two side-by-side GT regions", HIGHER, True, EVAL),
    Column("xcol", "share of predictions holding the centres of two side-by-side GT regions (cross-column "
           "merges)", LOWER, True, EVAL),
    Column("over_merge", "mean number of GT region centres inside a prediction that holds at least one "
           "(1 = one region per box)", LOWER, True, EVAL),
    Column("region_recall", "share of GT regions at least half covered by the predictions (a page-sized box "
           "scores 1: read with b1x)", HIGHER, True, EVAL),
    Column("region_precision", "share of predictions at least half inside the GT regions (dilated by 1% of the "
           "page width)", HIGHER, True, EVAL),
    Column("n_pred", "predicted regions of the class per page", NEUTRAL, True, EVAL),
    Column("n_gt", "ground-truth regions of the class per page", NEUTRAL, True, EVAL),
    Column("n_missing", "pages with ground truth where the name gave no output (scored as empty)", LOWER, True, EVAL),
    Column("page_id", "the run page", NEUTRAL, False, (PER_PAGE,)),
    Column("kind", "`variant` or `source`", NEUTRAL, False, (PER_PAGE,)),
)

COLUMN: dict[str, Column] = {c.name: c for c in COLUMNS}
LEGEND: list[dict] = [{**asdict(c), "tables": list(c.tables)} for c in COLUMNS]

# Table layouts: rank, name, the mark, the ranking number first; then its parts; then context.
_PARTS = ("line_coverage", "cross_share", "lonely_line_share", "empty_share", "overlap_share")
_CONTEXT = ("n_regions", "n_text", "text_area_ratio", "single_line_share", "n_pages")
VARIANT_COLUMNS = ("rank", "name", "recommended", "score", *_PARTS, *_CONTEXT, "method", "what")
SOURCE_COLUMNS = ("rank", "name", "recommended", "score", *_PARTS, "loo_pixel_f1", "loo_box_agreement",
                  "degenerate_pages", *_CONTEXT, "family")
EVAL_COLUMNS = ("rank", "name", "best", EVAL_MEASURE, "class", "pixel_f1", "b1x", "xcol", "over_merge",
                "region_recall", "region_precision", "pixel_p", "pixel_r", "n_pred", "n_gt", "n_pages", "n_missing")
EVAL_PER_PAGE_COLUMNS = ("page_id", "name", "kind", EVAL_MEASURE)


_SHORT = {VARIANT: "FV", SOURCE: "FS", EVAL[0]: "EV", EVAL[1]: "ES", PER_PAGE: "EP"}


def legend_markdown() -> str:
    """The legend as Markdown: the note on `score`, the tables, then one row per column."""
    tables = "; ".join(f"{short} `{path}`" for path, short in _SHORT.items())
    rows = [f"| `{c.name}` | {c.meaning} | {c.direction or '-'} | {'yes' if c.uses_gt else 'no'} | "
            + " ".join(_SHORT[t] for t in c.tables) + " |" for c in COLUMNS]
    return "\n".join([SCORE_NOTE, "", f"Tables: {tables}.", "", "| column | meaning | direction | ground truth | in |",
                      "|---|---|---|---|---|", *rows]) + "\n"
