"""Newspaper reading order: an XY-cut on the page's column grid, columns first (`reading_order`),
with text fused across a gutter or over a rule read as its parts (`reading_order_parts`).

The grid (`columns`), the rules across the columns (`rules`) and the cut (`xycut`) have their
own modules; what comes from a page's text lines alone is computed once per page (`PageLines`)
and shared by the fusion variants of that page.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from shapely import STRtree

from .grid import MIN_LINES, Grid, box_grid, column_spans, line_grid, lines_inside
from .rules import rule_parts, rules_across
from .xycut import grid_cut

__all__ = ["reading_order", "reading_order_parts", "PageLines", "page_lines"]


# Share of the page's height from which a box that is not text is taken for the scan's edge.
_EDGE = 0.8


@dataclass(frozen=True)
class PageLines:
    """What the reading order takes from a page's text lines alone: the column grid and the
    rules across the columns. The variants of a page fuse different boxes over the same
    lines, so fusion computes this once per page (`page_lines`) and passes it to each."""

    lines: np.ndarray          # (L, 4) the page's text lines
    width: float               # the page width the grid was measured on
    grid: Grid | None          # the column grid (None: fewer than `MIN_LINES` lines)
    rules: np.ndarray          # (R,) y of the rules across the columns
    tree: STRtree | None       # the lines' `geometry.box_tree`, when the caller has it

    def holds(self, lines: np.ndarray, width: float) -> bool:
        """Whether this was computed from `lines` on a page `width` wide (a variant that dropped
        a line must not use its page's)."""
        return self.width == width and self.lines.shape == lines.shape and np.array_equal(self.lines, lines)


def page_lines(lines: np.ndarray | None, width: float, tree: STRtree | None = None) -> PageLines:
    """`PageLines` of a page's text `lines` (None: none); `tree`: their `geometry.box_tree`, if built."""
    lines = np.zeros((0, 4)) if lines is None else np.asarray(lines, float).reshape(-1, 4)
    if len(lines) < MIN_LINES:
        return PageLines(lines, width, None, np.zeros(0), tree)
    grid = line_grid(lines, width)
    return PageLines(lines, width, grid, rules_across(grid.ev, grid.bounds, grid.poke, grid.line_h), tree)


def reading_order(xyxy: np.ndarray, width: float, height: float, tol: float = 0.005,
                  lines: np.ndarray | PageLines | None = None, text: np.ndarray | None = None) -> np.ndarray:
    """(N,) reading rank of each box: columns left to right, top to bottom within a column.

    The page's columns come from the gutters of its text lines (`column_bounds`; from the
    boxes themselves without lines), and each box gets the columns it spans
    (`column_spans`). A text box whose own lines leave a gutter free (two columns' text
    fused into one region) is read as its column parts (`reading_order_parts`), and stands
    where its first part is read. Then an XY-cut on that grid, columns first: a column boundary
    no box spans splits a block left to right; without one, a horizontal gap cuts it into
    bands (masthead, a headline over several columns, the body below); in a block without
    either, a tall box spanning columns that a neighbour runs past (text fused across a
    gutter) goes back to one column, and otherwise the block is cut into bands at the top of
    each box spanning columns (read first in its band, after the boxes beside it on its
    left: the pieces of a dateline read left to right). Inside one column, the plain XY-cut
    of the boxes orders them (top to bottom). On the grid, boxes that overlap a gutter by a
    few pixels or a slightly skewed column no longer hide the column structure, which exact
    box gaps missed on fragmented layouts.

    Args:
        xyxy: (N, 4) boxes in page pixels.
        width, height: page size; overlaps below `tol` of it still count as a gap, because
            fused boxes of neighbouring columns often touch.
        lines: (L, 4) text lines of the page, the gutter evidence (None: the boxes), or
            their `PageLines` (computed once for the page).
        text: (N,) bool, the boxes of running text, which may be read as column parts
            (None: none; headlines, images, tables and separators are never cut).

    >>> reading_order(np.zeros((0, 4)), 10, 10).shape
    (0,)
    """
    xyxy = np.asarray(xyxy, float).reshape(-1, 4)
    _, box, part_rank = reading_order_parts(xyxy, width, height, tol, lines, text)
    first = np.full(len(xyxy), len(box), np.int64)
    np.minimum.at(first, box, part_rank)
    rank = np.empty(len(xyxy), np.int64)
    rank[np.argsort(first, kind="stable")] = np.arange(len(xyxy))
    return rank




def reading_order_parts(xyxy: np.ndarray, width: float, height: float, tol: float = 0.005,
                        lines: np.ndarray | PageLines | None = None, text: np.ndarray | None = None
                        ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Boxes cut into their column parts where their lines show text fused across a gutter,
    and the reading rank of every part (see `reading_order`).

    A text box spanning a gutter of the grid is cut there when at least 2 of its lines (centre
    inside the box) lie on each side and at most a fifth of them cross it: two columns'
    text, not a headline or an advertisement set across the columns, whose lines run over
    the gutter. It must also be taller than 3 line heights, with a box of its columns
    running past its top or bottom and a single-column box above it (a column runs on beside
    it: a row under the masthead is never cut), or else touch a box cut at the same gutter
    (the first lines of the same fused text). Each part is the extent of its lines' pieces on
    its side, inside the box. Without lines (or fewer than 8) or `text` no box is cut.

    Returns:
        part_xyxy (P, 4) sorted by box, then x; part_box (P,) the box each part comes
        from (every box has at least one part; an uncut box is its own part);
        part_rank (P,) reading rank of each part.
    """
    xyxy = np.asarray(xyxy, float).reshape(-1, 4)
    page = lines if isinstance(lines, PageLines) else page_lines(lines, width)
    has_lines = page.grid is not None
    grid = page.grid if has_lines else box_grid(xyxy, width, height, tol)
    lo, hi = column_spans(xyxy, grid.bounds, grid.poke)
    part_xyxy, part_box = xyxy, np.arange(len(xyxy))
    cut = np.zeros(len(xyxy), bool) if text is None or not has_lines else (hi > lo) & np.asarray(text, bool)
    if cut.any():
        part_xyxy, part_box = _column_parts(xyxy, np.flatnonzero(cut), lo, hi, page, tol * height)
    rules = np.zeros(0)
    if text is not None and has_lines:
        rules = page.rules
        part_xyxy, part_box = rule_parts(part_xyxy, part_box, np.asarray(text, bool), rules, page.lines,
                                         grid.line_h, tree=page.tree)
    if len(part_box) > len(xyxy):
        lo, hi = column_spans(part_xyxy, grid.bounds, grid.poke)
    # A box that is not text and nearly as tall as the page (the scan's edge, a rule along it)
    # stands beside every band and would stop each cut across the page: it is read last.
    edge = np.zeros(len(part_xyxy), bool) if text is None else (
        ~np.asarray(text, bool)[part_box] & (part_xyxy[:, 3] - part_xyxy[:, 1] >= _EDGE * height))
    rest = np.flatnonzero(~edge)
    # Only text stops a rule's cut: a picture or a scan edge across it is placed by its centre.
    stops = np.ones(len(part_xyxy), bool) if text is None else np.asarray(text, bool)[part_box]
    out = rest[grid_cut(part_xyxy[rest], lo[rest], hi[rest], tol * width, tol * height, grid, rules, stops[rest])]
    out = np.concatenate([out, np.flatnonzero(edge)])
    rank = np.empty(len(part_xyxy), np.int64)
    rank[out] = np.arange(len(out))
    return part_xyxy, part_box, rank


def _column_parts(xyxy: np.ndarray, spanning: np.ndarray, lo: np.ndarray, hi: np.ndarray, page: PageLines,
                  tol_y: float, min_lines: int = 2, max_cross: float = 0.2) -> tuple[np.ndarray, np.ndarray]:
    """Boxes `spanning` columns cut at the gutters their own lines leave free (`reading_order_parts`).

    Returns:
        part_xyxy (P, 4) sorted by box then x, part_box (P,).
    """
    bounds, trim, strip = page.grid.bounds, page.grid.trim, page.grid.strip
    owner, ln = lines_inside(xyxy[spanning], page.lines, page.tree)
    mid = (ln[:, 0] + ln[:, 2]) / 2
    t0, t1 = np.minimum(ln[:, 0] + trim, mid), np.maximum(ln[:, 2] - trim, mid)
    parts, part_box, cut = [xyxy], [np.arange(len(xyxy))], np.zeros(len(xyxy), bool)
    short = xyxy[spanning, 3] - xyxy[spanning, 1] <= strip
    cut_at: dict[float, list[int]] = {}   # gutter -> boxes cut there
    # Spanning boxes are few: a loop over them, arrays inside; the tall ones first, so that a
    # short one can lean on a cut neighbour.
    for k in np.argsort(short, kind="stable").tolist():
        b = int(spanning[k])
        box = xyxy[b]
        mine = owner == k
        a0, a1 = t0[mine], t1[mine]
        gutters = [g for g in bounds[lo[b]:hi[b]].tolist()
                   if (a1 <= g).sum() >= min_lines and (a0 >= g).sum() >= min_lines
                   and ((a0 < g) & (a1 > g)).sum() <= max_cross * len(a0)]
        if short[k]:   # the first or last lines of a fused text: they touch a box cut at the same gutter
            gutters = [g for g in gutters if any(xyxy[c, 1] <= box[3] + tol_y and xyxy[c, 3] >= box[1] - tol_y
                                                 for c in cut_at.get(g, []))]
        else:
            near = (lo <= hi[b]) & (hi >= lo[b]) & (xyxy[:, 1] < box[3] - tol_y) & (xyxy[:, 3] > box[1] + tol_y)
            near[b] = False
            beside = near & (((xyxy[:, 1] < box[1] - tol_y) & (xyxy[:, 3] > box[1] + tol_y))
                             | ((xyxy[:, 1] < box[3] - tol_y) & (xyxy[:, 3] > box[3] + tol_y)))
            above = (lo == hi) & (lo >= lo[b]) & (hi <= hi[b]) & (xyxy[:, 3] <= box[1] + tol_y)
            if not beside.any() or not above.any():   # no column runs on beside it: a header row, read whole
                continue
        if not gutters:
            continue
        for g in gutters:
            cut_at.setdefault(g, []).append(b)
        edges = [box[0], *gutters, box[2]]
        mine_xyxy = ln[mine]
        for e0, e1 in zip(edges[:-1], edges[1:]):
            on = (a1 > e0) & (a0 < e1)
            if not on.any():
                continue
            piece = mine_xyxy[on]
            parts.append(np.array([[max(e0, box[0], piece[:, 0].min()), max(box[1], piece[:, 1].min()),
                                    min(e1, box[2], piece[:, 2].max()), min(box[3], piece[:, 3].max())]]))
            part_box.append(np.array([b]))
        cut[b] = True
    keep = ~cut
    part_xyxy = np.concatenate([parts[0][keep], *parts[1:]])
    owner_all = np.concatenate([part_box[0][keep], *part_box[1:]])
    o = np.lexsort((part_xyxy[:, 0], owner_all))
    return part_xyxy[o], owner_all[o]

