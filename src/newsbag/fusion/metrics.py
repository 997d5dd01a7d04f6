"""Metrics without ground truth (text-line coverage, structure, leave-one-out agreement)."""

from __future__ import annotations

import numpy as np
import shapely

from ..contract import Boxes, PageMeta, column_codes, take_rows
from ..labels import COARSE, coarse_codes
from .geometry import Pairs, area, cross_pairs, self_pairs
from .match import pair_scores
from .segments import column_segments

__all__ = [
    "union_mask",
    "cover_count",
    "pixel_prf",
    "iou_f1",
    "page_metrics",
    "empty_page_metrics",
    "page_score",
    "text_line_pairs",
    "best_source",
    "loo_agreement",
    "METRIC_KEYS",
]

# Raster size (long side) for no-GT area metrics; enough to tell columns apart, cheap.
_RASTER = 256
_COL_GAP = 0.006
_COL_SLACK = 0.01
METRIC_KEYS = ("n_regions", "n_text", "text_area_ratio", "overlap_share", "line_coverage", "cross_share",
               "single_line_share", "lonely_line_share", "empty_share", "score")


def union_mask(xyxy: np.ndarray, width: float, height: float, long_side: int) -> np.ndarray:
    """(h, w) bool raster of the union of boxes, page scaled so its long side is `long_side`."""
    return cover_count(xyxy, width, height, long_side) > 0


def cover_count(xyxy: np.ndarray, width: float, height: float, long_side: int) -> np.ndarray:
    """(h, w) int32 raster: how many boxes cover each pixel (long side `long_side`).

    Box edges are rounded to the nearest raster pixel; a 2-D difference array makes this
    O(N + h*w) with no loop over boxes.
    """
    xyxy = np.ascontiguousarray(xyxy, dtype=np.float64).reshape(-1, 4)
    s = long_side / max(width, height)
    h, w = max(1, round(height * s)), max(1, round(width * s))
    if len(xyxy) == 0:
        return np.zeros((h, w), np.int32)
    c = np.rint(np.asarray(xyxy, float) * s).astype(np.int64)
    np.clip(c, 0, (w, h, w, h), out=c)
    c = c[(c[:, 2] > c[:, 0]) & (c[:, 3] > c[:, 1])]
    stride, n, size = w + 1, len(c), (h + 1) * (w + 1)
    top, bottom = c[:, 1] * stride, c[:, 3] * stride
    corners = np.concatenate([top + c[:, 0], bottom + c[:, 2], top + c[:, 2], bottom + c[:, 0]])
    diff = np.bincount(corners[:2 * n], minlength=size) - np.bincount(corners[2 * n:], minlength=size)
    # Prefix sums along the rows, then along the rows of the transposed copy: both run over
    # contiguous memory (a cumsum down the columns of a C-ordered raster was half the time).
    rows = diff.astype(np.int32).reshape(h + 1, stride).cumsum(1, dtype=np.int32)
    return rows.T.copy().cumsum(1, dtype=np.int32).T[:h, :w]


def pixel_prf(pred: np.ndarray, gt: np.ndarray) -> tuple[float, float, float]:
    """Pixel precision, recall, F1 of two same-shape bool masks (NaN where undefined)."""
    tp = float(np.count_nonzero(pred & gt))
    npred, ngt = float(np.count_nonzero(pred)), float(np.count_nonzero(gt))
    p = tp / npred if npred else np.nan
    r = tp / ngt if ngt else np.nan
    f = 2 * tp / (npred + ngt) if npred + ngt else np.nan
    return p, r, f


def iou_f1(pred: np.ndarray, gt: np.ndarray, t: float = 0.5) -> float:
    """One-to-one F1 at IoU >= t: pairs that are each other's best match count once.

    Mutual best matching is exact for t >= 0.5 on non-overlapping ground truth and needs
    no loop. Both empty gives NaN.

    >>> iou_f1(np.zeros((0, 4)), np.zeros((0, 4)))
    nan
    """
    if len(pred) + len(gt) == 0:
        return np.nan
    if len(pred) == 0 or len(gt) == 0:
        return 0.0
    p = cross_pairs(pred, gt)
    union = area(pred)[p.i] + area(gt)[p.j] - p.inter
    iou = np.divide(p.inter, union, out=np.zeros_like(p.inter), where=union > 0)
    ok = iou >= t
    pi, gj, iou = p.i[ok], p.j[ok], iou[ok]
    best_p = np.full(len(pred), -1.0)
    np.maximum.at(best_p, pi, iou)
    best_g = np.full(len(gt), -1.0)
    np.maximum.at(best_g, gj, iou)
    tp = int(np.count_nonzero((iou == best_p[pi]) & (iou == best_g[gj])))
    tp = min(tp, len(pred), len(gt))
    return 2.0 * tp / (len(pred) + len(gt))


def _textlike(boxes: Boxes) -> np.ndarray:
    c = coarse_codes(boxes.label)
    return (c == COARSE["text"]) | (c == COARSE["title"])


def _lines(boxes: Boxes) -> np.ndarray:
    return take_rows(boxes.xyxy, coarse_codes(boxes.label) == COARSE["line"])


def page_score(m: dict) -> float:
    """The documented ranking score, in [0, 1], higher is better.

    score = line_coverage * (1 - cross_share) * (1 - lonely_line_share / 2)
            * (1 - empty_share / 2) * (1 - overlap_share)
    Completeness (text lines inside text regions) times structure: regions that span a
    column gutter, lines alone in their region, text regions holding no line and text
    regions stacked on each other (a layout is a partition; overlaps count text twice, as
    unions of several granularities do) cost. Lonely *lines*, not one-line *regions*: a
    boxed headline, masthead or dateline is one line of hundreds and costs almost nothing,
    while counted per region it cost more than leaving those lines uncovered. A whole-page
    box covers every line but crosses every gutter, so it scores near 0; one region per
    line scores at most 0.5. Without text lines it is NaN.
    """
    if np.isnan(m["line_coverage"]):
        return np.nan
    return float(m["line_coverage"] * (1 - m["cross_share"]) * (1 - m["lonely_line_share"] / 2)
                 * (1 - m["empty_share"] / 2) * (1 - m["overlap_share"]))


def page_metrics(regions: Boxes, lines: np.ndarray, line_tree: shapely.STRtree | None = None,
                 line_pairs: Pairs | None = None) -> dict:
    """No-GT metrics of one page's regions (a source or a fused variant).

    Args:
        regions: region boxes (text-line boxes among them are ignored).
        lines: (L, 4) text-line evidence; with none, line metrics are NaN.
        line_tree: `geometry.box_tree(lines)`, shared when one page is measured many times.
        line_pairs: ``cross_pairs(text regions, lines)`` when the caller has them, in any
            order (`text_line_pairs`): the metrics count pairs, whatever their order.

    Returns:
        dict with `METRIC_KEYS`: region counts, text_area_ratio (union of text regions /
        page area), overlap_share (share of that union under two or more text regions),
        line_coverage (share of lines with >= 50% inside one text region),
        cross_share (share of text regions whose lines show a column gutter),
        single_line_share and empty_share (text regions with <= 1 / 0 lines),
        lonely_line_share (lines that are the only line of a text region), score.
    """
    lines = np.ascontiguousarray(lines, dtype=np.float64).reshape(-1, 4)
    return _page_metrics(regions, lines, line_tree, line_pairs)


def empty_page_metrics(has_lines: bool) -> dict:
    """`page_metrics` of a page with no regions: what a source that gave no output on a page
    scores there (zeros, score 0; line metrics NaN on a page without text lines). With no
    region no line is covered, so one stand-in line tells the two cases apart."""
    lines = np.array([[0.0, 0.0, 1.0, 1.0]]) if has_lines else np.zeros((0, 4))
    return page_metrics(Boxes.empty(PageMeta("", 1, 1)), lines)


def _page_metrics(regions: Boxes, lines: np.ndarray, line_tree: shapely.STRtree | None,
                  line_pairs: Pairs | None) -> dict:
    meta = regions.meta
    text = take_rows(regions.xyxy, _textlike(regions))
    count = cover_count(text, meta.width, meta.height, _RASTER)
    covered_px = np.count_nonzero(count)
    m = {"n_regions": int(len(regions) - len(_lines(regions))), "n_text": int(len(text)),
         "text_area_ratio": covered_px / count.size,
         "overlap_share": np.count_nonzero(count >= 2) / covered_px if covered_px else 0.0}
    if len(lines) == 0:
        m.update(line_coverage=np.nan, cross_share=np.nan, single_line_share=np.nan, lonely_line_share=np.nan,
                 empty_share=np.nan)
    else:
        p = line_pairs if line_pairs is not None else cross_pairs(text, lines, line_tree)
        inside = p.inter >= 0.5 * np.maximum(area(lines)[p.j], 1e-9)
        mb, ml = p.i[inside], p.j[inside]
        covered = np.zeros(len(lines), bool)
        covered[ml] = True
        per_region = np.bincount(mb, minlength=len(text))
        n_cols, _, _ = column_segments(text, lines, mb, ml, _COL_GAP * meta.width, slack=_COL_SLACK * meta.width)
        nt = max(len(text), 1)
        m.update(
            line_coverage=float(covered.mean()),
            cross_share=float(np.count_nonzero(n_cols >= 2) / nt),
            single_line_share=float(np.count_nonzero(per_region <= 1) / nt),
            lonely_line_share=float(np.count_nonzero(per_region == 1) / len(lines)),
            empty_share=float(np.count_nonzero(per_region == 0) / nt),
        )
        if len(text) == 0:
            m.update(cross_share=0.0, single_line_share=0.0, lonely_line_share=0.0, empty_share=0.0)
    m["score"] = page_score(m)
    return m


def text_line_pairs(pool: Boxes, pairs: Pairs, line_mask: np.ndarray, sources: dict[str, bool]) -> dict[str, Pairs]:
    """``cross_pairs(text, lines)`` of each source's text boxes (all its boxes where `sources`
    says True: the text lines measured as regions) with the pool's lines (`line_mask`), taken
    from the pool's own overlapping `pairs` (i < j, each once) instead of a query per source.

    The pairs come in another order than the query's, which `page_metrics` does not depend on.
    """
    line_index = np.cumsum(line_mask) - 1
    lines = take_rows(pool.xyxy, line_mask)
    rows = np.flatnonzero(line_mask)
    ok = area(lines) > 0   # a line overlaps itself: the query finds it, the pool's pairs do not
    # Both ways round (text box, line), then each line with itself.
    side_text = np.concatenate([pairs.i, pairs.j, rows[ok]])
    side_line = np.concatenate([pairs.j, pairs.i, rows[ok]])
    inter = np.concatenate([pairs.inter, pairs.inter, area(lines)[ok]])
    on_line = line_mask[side_line]
    side_text, side_line, inter = side_text[on_line], side_line[on_line], inter[on_line]
    src = pool.data["source"]
    text = _textlike(pool)
    out = {}
    for name, whole in sources.items():
        mine = (src == name) & (text | whole)
        pos = np.cumsum(mine) - 1
        take = mine[side_text]
        out[name] = Pairs(pos[side_text[take]], line_index[side_line[take]], inter[take])
    return out


def best_source(boxes: Boxes) -> str:
    """Name of the region source of `boxes` with the highest `page_score` (ties: name)."""
    lines = _lines(boxes)
    region = coarse_codes(boxes.label) != COARSE["line"]
    names = sorted(set(boxes.data["source"][region].tolist()))
    scores = [page_metrics(boxes[region & (boxes.data["source"] == s)], lines)["score"] for s in names]
    scores = [-1.0 if np.isnan(s) else s for s in scores]
    return names[int(np.argmax(scores))]


def loo_agreement(boxes: Boxes, pairs: Pairs | None = None) -> dict[str, dict]:
    """Each region source's agreement with the consensus of the *other* families.

    No source is scored against itself or its own family (correlated variants of one
    model are one voice). With n other families on the page:
    - ``loo_pixel_f1``: pixel F1 of the source's text area against the pixels that at least
      ceil(n/2) other families mark as text (text lines count for their family);
    - ``loo_box_agreement``: share of the source's text boxes that some box of another
      family matches (same coarse class, or a text line and a text box; IoU >= 0.5 or
      intersection over the smaller >= 0.8).
    Both NaN when no other family ran on the page.
    """

    meta = boxes.meta
    coarse = coarse_codes(boxes.label)
    is_line = coarse == COARSE["line"]
    text = _textlike(boxes)
    fam_names, fam = column_codes(boxes, "family")
    src_names, src = column_codes(boxes, "source")
    # Each source's text raster once; a family's is the union of its sources' (a box's raster
    # footprint does not depend on the other boxes), instead of rasterising every box twice.
    evidence = text | is_line
    src_masks = [union_mask(boxes.xyxy[(src == s) & evidence], meta.width, meta.height, _RASTER)
                 for s in range(len(src_names))]
    fam_of_src = np.zeros(len(src_names), np.intp)
    fam_of_src[src] = fam
    masks = np.stack([np.logical_or.reduce([src_masks[s] for s in np.flatnonzero(fam_of_src == f)])
                      for f in range(len(fam_names))]) if len(boxes) else np.zeros((0, 1, 1), bool)
    votes = np.count_nonzero(masks, axis=0)
    if pairs is None:
        pairs = self_pairs(boxes.xyxy)
    iou, ioa_i, ioa_j = pair_scores(boxes.xyxy, pairs)
    ci, cj = coarse[pairs.i], coarse[pairs.j]
    compatible = (ci == cj) | (is_line[pairs.i] & text[pairs.j]) | (text[pairs.i] & is_line[pairs.j])
    ok = (fam[pairs.i] != fam[pairs.j]) & compatible & ((iou >= 0.5) | (np.maximum(ioa_i, ioa_j) >= 0.8))
    matched = np.zeros(len(boxes), bool)
    matched[pairs.i[ok]] = True
    matched[pairs.j[ok]] = True
    out = {}
    for s in range(len(src_names)):
        own = src == s
        f = fam[own][0]
        n_other = len(fam_names) - 1
        if n_other == 0:
            out[str(src_names[s])] = {"loo_pixel_f1": np.nan, "loo_box_agreement": np.nan}
            continue
        ref = (votes - masks[f]) >= (n_other + 1) // 2
        sel = own & evidence          # a text-line source is scored by its lines
        _, _, pf = pixel_prf(src_masks[s], ref)
        out[str(src_names[s])] = {"loo_pixel_f1": pf,
                                  "loo_box_agreement": float(matched[sel].mean()) if sel.any() else np.nan}
    return out
