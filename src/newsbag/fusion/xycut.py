"""The XY-cut of a page's boxes on its column grid (`grid_cut`), columns first, and the plain
XY-cut inside one column (`xycutter`)."""

from __future__ import annotations

from typing import Callable

import numpy as np

from ..contract import take_rows
from .grid import Grid

__all__ = ["grid_cut", "xycutter"]


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
    so that it cannot be returned whole again: ``grid_cut` moving a box back to one column),
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


def xycutter(xyxy: np.ndarray, tol_x: float, tol_y: float) -> Callable[[list[int]], list[int]]:
    """The XY-cut reading order of any set of `xyxy`'s boxes, given and returned as indices into
    `xyxy`: depth first, left part / upper band first.

    Columns first: a gutter that runs through the whole block splits it left to right; only
    when there is none is it cut into horizontal bands (masthead, headline, body). On Python
    floats, with `_cuts`' rules (stable sorts with NaN last, a running maximum NaN sticks to):
    a column's block is tens of boxes, where numpy's per-call overhead was most of the time,
    and a 20,000-line page of columns cuts ~5x faster than with numpy. A page's coordinates
    become Python floats once, not once per column block (a quarter of `grid_cut`'s time on
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


def grid_cut(xyxy: np.ndarray, lo: np.ndarray, hi: np.ndarray, tol_x: float, tol_y: float, grid: Grid,
             rules: np.ndarray, stops: np.ndarray) -> list[int]:
    """Box indices in reading order: the XY-cut on column spans `lo`..`hi` (see `reading_order`).

    A rule across the columns (`rules_across`) that none of the boxes `stops` (N,) of a block
    crosses cuts the block first, before its columns: what stands above it is read before
    what stands below, even in a column no box spans from top to bottom (the masthead's words
    apart, the feuilleton's columns under the body's). `lo` and `hi` are updated in place
    where a box fused across a gutter goes back to one column.
    """
    xycut = xycutter(xyxy, tol_x, tol_y)
    rule_bands = _RuleBands(xyxy, rules, stops, tol_y) if rules.size else None

    def split(idx: np.ndarray) -> tuple:
        blo, bhi = lo[idx], hi[idx]
        bands = rule_bands(idx) if rule_bands is not None else None
        if bands is not None:
            return bands, None
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


class _RuleBands:
    """The bands of a block of boxes between the rules across the columns (`rules_across`) that
    none of its boxes `stops` crosses by more than `tol_y` (`grid_cut` cuts there first).

    Every block of the cut asks, so what depends on a box alone is found once: the rules a
    box crosses are a range of the sorted rules (from the first above ``y0 + tol_y`` to the
    last below ``y1 - tol_y``), and a block's crossed rules are the union of its boxes'
    ranges, counted in one pass over the block: O(n log R + R) per block instead of n x R.
    """

    def __init__(self, xyxy: np.ndarray, rules: np.ndarray, stops: np.ndarray, tol_y: float):
        self.rules, self.y0, self.y1 = rules, xyxy[:, 1], xyxy[:, 3]
        self.mid = (self.y0 + self.y1) / 2
        # box k crosses rule r where y0 < r - tol_y and y1 > r + tol_y: rules first[k]..end[k]-1
        self.first = np.searchsorted(rules - tol_y, self.y0, side="right")
        end = np.searchsorted(rules + tol_y, self.y1, side="left")
        self.end = np.where(stops & (self.y1 == self.y1), end, 0)   # a NaN end crosses nothing

    def __call__(self, idx: np.ndarray) -> list[np.ndarray] | None:
        """The boxes `idx` as bands (index arrays, top first), or None without a free rule inside them."""
        top, bottom = self.y0[idx].min(), self.y1[idx].max()
        a = np.searchsorted(self.rules, top, side="right")       # rules below the block's top...
        b = np.searchsorted(self.rules, bottom, side="left")     # ...and above its bottom
        if a >= b or bottom != bottom:
            return None
        first, end = self.first[idx], self.end[idx]
        hit = first < end
        n = len(self.rules) + 1
        crossed = np.cumsum(np.bincount(first[hit], minlength=n) - np.bincount(end[hit], minlength=n))
        rules = self.rules[a:b][crossed[a:b] == 0]
        if rules.size == 0:
            return None
        band = np.searchsorted(rules, self.mid[idx])
        if (band == band[0]).all():
            return None
        order = np.argsort(band, kind="stable")
        ends = np.flatnonzero(np.diff(band[order])) + 1
        return np.split(idx[order], ends)


def _join_strips(sub: np.ndarray, blo: np.ndarray, bhi: np.ndarray, order: np.ndarray, group: np.ndarray,
                 strip: float, line_h: float) -> np.ndarray:
    """Band ids of `_cuts` with the bands that continue the columns above joined to them.

    A strip at most `strip` tall holds the last lines of the columns above it (a gap across
    the page just above them): it joins the band above instead of being read after all of
    its columns, unless it spans a column boundary that band leaves free. So does a band of
    single-column boxes under a tall band of them, less than `line_h` below it: paragraphs
    of every column that happen to end on one line, not a new section (a rule across the
    columns is cut before, `_RuleBands`; a section under a headline over several columns
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

