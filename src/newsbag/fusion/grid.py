"""A page's column grid: the gutters of its text lines (`column_bounds`), the columns each box
spans (`column_spans`), and the lengths the reading order measures on it (`Grid`)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from shapely import STRtree

from ..contract import take_rows
from .geometry import cross_pairs

__all__ = ["column_bounds", "column_spans", "spans_columns", "Grid", "line_grid", "box_grid", "lines_inside",
           "MIN_LINES", "SINGLE_LINE"]


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


MIN_LINES = 8   # fewer text lines than this are no evidence of columns
SINGLE_LINE = 1.5   # a line box taller than this many median line heights holds more than one line


def line_evidence(lines: np.ndarray) -> tuple[np.ndarray, float]:
    """Single text lines (not blocks the detector merged: at most `SINGLE_LINE` x the median
    height) and the median line height, the unit of the lengths `reading_order` uses."""
    h = lines[:, 3] - lines[:, 1]
    med = float(np.median(h))
    return lines[h <= SINGLE_LINE * med], med


@dataclass(frozen=True)
class Grid:
    """A page's column grid and the lengths the reading order measures on it (`reading_order_parts`)."""

    ev: np.ndarray | None   # (L, 4) the single text lines it comes from (None: from the boxes)
    line_h: float           # median line height (0: no lines)
    trim: float             # taken off each end of a line for the gutters
    poke: float             # how far a box must reach past a gutter to span it
    strip: float            # a band at most this tall holds the last lines of the columns above
    merged: float           # a spanning box taller than this is text fused across a gutter
    bounds: np.ndarray      # (K,) column gutters


def line_grid(lines: np.ndarray, width: float) -> Grid:
    """The grid of a page with text lines: lengths in line heights."""
    ev, line_h = line_evidence(lines)
    trim = 0.5 * line_h
    return Grid(ev, line_h, trim, 2 * line_h, 3 * line_h, 6 * line_h, column_bounds(ev, width, trim))


def box_grid(xyxy: np.ndarray, width: float, height: float, tol: float) -> Grid:
    """The grid of a page without lines: its boxes are the evidence, with lengths for a broadsheet's body type."""
    trim = 2 * tol * width
    return Grid(None, 0.0, trim, 4 * tol * width, 0.0, 12 * tol * height, column_bounds(xyxy, width, trim))


def spans_columns(xyxy: np.ndarray, width: float, lines: np.ndarray | None) -> np.ndarray:
    """(N,) bool: whether each box reaches into more than one column of the page's grid (the
    gutters of its text lines, `column_bounds`); none does without lines (fewer than 8).

    >>> spans_columns(np.zeros((2, 4)), 100, None).tolist()
    [False, False]
    """
    xyxy = np.asarray(xyxy, float).reshape(-1, 4)
    if lines is None or len(lines) < MIN_LINES:
        return np.zeros(len(xyxy), bool)
    grid = line_grid(np.asarray(lines, float).reshape(-1, 4), width)
    lo, hi = column_spans(xyxy, grid.bounds, grid.poke)
    return hi > lo


def lines_inside(boxes: np.ndarray, lines: np.ndarray, tree: STRtree | None = None) -> tuple[np.ndarray, np.ndarray]:
    """The lines whose centre lies inside each of `boxes` (the box's own lines, not a
    neighbour's that overlaps it): (K,) box index, (K, 4) line, sorted by box. `tree`: the
    lines' `geometry.box_tree`, when the page has it."""
    pairs = cross_pairs(boxes, lines, tree)
    ln = take_rows(lines, pairs.j)
    cx, cy = (ln[:, 0] + ln[:, 2]) / 2, (ln[:, 1] + ln[:, 3]) / 2
    bx = take_rows(boxes, pairs.i)
    inside = (cx > bx[:, 0]) & (cx < bx[:, 2]) & (cy > bx[:, 1]) & (cy < bx[:, 3])
    return pairs.i[inside], ln[inside]

