"""Newspaper reading order (XY-cut on the page's column grid, columns first) and column gutters in text lines."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from ..contract import take_rows
from .geometry import cross_pairs, group_extent

__all__ = ["reading_order", "reading_order_parts", "column_bounds", "column_spans", "column_segments", "spans_columns"]


# Share of the page's height from which a box that is not text is taken for the scan's edge.
_EDGE = 0.8


def _cuts(lo: np.ndarray, hi: np.ndarray, tol: float) -> tuple[np.ndarray, np.ndarray]:
    """Sort intervals by `lo` and return (order, group id) where a gap > -tol starts a group."""
    order = np.argsort(lo, kind="stable")
    lo_s, hi_s = lo[order], hi[order]
    run = np.maximum.accumulate(hi_s)
    new = np.empty(len(order), bool)
    new[0] = True
    new[1:] = lo_s[1:] > run[:-1] - tol
    return order, np.cumsum(new) - 1


def _depth_first(start: list[int] | np.ndarray, split: Callable) -> list[int]:
    """The indices of block `start` in the order of a depth-first cut of it.

    `split(idx)` returns ``(parts, None)``, the parts of block `idx` in reading order (each
    strictly smaller, or the block itself once `split` has changed the state it decides on
    so that it cannot be returned whole again: `_grid_cut` moving a box back to one column),
    or ``(None, order)``, the block's final order. An explicit stack instead of recursion: no
    recursion limit on deep cut trees (a staircase of n boxes nests n levels).
    """
    out: list[int] = []
    stack = [start]
    while stack:
        idx = stack.pop()
        if len(idx) <= 1:
            out.extend(idx)
            continue
        parts, order = split(idx)
        if parts is None:
            out.extend(order)
        else:
            stack.extend(reversed(parts))
    return out


def _split_parts(idx: np.ndarray, order: np.ndarray, group: np.ndarray) -> list[np.ndarray]:
    """The groups of `_cuts` as index arrays, in order."""
    bounds = [0, *(np.flatnonzero(group[1:] != group[:-1]) + 1).tolist(), len(order)]
    return [idx[order][a:b] for a, b in zip(bounds[:-1], bounds[1:])]


def _sort_key(v: float) -> tuple:
    """numpy's sort order on Python floats: NaN last, NaNs equal."""
    return (True, 0.0) if v != v else (False, v)


def _xycutter(xyxy: np.ndarray, tol_x: float, tol_y: float) -> Callable[[list[int]], list[int]]:
    """The XY-cut reading order of any set of `xyxy`'s boxes, given and returned as indices into
    `xyxy`: depth first, left part / upper band first.

    Columns first: a gutter that runs through the whole block splits it left to right; only
    when there is none is it cut into horizontal bands (masthead, headline, body). On Python
    floats, with `_cuts`' rules (stable sorts with NaN last, a running maximum NaN sticks to):
    a column's block is tens of boxes, where numpy's per-call overhead was most of the time,
    and a 20,000-line page of columns cuts ~5x faster than with numpy. A page's coordinates
    become Python floats once, not once per column block (a quarter of `_grid_cut`'s time on
    a page of 8 columns)."""
    x0, y0, x1, y1 = xyxy.T.tolist()
    nan = bool(np.isnan(xyxy).any())
    if nan:
        keys = [[_sort_key(v) for v in c] for c in (x0, y0)]
    else:   # plain floats sort as numpy sorts them
        keys = [x0, y0]

    def split(idx: list[int]) -> tuple:
        for lo, hi, tol, key in ((x0, x1, tol_x, keys[0]), (y0, y1, tol_y, keys[1])):
            order = sorted(idx, key=key.__getitem__)
            parts, part = [], [order[0]]
            run = hi[order[0]]
            for k in order[1:]:
                if lo[k] > run - tol:
                    parts.append(part)
                    part = [k]
                else:
                    part.append(k)
                h = hi[k]
                # A NaN end sticks to the running maximum; without NaN (the common case) the
                # first test decides alone.
                if h > run or (nan and run == run and h != h):
                    run = h
            if parts:
                parts.append(part)
                # every part one box: they are read as they come
                return (None, order) if len(parts) == len(order) else (parts, None)
        return None, sorted(idx, key=lambda k: (keys[1][k], keys[0][k]))

    return lambda idx: _depth_first(idx, split)


def column_bounds(evidence_xyxy: np.ndarray, width: float, trim: float, *, bins: int = 1000,
                  window: float = 0.08, depth: float = 0.5, min_support: float = 3) -> np.ndarray:
    """x positions of the page's column gutters: valleys of the vertical projection of `evidence_xyxy`.

    The projection counts, at each x, the boxes (text lines) whose x-extent, trimmed by `trim`
    pixels at each end, covers it. A gutter is a run of x where that count is at most `depth`
    x the lower of the highest counts within `window` x width on its left and on its right
    (each at least `min_support`), placed at the run's lowest point. A valley rather than an
    empty strip, because on low-resolution scans the line detector runs some lines across
    narrow gutters, and a spanning headline or advertisement crosses them too; the trim
    removes the few pixels by which line boxes of neighbouring columns overlap. Bins of
    width/`bins` keep it linear in the number of boxes.

    Args:
        evidence_xyxy: (L, 4) boxes, page pixels.
        width: page width in pixels.
        trim: pixels taken off each end of every box.

    Returns:
        (K,) sorted gutter x positions, pixels.

    >>> column_bounds(np.zeros((0, 4)), 100, 0.0).shape
    (0,)
    """
    ev = np.asarray(evidence_xyxy, float).reshape(-1, 4)
    scale = bins / max(float(width), 1e-9)
    a = np.ceil((ev[:, 0] + trim) * scale).astype(np.int64)
    b = np.floor((ev[:, 2] - trim) * scale).astype(np.int64)
    keep = b > a
    a, b = np.clip(a[keep], 0, bins), np.clip(b[keep], 0, bins)
    if a.size == 0:
        return np.zeros(0)
    prof = np.cumsum(np.bincount(a, minlength=bins + 1) - np.bincount(b, minlength=bins + 1))[:bins].astype(float)
    # Sliding maxima over `win` bins to the left and to the right, by doubling: O(bins log win).
    win = max(1, int(round(window * bins)))
    left, right = prof.copy(), prof.copy()
    span = 1
    while span < win:
        step = min(span, win - span)
        left[step:] = np.maximum(left[step:], left[:-step])
        right[:-step] = np.maximum(right[:-step], right[step:])
        span += step
    side = np.minimum(left, right)
    low = (prof <= depth * side) & (side >= min_support)
    edges = np.diff(np.r_[0, low.astype(np.int8), 0])
    out = []
    for s, e in zip(np.flatnonzero(edges == 1), np.flatnonzero(edges == -1)):
        bottom = s + np.flatnonzero(prof[s:e] == prof[s:e].min())
        out.append((bottom[0] + bottom[-1] + 1) / 2 / scale)
    return np.asarray(out, float)


def column_spans(xyxy: np.ndarray, bounds: np.ndarray, poke: float) -> tuple[np.ndarray, np.ndarray]:
    """First and last column of each box on the grid cut at `bounds`.

    A box spans a gutter only when it reaches more than `poke` pixels past it on both
    sides: fused regions of neighbouring columns often overlap a narrow gutter, or lean over
    it on a skewed scan, by a few pixels to a line height; a headline over two columns
    reaches far into both. A box narrower than 2 x `poke` lies in the column of its centre.

    Returns:
        lo (N,), hi (N,) int column indices, lo <= hi, in 0..len(bounds).

    >>> column_spans(np.array([[0, 0, 95, 9], [90, 0, 300, 9]]), np.array([100.0, 200.0]), 10)
    (array([0, 1]), array([0, 2]))
    """
    xyxy = np.asarray(xyxy, float).reshape(-1, 4)
    mid = (xyxy[:, 0] + xyxy[:, 2]) / 2
    a = np.minimum(xyxy[:, 0] + poke, mid)
    b = np.maximum(xyxy[:, 2] - poke, mid)
    lo = np.searchsorted(bounds, a, side="right")
    return lo, np.maximum(np.searchsorted(bounds, b, side="left"), lo)   # a centre on a bound: its right column


_MIN_LINES = 8   # fewer text lines than this are no evidence of columns


def _line_evidence(lines: np.ndarray) -> tuple[np.ndarray, float]:
    """Single text lines (not blocks the detector merged: at most 1.5 x the median height)
    and the median line height, the unit of the lengths `reading_order` uses."""
    h = lines[:, 3] - lines[:, 1]
    med = float(np.median(h))
    return lines[h <= 1.5 * med], med


def reading_order(xyxy: np.ndarray, width: float, height: float, tol: float = 0.005,
                  lines: np.ndarray | None = None, text: np.ndarray | None = None) -> np.ndarray:
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
        lines: (L, 4) text lines of the page, the gutter evidence (None: the boxes).
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


@dataclass(frozen=True)
class _Grid:
    """A page's column grid and the lengths the reading order measures on it (`reading_order_parts`)."""

    ev: np.ndarray | None   # (L, 4) the single text lines it comes from (None: from the boxes)
    line_h: float           # median line height (0: no lines)
    trim: float             # taken off each end of a line for the gutters
    poke: float             # how far a box must reach past a gutter to span it
    strip: float            # a band at most this tall holds the last lines of the columns above
    merged: float           # a spanning box taller than this is text fused across a gutter
    bounds: np.ndarray      # (K,) column gutters


def _line_grid(lines: np.ndarray, width: float) -> _Grid:
    """The grid of a page with text lines: lengths in line heights."""
    ev, line_h = _line_evidence(lines)
    trim = 0.5 * line_h
    return _Grid(ev, line_h, trim, 2 * line_h, 3 * line_h, 6 * line_h, column_bounds(ev, width, trim))


def _box_grid(xyxy: np.ndarray, width: float, height: float, tol: float) -> _Grid:
    """The grid of a page without lines: its boxes are the evidence, with lengths for a broadsheet's body type."""
    trim = 2 * tol * width
    return _Grid(None, 0.0, trim, 4 * tol * width, 0.0, 12 * tol * height, column_bounds(xyxy, width, trim))


def spans_columns(xyxy: np.ndarray, width: float, lines: np.ndarray | None) -> np.ndarray:
    """(N,) bool: whether each box reaches into more than one column of the page's grid (the
    gutters of its text lines, `column_bounds`); none does without lines (fewer than 8).

    >>> spans_columns(np.zeros((2, 4)), 100, None).tolist()
    [False, False]
    """
    xyxy = np.asarray(xyxy, float).reshape(-1, 4)
    if lines is None or len(lines) < _MIN_LINES:
        return np.zeros(len(xyxy), bool)
    grid = _line_grid(np.asarray(lines, float).reshape(-1, 4), width)
    lo, hi = column_spans(xyxy, grid.bounds, grid.poke)
    return hi > lo


def reading_order_parts(xyxy: np.ndarray, width: float, height: float, tol: float = 0.005,
                        lines: np.ndarray | None = None, text: np.ndarray | None = None
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
    lines = None if lines is None else np.asarray(lines, float).reshape(-1, 4)
    has_lines = lines is not None and lines.shape[0] >= _MIN_LINES
    grid = _line_grid(lines, width) if has_lines else _box_grid(xyxy, width, height, tol)
    lo, hi = column_spans(xyxy, grid.bounds, grid.poke)
    part_xyxy, part_box = xyxy, np.arange(len(xyxy))
    cut = np.zeros(len(xyxy), bool) if text is None or not has_lines else (hi > lo) & np.asarray(text, bool)
    if cut.any():
        part_xyxy, part_box = _column_parts(xyxy, np.flatnonzero(cut), lo, hi, grid.bounds, lines, grid.trim,
                                            tol * height, grid.strip)
    rules = np.zeros(0)
    if text is not None and has_lines:
        rules = rules_across(grid.ev, grid.bounds, grid.poke, grid.line_h)
        part_xyxy, part_box = _rule_parts(part_xyxy, part_box, np.asarray(text, bool), rules, lines, grid.line_h)
    if len(part_box) > len(xyxy):
        lo, hi = column_spans(part_xyxy, grid.bounds, grid.poke)
    # A box that is not text and nearly as tall as the page (the scan's edge, a rule along it)
    # stands beside every band and would stop each cut across the page: it is read last.
    edge = np.zeros(len(part_xyxy), bool) if text is None else (
        ~np.asarray(text, bool)[part_box] & (part_xyxy[:, 3] - part_xyxy[:, 1] >= _EDGE * height))
    rest = np.flatnonzero(~edge)
    # Only text stops a rule's cut: a picture or a scan edge across it is placed by its centre.
    stops = np.ones(len(part_xyxy), bool) if text is None else np.asarray(text, bool)[part_box]
    out = rest[_grid_cut(part_xyxy[rest], lo[rest], hi[rest], tol * width, tol * height, grid, rules, stops[rest])]
    out = np.concatenate([out, np.flatnonzero(edge)])
    rank = np.empty(len(part_xyxy), np.int64)
    rank[out] = np.arange(len(out))
    return part_xyxy, part_box, rank


def _lines_inside(boxes: np.ndarray, lines: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The lines whose centre lies inside each of `boxes` (the box's own lines, not a
    neighbour's that overlaps it): (K,) box index, (K, 4) line, sorted by box."""
    pairs = cross_pairs(boxes, lines)
    ln = take_rows(lines, pairs.j)
    cx, cy = (ln[:, 0] + ln[:, 2]) / 2, (ln[:, 1] + ln[:, 3]) / 2
    bx = take_rows(boxes, pairs.i)
    inside = (cx > bx[:, 0]) & (cx < bx[:, 2]) & (cy > bx[:, 1]) & (cy < bx[:, 3])
    return pairs.i[inside], ln[inside]


def _column_parts(xyxy: np.ndarray, spanning: np.ndarray, lo: np.ndarray, hi: np.ndarray, bounds: np.ndarray,
                  lines: np.ndarray, trim: float, tol_y: float, strip: float, min_lines: int = 2,
                  max_cross: float = 0.2) -> tuple[np.ndarray, np.ndarray]:
    """Boxes `spanning` columns cut at the gutters their own lines leave free (`reading_order_parts`).

    Returns:
        part_xyxy (P, 4) sorted by box then x, part_box (P,).
    """
    owner, ln = _lines_inside(xyxy[spanning], lines)
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
    found = []
    for b0, b1, _, _ in cols:
        for y in ((b0 + b1) / 2).tolist():
            across = [c for c in cols if c[2] < y - 2 * line_h and c[3] > y + 2 * line_h]
            meet = [((c[0] <= y + slack * line_h) & (c[1] >= y - slack * line_h)).any() for c in across]
            if len(across) >= min_columns and all(meet):
                found.append(y)
    found.sort()
    merged = [y for k, y in enumerate(found) if k == 0 or y - found[k - 1] > line_h]   # one per rule
    return np.asarray(merged, float)


def _rule_parts(xyxy: np.ndarray, box: np.ndarray, text: np.ndarray, rules: np.ndarray, lines: np.ndarray,
                line_h: float, min_lines: int = 2) -> tuple[np.ndarray, np.ndarray]:
    """Text boxes cut at the rules (`rules_across`) their own lines lie on both sides of, with
    at least `min_lines` on each and none across: the part above is read with the columns
    above the rule.

    Args:
        xyxy: (P, 4) boxes (or column parts); box: (P,) the region each comes from; text:
            (N,) bool per region.

    Returns:
        part_xyxy (Q, 4), part_box (Q,): sorted by region, then x, then y.
    """
    # a rule more than a line height inside the box, below its top and above its bottom
    crossing = np.flatnonzero(text[box] & (np.searchsorted(rules, xyxy[:, 1] + line_h, side="right")
                                           < np.searchsorted(rules, xyxy[:, 3] - line_h, side="left")))
    if crossing.size == 0:
        return xyxy, box
    owner, ln = _lines_inside(xyxy[crossing], lines)
    parts, owners, keep = [], [], np.ones(len(xyxy), bool)
    for n, k in enumerate(crossing.tolist()):
        x0, y0, x1, y1 = xyxy[k]
        mine = ln[owner == n]
        ycen = (mine[:, 1] + mine[:, 3]) / 2
        # its own lines leave the rule free: the text stops above it and starts again below
        at = [r for r in rules.tolist() if y0 + line_h < r < y1 - line_h
              and not ((mine[:, 1] < r - line_h / 4) & (mine[:, 3] > r + line_h / 4)).any()]
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


def _grid_cut(xyxy: np.ndarray, lo: np.ndarray, hi: np.ndarray, tol_x: float, tol_y: float, grid: _Grid,
              rules: np.ndarray, stops: np.ndarray) -> list[int]:
    """Box indices in reading order: the XY-cut on column spans `lo`..`hi` (see `reading_order`).

    A rule across the columns (`rules_across`) that none of the boxes `stops` (N,) of a block
    crosses cuts the block first, before its columns: what stands above it is read before
    what stands below, even in a column no box spans from top to bottom (the masthead's words
    apart, the feuilleton's columns under the body's). `lo` and `hi` are updated in place
    where a box fused across a gutter goes back to one column.
    """
    xycut = _xycutter(xyxy, tol_x, tol_y)

    def split(idx: np.ndarray) -> tuple:
        blo, bhi = lo[idx], hi[idx]
        bands = _rule_bands(xyxy[idx], rules, stops[idx], tol_y) if rules.size else None
        if bands is not None:
            return [idx[b] for b in bands], None
        if blo.min() == bhi.max():   # one column: the plain XY-cut of its boxes
            return None, xycut(idx.tolist())
        sub = take_rows(xyxy, idx)
        order, group = _cuts(blo.astype(float), bhi + 0.5, 0.0)
        if group[-1] == 0:
            order, group = _cuts(sub[:, 1], sub[:, 3], tol_y)
            group = _join_strips(sub, blo, bhi, order, group, grid.strip, grid.line_h)
        if group[-1] > 0:
            return _split_parts(idx, order, group), None
        # Every column boundary spanned and no clean gap across. A spanning box taller than
        # `merged` whose top a box of its columns runs past is text fused across a gutter,
        # not a headline: it goes back to the column of its centre and the block is cut again.
        spanning = np.flatnonzero(bhi > blo)
        top = sub[spanning, 1][:, None]
        straddled = ((blo[None, :] <= bhi[spanning, None]) & (bhi[None, :] >= blo[spanning, None])
                     & (sub[None, :, 1] < top - tol_y) & (sub[None, :, 3] > top + tol_y)).any(axis=1)
        merged_across = spanning[straddled & (sub[spanning, 3] - sub[spanning, 1] > grid.merged)]
        if merged_across.size:
            col = np.searchsorted(grid.bounds, (sub[merged_across, 0] + sub[merged_across, 2]) / 2, side="right")
            lo[idx[merged_across]] = hi[idx[merged_across]] = col
            return [idx], None
        # Otherwise bands that start at the top of each spanning box; it is read first in its
        # band, then the band's single-column boxes (which the next pass splits into columns).
        spanning = spanning[np.argsort(sub[spanning, 1], kind="stable")]
        rest = np.flatnonzero(bhi == blo)
        mid = (sub[rest, 1] + sub[rest, 3]) / 2
        band = np.searchsorted(sub[spanning, 1], mid, side="right")
        # A box on the left of a spanning row (at most `strip` tall: a dateline's piece), beside
        # it, is read before it.
        s_k = spanning[np.maximum(band - 1, 0)]
        band -= ((band > 0) & (mid <= sub[s_k, 3]) & (sub[rest, 2] <= sub[s_k, 0] + tol_x)
                 & (sub[s_k, 3] - sub[s_k, 1] <= grid.strip))
        by_band = rest[np.argsort(band, kind="stable")]
        ends = np.searchsorted(np.sort(band), np.arange(len(spanning) + 1), side="right")
        parts = [idx[by_band[:ends[0]]]]
        for k, s_k in enumerate(spanning):
            parts += [idx[s_k:s_k + 1], idx[by_band[ends[k]:ends[k + 1]]]]
        return [p for p in parts if len(p)], None

    return _depth_first(np.arange(len(xyxy)), split)


def _rule_bands(sub: np.ndarray, rules: np.ndarray, stops: np.ndarray, tol_y: float) -> list[np.ndarray] | None:
    """The boxes `sub` as bands between the `rules` that none of the boxes `stops` crosses by
    more than `tol_y` (index arrays, top first), or None without such a rule."""
    rules = rules[(rules > sub[:, 1].min()) & (rules < sub[:, 3].max())]
    crossed = ((sub[stops, 1, None] < rules - tol_y) & (sub[stops, 3, None] > rules + tol_y)).any(axis=0)
    rules = rules[~crossed]
    if rules.size == 0:
        return None
    band = np.searchsorted(rules, (sub[:, 1] + sub[:, 3]) / 2)
    parts = [np.flatnonzero(band == b) for b in range(rules.size + 1)]
    parts = [p for p in parts if p.size]
    return parts if len(parts) > 1 else None


def _join_strips(sub: np.ndarray, blo: np.ndarray, bhi: np.ndarray, order: np.ndarray, group: np.ndarray,
                 strip: float, line_h: float) -> np.ndarray:
    """Band ids of `_cuts` with the bands that continue the columns above joined to them.

    A strip at most `strip` tall holds the last lines of the columns above it (a gap across
    the page just above them): it joins the band above instead of being read after all of
    its columns, unless it spans a column boundary that band leaves free. So does a band of
    single-column boxes under a tall band of them, less than `line_h` below it: paragraphs
    of every column that happen to end on one line, not a new section (a rule across the
    columns is cut before, `_rule_bands`; a section under a headline over several columns
    spans a boundary). Other bands stay.
    """
    n_band = group[-1] + 1
    y0, y1 = np.full(n_band, np.inf), np.full(n_band, -np.inf)
    np.minimum.at(y0, group, sub[order, 1])
    np.maximum.at(y1, group, sub[order, 3])
    cols = np.arange(blo.min(), bhi.max())
    crossing = np.zeros((n_band, cols.size), bool)
    np.logical_or.at(crossing, group, (blo[order, None] <= cols) & (bhi[order, None] > cols))
    keep = np.ones(n_band, bool)
    above, top = crossing[0].copy(), y0[0]
    for g in range(1, n_band):
        continues = (not crossing[g].any() and not above.any() and y1[g - 1] - top > strip
                     and y0[g] - y1[g - 1] < line_h)
        keep[g] = not continues and (y1[g] - y0[g] > strip or bool((crossing[g] & ~above).any()))
        if keep[g]:
            above, top = crossing[g].copy(), y0[g]
        else:
            above = above | crossing[g]
    return np.cumsum(keep)[group] - 1


def column_segments(
    box_xyxy: np.ndarray,
    line_xyxy: np.ndarray,
    member_box: np.ndarray,
    member_line: np.ndarray,
    min_gap: float,
    min_lines: int = 2,
    tol: float = 0.1,
    slack: float = 0.0,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Cut boxes at vertical gutters of the text lines inside them.

    A gutter is an x-range of at least `min_gap` pixels inside a box's line extent that at
    most ``floor(tol * n)`` of its n lines cross, with at least `min_lines` whole lines on
    each side. The tolerance keeps a few lines that OCR merged across the gutter, or a
    headline over the columns, from hiding it; such lines are cut at the gutter and each
    piece joins its column. Line ends are trimmed by `slack` pixels first, because line
    boxes of neighbouring columns often overlap a little across a narrow gutter. All boxes
    are cut at once (one sweep over sorted line edges).

    Args:
        box_xyxy: (B, 4) boxes; line_xyxy: (L, 4) text lines.
        member_box, member_line: (K,) pairs: line member_line[k] lies inside box member_box[k].
        min_gap: gutter width in pixels.
        min_lines: whole lines needed on each side of a gutter.
        tol: share of a box's lines that may cross a gutter.
        slack: pixels trimmed from each line end when looking for gutters.

    Returns:
        n_cols (B,) number of column segments per box (1 when uncut or without lines),
        seg_parent (M,) box index of each segment of the cut boxes, seg_xyxy (M, 4) the
        segments (their line pieces' extent, clipped to the parent box).
    """
    none = (np.ones(len(box_xyxy), np.int64), np.zeros(0, np.intp), np.zeros((0, 4)))
    box_xyxy = np.asarray(box_xyxy, float)
    spans = _line_spans(box_xyxy, line_xyxy, member_box, member_line, min_lines, slack)
    if len(spans.box) == 0:
        return none
    gutter_box, gutter_x0, gutter_x1 = _gutter_candidates(spans, np.floor(tol * spans.n_lines), min_gap)
    if len(gutter_box) == 0:
        return none
    big = 4.0 * (np.abs(box_xyxy).max() + np.abs(line_xyxy).max() + 1.0)
    cuts = _standing_cuts(spans, gutter_box, gutter_x0, gutter_x1, min_lines, big)
    if cuts is None:
        return none
    return _segment_boxes(box_xyxy, line_xyxy, spans, cuts)


@dataclass(frozen=True)
class _LineSpans:
    """The x-extents of the lines inside boxes (`column_segments`), one entry per (box, line) pair
    of a box that holds lines enough to be cut."""

    box: np.ndarray       # (K,) box index
    line: np.ndarray      # (K,) line index
    x0: np.ndarray        # (K,) line start, clipped to the box
    x1: np.ndarray        # (K,) line end, clipped to the box
    t0: np.ndarray        # (K,) x0 trimmed by the slack
    t1: np.ndarray        # (K,) x1 trimmed by the slack
    n_lines: np.ndarray   # (B,) lines inside each box


def _line_spans(box_xyxy: np.ndarray, line_xyxy: np.ndarray, member_box: np.ndarray, member_line: np.ndarray,
                min_lines: int, slack: float) -> _LineSpans:
    """The lines of each box as `_LineSpans`: clipped to the box, ends trimmed by `slack`."""
    bx, lx = take_rows(box_xyxy, member_box), take_rows(line_xyxy, member_line)
    x0, x1 = np.maximum(lx[:, 0], bx[:, 0]), np.minimum(lx[:, 2], bx[:, 2])
    ok = x1 > x0
    mb, ml, x0, x1 = member_box[ok], member_line[ok], x0[ok], x1[ok]
    per_box = np.bincount(mb, minlength=len(box_xyxy))
    # A cut needs `min_lines` whole lines on each side: a box with fewer than twice that is
    # never cut, and its lines need no place in the sweep (most regions on a page).
    ok = per_box[mb] >= 2 * min_lines
    mb, ml, x0, x1 = mb[ok], ml[ok], x0[ok], x1[ok]
    # Trimmed ends; a line shorter than 2 * slack shrinks to its centre.
    mid = (x0 + x1) / 2
    return _LineSpans(mb, ml, x0, x1, np.minimum(x0 + slack, mid), np.maximum(x1 - slack, mid), per_box)


def _gutter_candidates(spans: _LineSpans, tol_n: np.ndarray, min_gap: float
                       ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Gutters before the whole-line test: x-ranges at least `min_gap` wide inside a box's line
    extent that at most `tol_n` (B,) of its lines cross.

    Returns:
        box (C,), x0 (C,), x1 (C,): sorted by box, then x.
    """
    mb, t0, t1 = spans.box, spans.t0, spans.t1
    n_box = len(spans.n_lines)
    xmin = np.full(n_box, np.inf)
    xmax = np.full(n_box, -np.inf)
    np.minimum.at(xmin, mb, t0)
    np.maximum.at(xmax, mb, t1)
    # Coverage profile of every box: events sorted by (box, x); each box's +1/-1 sum to
    # zero, so one global cumsum gives the per-box count on each interval.
    eb = np.concatenate([mb, mb])
    ex = np.concatenate([t0, t1])
    ed = np.concatenate([np.ones(len(mb), np.int64), np.full(len(mb), -1, np.int64)])
    o = np.lexsort((ed, ex, eb))
    eb, ex, cnt = eb[o], ex[o], np.cumsum(ed[o])
    low = (eb[:-1] == eb[1:]) & (cnt[:-1] <= tol_n[eb[:-1]])
    start = low & ~np.concatenate(([False], low[:-1]))
    end = low & ~np.concatenate((low[1:], [False]))
    s, e = np.flatnonzero(start), np.flatnonzero(end)
    gb, g0, g1 = eb[s], ex[s], ex[e + 1]
    cand = (g1 - g0 >= min_gap) & (g0 > xmin[gb]) & (g1 < xmax[gb])
    return gb[cand], g0[cand], g1[cand]


@dataclass(frozen=True)
class _Cuts:
    """Gutters that cut boxes (`column_segments`), sorted by box then x, and the segments they make."""

    box: np.ndarray         # (C,) box each gutter cuts
    x0: np.ndarray          # (C,) gutter start
    x1: np.ndarray          # (C,) gutter end
    first_seg: np.ndarray   # (K,) segment (within its box) of each line span's start
    last_seg: np.ndarray    # (K,) segment (within its box) of each line span's end
    n_cut: np.ndarray       # (B,) gutters per box
    seg_base: np.ndarray    # (B + 1,) box b owns segment ids seg_base[b] + 0..n_cut[b]


def _placed_cuts(spans: _LineSpans, box: np.ndarray, x0: np.ndarray, x1: np.ndarray, big: float) -> _Cuts:
    """`_Cuts` at the gutters `box`, `x0`, `x1`; `big` exceeds twice any coordinate (one sort key per box)."""
    mb = spans.box
    centre = box * big + (x0 + x1) / 2
    first_cut = np.searchsorted(centre, mb * big - big / 2)
    sa = np.searchsorted(centre, mb * big + spans.t0) - first_cut
    sz = np.searchsorted(centre, mb * big + spans.t1) - first_cut
    n_cut = np.bincount(box, minlength=len(spans.n_lines))
    return _Cuts(box, x0, x1, sa, sz, n_cut, np.concatenate(([0], np.cumsum(n_cut + 1))))


def _standing_cuts(spans: _LineSpans, box: np.ndarray, x0: np.ndarray, x1: np.ndarray, min_lines: int,
                   big: float) -> _Cuts | None:
    """The gutters with `min_lines` whole lines on each side, or None when none has."""
    while True:  # dropping an unsupported cut merges segments: recount until all stand
        cuts = _placed_cuts(spans, box, x0, x1, big)
        seg_base, one = cuts.seg_base, cuts.first_seg == cuts.last_seg
        whole = np.bincount(seg_base[spans.box[one]] + cuts.first_seg[one], minlength=seg_base[-1])
        cut_k = np.arange(len(box)) - np.searchsorted(box, box)   # index of each cut within its box
        left = seg_base[box] + cut_k
        valid = (whole[left] >= min_lines) & (whole[left + 1] >= min_lines)
        if valid.all():
            return cuts
        box, x0, x1 = box[valid], x0[valid], x1[valid]
        if len(box) == 0:
            return None


def _segment_boxes(box_xyxy: np.ndarray, line_xyxy: np.ndarray, spans: _LineSpans, cuts: _Cuts
                   ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(n_cols, seg_parent, seg_xyxy) of `column_segments`: the extent of each segment's line pieces."""
    n_box = len(box_xyxy)
    mb, sa, sz, n_cut, seg_base = spans.box, cuts.first_seg, cuts.last_seg, cuts.n_cut, cuts.seg_base
    # Line pieces: a line spanning segments sa..sz is cut at the gutter centres in between;
    # every piece is clipped to its segment, so neighbouring columns do not overlap.
    mid_cut = (cuts.x0 + cuts.x1) / 2
    reps = sz - sa + 1
    k = np.repeat(np.arange(len(mb)), reps)
    seg_in_box = sa[k] + (np.arange(len(k)) - np.repeat(np.cumsum(reps) - reps, reps))
    cut_of = np.searchsorted(cuts.box, mb[k]) + seg_in_box          # global cut index right of the piece
    n_cut_k = n_cut[mb[k]]
    x0, x1 = spans.x0[k], spans.x1[k]
    px0 = np.where(seg_in_box > 0, np.maximum(x0, mid_cut[np.maximum(cut_of - 1, 0)]), x0)
    px1 = np.where(seg_in_box < n_cut_k, np.minimum(x1, mid_cut[np.minimum(cut_of, len(cuts.box) - 1)]), x1)
    keep = px1 > px0
    seg = (seg_base[mb[k]] + seg_in_box)[keep]
    ly = take_rows(line_xyxy, spans.line[k][keep])
    pieces = np.stack([px0[keep], ly[:, 1], px1[keep], ly[:, 3]], axis=1)
    ext = group_extent(pieces, seg, seg_base[-1])
    seg_box = np.repeat(np.arange(n_box), n_cut + 1)
    cut_boxes = n_cut > 0
    sel = cut_boxes[seg_box] & np.isfinite(ext[:, 0])
    parent = seg_box[sel]
    pb = take_rows(box_xyxy, parent)
    out = np.concatenate([np.maximum(ext[sel, :2], pb[:, :2]), np.minimum(ext[sel, 2:], pb[:, 2:])], axis=1)
    n_cols = np.where(cut_boxes, np.bincount(parent, minlength=n_box), 1)
    return n_cols, parent, out
