"""Rules across the columns: where every column of the page breaks at once (`rules_across`), and
text regions fused over such a rule cut into their parts above and below it (`rule_parts`)."""

from __future__ import annotations

import numpy as np
from shapely import STRtree

from .grid import SINGLE_LINE, column_spans, lines_inside

__all__ = ["rules_across", "rule_parts"]


def rules_across(lines: np.ndarray, bounds: np.ndarray, poke: float, line_h: float, gap: float = 0.6,
                 slack: float = 0.25, min_columns: int = 3) -> np.ndarray:
    """y positions where every column of the page breaks at once: a rule across the columns
    (the feuilleton's), which a region fused over it hides from the XY-cut.

    A column breaks where the space between two of its lines exceeds its usual line spacing
    (the median: detected lines overlap on one scan and stand apart on another) by `gap`
    line heights. A break is a rule when at least `min_columns` columns run past its middle
    (lines two line heights above and below) and each of them breaks within `slack` line
    heights of it: one column's paragraph gap, or two columns' gaps that happen to meet, are
    not rules; a blank band across all the columns (under the masthead) reads as one.

    Args:
        lines: (L, 4) single text lines; bounds: (K,) column gutters; poke: `column_spans`'
            reach; line_h: median line height, pixels.

    Returns:
        (R,) sorted y positions, pixels.

    >>> col = lambda x, ys: [[x, y, x + 80, y + 10] for y in ys]
    >>> lines = np.array([b for x in (0, 100, 200) for b in col(x, [0, 9, 18, 40, 49, 58])], float)
    >>> rules_across(lines, np.array([90.0, 190.0]), 20, 10).tolist()
    [34.0]
    """
    # Boxes under 0.6 line heights are a rule's own pieces or marks in the margin, not lines.
    lines = lines[lines[:, 3] - lines[:, 1] >= 0.6 * line_h]
    lo, hi = column_spans(lines, bounds, poke)
    cols = []   # per column: its breaks (y0s, y1s) and its extent
    for c in range(len(bounds) + 1):
        ln = lines[(lo == c) & (hi == c)]
        if len(ln) < 4:
            continue
        ln = ln[np.argsort(ln[:, 1], kind="stable")]
        run = np.maximum.accumulate(ln[:, 3])
        space = ln[1:, 1] - run[:-1]
        wide = space >= np.median(space) + gap * line_h
        cols.append((run[:-1][wide], ln[1:, 1][wide], ln[0, 1], run[-1]))
    # Every break's middle against every column at once, one column at a time: a column's
    # breaks are sorted by their start, so those starting by y + slack are a prefix of them,
    # and one of these ends by y - slack when the prefix's largest end does.
    ys = np.concatenate([(b0 + b1) / 2 for b0, b1, _, _ in cols]) if cols else np.zeros(0)
    n_across, all_meet = np.zeros(len(ys), np.int64), np.ones(len(ys), bool)
    for b0, b1, top, bottom in cols:
        across = (top < ys - 2 * line_h) & (bottom > ys + 2 * line_h)
        k = np.searchsorted(b0, ys + slack * line_h, side="right")
        end = np.maximum.accumulate(b1)[np.maximum(k - 1, 0)] if len(b1) else np.full(len(ys), -np.inf)
        n_across += across
        all_meet &= ~across | ((k > 0) & (end >= ys - slack * line_h))
    found = sorted(ys[(n_across >= min_columns) & all_meet].tolist())
    merged = [y for k, y in enumerate(found) if k == 0 or y - found[k - 1] > line_h]   # one per rule
    return np.asarray(merged, float)


def rule_parts(xyxy: np.ndarray, box: np.ndarray, text: np.ndarray, rules: np.ndarray, lines: np.ndarray,
               line_h: float, min_lines: int = 2, tree: STRtree | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Text boxes cut at the rules (`rules_across`) their own lines lie on both sides of, with
    at least `min_lines` on each and none across: the part above is read with the columns
    above the rule.

    Args:
        xyxy: (P, 4) boxes (or column parts); box: (P,) the region each comes from; text:
            (N,) bool per region; tree: the lines' `geometry.box_tree`, when the page has it.

    Returns:
        part_xyxy (Q, 4), part_box (Q,): sorted by region, then x, then y.
    """
    # a rule more than a line height inside the box, below its top and above its bottom
    crossing = np.flatnonzero(text[box] & (np.searchsorted(rules, xyxy[:, 1] + line_h, side="right")
                                           < np.searchsorted(rules, xyxy[:, 3] - line_h, side="left")))
    if crossing.size == 0:
        return xyxy, box
    owner, ln = lines_inside(xyxy[crossing], lines, tree)
    parts, owners, keep = [], [], np.ones(len(xyxy), bool)
    for n, k in enumerate(crossing.tolist()):
        x0, y0, x1, y1 = xyxy[k]
        mine = ln[owner == n]
        ycen = (mine[:, 1] + mine[:, 3]) / 2
        # its own lines leave the rule free: the text stops above it and starts again below. Only
        # single lines tell (as in `rules_across`): a taller box is the last line with the rule
        # under it, or lines the detector merged.
        single = mine[mine[:, 3] - mine[:, 1] <= SINGLE_LINE * line_h]
        at = [r for r in rules.tolist() if y0 + line_h < r < y1 - line_h
              and not ((single[:, 1] < r - line_h / 4) & (single[:, 3] > r + line_h / 4)).any()]
        edges = [y0, *at, y1]
        pieces = [mine[(ycen > a) & (ycen <= b)] for a, b in zip(edges[:-1], edges[1:])]
        if len(at) == 0 or min(len(p) for p in pieces) < min_lines:
            continue
        keep[k] = False
        for p in pieces:
            parts.append([max(x0, p[:, 0].min()), max(y0, p[:, 1].min()), min(x1, p[:, 2].max()),
                          min(y1, p[:, 3].max())])
            owners.append(box[k])
    if not parts:
        return xyxy, box
    part_xyxy = np.concatenate([xyxy[keep], np.asarray(parts, float)])
    part_box = np.concatenate([box[keep], np.asarray(owners, box.dtype)])
    o = np.lexsort((part_xyxy[:, 1], part_xyxy[:, 0], part_box))
    return part_xyxy[o], part_box[o]

