"""How worth a look a page is (its review priority): source disagreement, fused-vs-member gaps, missed text lines."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from itertools import combinations
from typing import Sequence

import numpy as np

from ..contract import MAX_OVERLAPPING_PAIRS, Boxes
from ..fusion.geometry import area, cross_pairs, sources_crowded

__all__ = ["PageScore", "match_rate", "line_coverage", "score_page"]

# Thresholds that turn a component into a stated reason (the priority itself uses the raw values).
_DISAGREE_REASON = 0.5
_COVERAGE_REASON = 0.8
_MATCH_IOU = 0.5
_LINE_INSIDE = 0.5
_TEXTUAL = ("text", "title")


@dataclass(frozen=True)
class PageScore:
    """Components in [0, 1] (None when not measurable) and their plain sum as `review_priority`.

    Higher means more worth a look: named apart from the leaderboards' layout `score`, where
    higher means a better layout.

    `source_disagreement`: mean over pairs of block sources of 1 - match_rate.
    `fused_disagreement`: mean over block sources of 1 - match_rate(fused, source).
    `line_coverage`: share of text lines >= 50 % inside one text/title region.
    `failed_share`: failed sources / sources that should have this page.
    `unscored`: why the first three are None although there are boxes (the reason, as in `reasons`).
    """

    review_priority: float
    source_disagreement: float | None
    fused_disagreement: float | None
    line_coverage: float | None
    failed_share: float
    failed_sources: list[str] = field(default_factory=list)
    reasons: list[str] = field(default_factory=list)
    unscored: str | None = None

    def to_dict(self) -> dict:
        return asdict(self)


def match_rate(a: Boxes, b: Boxes, iou: float = _MATCH_IOU) -> float:
    """Share of boxes of `a` and `b` that have a same-coarse-class partner with IoU >= `iou`.

    Both empty gives 1.0 (they agree there is nothing); one empty gives 0.0.
    """
    n = len(a) + len(b)
    if n == 0:
        return 1.0
    pairs = cross_pairs(a.xyxy, b.xyxy)
    union = area(a.xyxy)[pairs.i] + area(b.xyxy)[pairs.j] - pairs.inter
    iou_k = np.divide(pairs.inter, union, out=np.zeros_like(pairs.inter), where=union > 0)
    ok = (iou_k >= iou) & (a.coarse[pairs.i] == b.coarse[pairs.j])
    hit_a = np.zeros(len(a), bool)
    hit_b = np.zeros(len(b), bool)
    hit_a[pairs.i[ok]] = True
    hit_b[pairs.j[ok]] = True
    return float((hit_a.sum() + hit_b.sum()) / n)


def line_coverage(lines: Boxes, regions: Boxes) -> float | None:
    """Share of `lines` with >= 50 % of their area inside one text or title box of `regions`.

    None when there are no lines (nothing to measure).
    """
    if len(lines) == 0:
        return None
    text = regions[np.isin(regions.coarse, _TEXTUAL)]
    pairs = cross_pairs(lines.xyxy, text.xyxy)
    line_area = area(lines.xyxy)
    share = np.divide(pairs.inter, line_area[pairs.i], out=np.zeros_like(pairs.inter), where=line_area[pairs.i] > 0)
    best = np.zeros(len(lines))
    np.maximum.at(best, pairs.i, share)
    return float(np.mean(best >= _LINE_INSIDE))


def _blocks(boxes: Boxes) -> Boxes:
    return boxes[boxes.coarse != "line"]


def score_page(sources: dict[str, Boxes], fused: Boxes | None, failed_sources: list[str],
               fused_failed: Sequence[str] = (), fused_pending: Sequence[str] = ()) -> PageScore:
    """Score one page from its source boxes (name -> Boxes), the reference fused boxes and failures.

    `fused_failed` / `fused_pending` name the fused variants the page should have been checked
    against that failed on it or are not made yet: they lead its reasons, so a page scored without
    its fused layout never reads as one with nothing to look at.

    Block sources are those with any non-line box; text lines of every source are the
    evidence for coverage, measured against `fused` or, without it, all source blocks.
    Sources whose boxes overlap in more pairs than fusion pools (`contract.MAX_OVERLAPPING_PAIRS`)
    are not paired: the components are None and `unscored` says why.
    """
    crowded = sources_crowded({name: b.xyxy for name, b in sources.items()}, MAX_OVERLAPPING_PAIRS, "compare")
    scored, fused = ({}, None) if crowded else (sources, fused)
    blocks = {name: _blocks(b) for name, b in scored.items()}
    blocks = {name: b for name, b in blocks.items() if len(b)}
    lines = [b[b.coarse == "line"] for b in scored.values()]
    lines = [b for b in lines if len(b)]

    pair_rates = [match_rate(blocks[x], blocks[y]) for x, y in combinations(sorted(blocks), 2)]
    src_dis = 1.0 - float(np.mean(pair_rates)) if pair_rates else None

    fused_dis = None
    if fused is not None and blocks:
        fused_blocks = _blocks(fused)
        fused_dis = 1.0 - float(np.mean([match_rate(fused_blocks, b) for b in blocks.values()]))

    coverage = None
    if lines:
        all_lines = Boxes.concat(lines)
        if fused is not None:
            reference = fused
        elif blocks:
            reference = Boxes.concat(list(blocks.values()), meta=all_lines.meta)
        else:
            reference = Boxes.empty(all_lines.meta)
        coverage = line_coverage(all_lines, reference)

    n_expected = len(sources) + len(failed_sources)
    failed_share = len(failed_sources) / n_expected if n_expected else 0.0
    parts = [v for v in (src_dis, fused_dis, None if coverage is None else 1.0 - coverage) if v is not None]
    priority = float(sum(parts) + failed_share)

    reasons = [f"fused {name} failed on this page: scored without it" for name in fused_failed]
    reasons += [f"fused {name} not made yet for this page (fusion pending): scored without it" for name in fused_pending]
    if failed_sources:
        reasons.append(f"{len(failed_sources)}/{n_expected} sources failed ({', '.join(sorted(failed_sources))})")
    if src_dis is not None and src_dis >= _DISAGREE_REASON:
        reasons.append(f"sources disagree: {src_dis:.0%} of blocks unmatched between sources")
    if fused_dis is not None and fused_dis >= _DISAGREE_REASON:
        reasons.append(f"fused layout differs from members: {fused_dis:.0%} unmatched")
    if coverage is not None and coverage < _COVERAGE_REASON:
        reasons.append(f"low text-line coverage: {coverage:.0%} of lines inside a text region")
    unscored = f"not scored: {crowded}" if crowded else None
    if unscored:
        reasons.append(unscored)
    if not reasons:
        reasons.append("no threshold crossed; ranked by review priority")
    return PageScore(
        review_priority=round(priority, 4),
        source_disagreement=None if src_dis is None else round(src_dis, 4),
        fused_disagreement=None if fused_dis is None else round(fused_dis, 4),
        line_coverage=None if coverage is None else round(coverage, 4),
        failed_share=round(failed_share, 4),
        failed_sources=sorted(failed_sources),
        reasons=reasons,
        unscored=unscored,
    )
