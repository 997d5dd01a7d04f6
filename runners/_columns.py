"""Column gutters of a text page from its line boxes or its pixels, and cutting lines at them (pure numpy/scipy).

A gutter is a vertical strip where few lines are printed over several line heights while
both sides are well covered. Found on a coarse raster of line coverage, so lines that DB
ran across a narrow gutter (or a row of them) do not hide it: they are a minority of the
rows in the vertical window. Layouts may change down the page (masthead, feuilleton), so
gutters are local, not page-wide x positions.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from scipy.ndimage import maximum_filter1d

__all__ = ["Gutters", "find_gutters", "blank_gutters", "gutter_cells_between", "split_at_gutters"]


class Gutters(NamedTuple):
    """Boolean gutter raster and its cell size in page pixels."""

    mask: np.ndarray  # (rows, cols) bool, True = gutter cell
    cell_w: float
    cell_h: float


def _coverage(xyxy: np.ndarray, cell_w: float, cell_h: float, shape: tuple[int, int]) -> np.ndarray:
    """(rows, cols) bool: cells touched by any box (one 2-D difference array, no loop)."""
    rows, cols = shape
    c0 = np.clip(np.rint(xyxy[:, 0] / cell_w).astype(np.int64), 0, cols)
    c1 = np.clip(np.rint(xyxy[:, 2] / cell_w).astype(np.int64), 0, cols)
    r0 = np.clip(np.floor(xyxy[:, 1] / cell_h).astype(np.int64), 0, rows)
    r1 = np.clip(np.ceil(xyxy[:, 3] / cell_h).astype(np.int64), 0, rows)
    diff = np.zeros((rows + 1, cols + 1), np.int64)
    np.add.at(diff, (r0, c0), 1)
    np.add.at(diff, (r0, c1), -1)
    np.add.at(diff, (r1, c0), -1)
    np.add.at(diff, (r1, c1), 1)
    return diff.cumsum(0).cumsum(1)[:rows, :cols] > 0


def find_gutters(xyxy: np.ndarray, line_h: float, window: float = 4.0, reach: float = 3.0,
                 ratio: float = 0.5, min_cover: float = 0.8, shrink: float = 0.25) -> Gutters:
    """Gutter cells of a page from its text-line boxes.

    Args:
        xyxy: (N, 4) line boxes, page pixels.
        line_h: typical line height in pixels; cells are line_h/10 wide and line_h/2 tall and line_h/2 tall.
        window: a cell's cover is the share of covered cells within ``window`` line
            heights above it, and again below it; either may show the gutter.
        reach: sides are the best cover within ``reach`` line heights left and right.
        ratio, min_cover: a gutter cell's cover is below ``ratio`` x the weaker side's,
            and that side's cover is at least ``min_cover`` (text columns on both sides).
        shrink: each box loses ``shrink`` x its height at both ends first. DB's unclip
            grows a line by ~0.3 x its height on every side, which closes gutters of
            1930s pages (10-20 px at 60 px lines) completely.

    Returns:
        ``Gutters``; an empty (0, 0) mask for no lines.
    """
    if xyxy.shape[0] == 0 or line_h <= 0:
        return Gutters(np.zeros((0, 0), bool), 1.0, 1.0)
    cell_w, cell_h = line_h / 10, line_h / 2
    shape = (int(np.ceil(xyxy[:, 3].max() / cell_h)) + 1, int(np.ceil(xyxy[:, 2].max() / cell_w)) + 1)
    d = np.minimum(shrink * (xyxy[:, 3] - xyxy[:, 1]), (xyxy[:, 2] - xyxy[:, 0]) / 2)
    core = xyxy + np.stack([d, np.zeros_like(d), -d, np.zeros_like(d)], 1)
    covered = _coverage(core, cell_w, cell_h, shape).astype(np.float64)
    k = max(1, int(round(window * line_h / cell_h)))
    csum = np.vstack([np.zeros((1, shape[1])), covered.cumsum(0)])
    r = np.arange(shape[0])
    top, mid, bottom = np.clip(r - k, 0, None), r + 1, np.clip(r + k + 1, None, shape[0])
    h = max(1, int(round(reach * line_h / cell_w / 2)))
    pad = np.zeros((shape[0], h + 1))
    mask = np.zeros(shape, bool)
    # The window above and the one below are tested apart: a full-width element right
    # above (or below) the columns fills the gutter of a centred window.
    for a, b in ((top, mid), (r, bottom)):
        cover = (csum[b] - csum[a]) / (k + 1)  # off-page cells count as empty, not as text
        best = maximum_filter1d(cover, size=2 * h + 1, axis=1, mode="constant", cval=0.0)
        left = np.hstack([pad, best])[:, : shape[1]]      # best over [c - 2h - 1, c - 1]
        right = np.hstack([best, pad])[:, h + 1:]         # best over [c + 1, c + 2h + 1]
        side = np.minimum(left, right)
        mask |= (cover < ratio * side) & (side >= min_cover)
    return Gutters(mask, cell_w, cell_h)


def _window_share(m: np.ndarray, top: np.ndarray, bottom: np.ndarray) -> np.ndarray:
    """(rows, cols) share of true cells of `m` in rows top[r]..bottom[r]-1 of each column."""
    csum = np.vstack([np.zeros((1, m.shape[1])), m.cumsum(0)])
    return (csum[bottom] - csum[top]) / np.maximum(bottom - top, 1)[:, None]


def _side_best(cover: np.ndarray, h: int) -> np.ndarray:
    """The weaker of the best `cover` within `h` cells on the left and on the right of each cell."""
    best = maximum_filter1d(cover, size=2 * h + 1, axis=1, mode="constant", cval=0.0)
    pad = np.zeros((cover.shape[0], h + 1))
    return np.minimum(np.hstack([pad, best])[:, : cover.shape[1]], np.hstack([best, pad])[:, h + 1:])


def _ink_cells(grey: np.ndarray, cell_w: float, cell_h: float, shape: tuple[int, int], ink: float) -> np.ndarray:
    """(rows, cols) bool: cells with more than `ink` of their pixels dark (Otsu's threshold)."""
    hist = np.bincount(grey.ravel(), minlength=256).astype(np.float64)
    p = hist / max(hist.sum(), 1.0)
    w, mu = np.cumsum(p), np.cumsum(p * np.arange(256))
    with np.errstate(divide="ignore", invalid="ignore"):
        between = np.nan_to_num((mu[-1] * w - mu) ** 2 / (w * (1 - w)))
    dark = grey <= int(np.argmax(between))
    ys = np.minimum(np.rint(np.arange(shape[0]) * cell_h).astype(np.int64), grey.shape[0] - 1)
    xs = np.minimum(np.rint(np.arange(shape[1]) * cell_w).astype(np.int64), grey.shape[1] - 1)
    count = np.add.reduceat(np.add.reduceat(dark, ys, axis=0, dtype=np.int64), xs, axis=1)
    size = np.outer(np.diff(np.r_[ys, grey.shape[0]]), np.diff(np.r_[xs, grey.shape[1]]))
    return count > ink * np.maximum(size, 1)


def _row_runs_kept(mask: np.ndarray, keep) -> np.ndarray:
    """`mask` with only the horizontal runs for which keep(length) holds."""
    row, first, end = _gutter_runs(mask)
    ok = keep(end - first)
    out = np.zeros_like(mask)
    for r, a, b in zip(row[ok].tolist(), first[ok].tolist(), end[ok].tolist()):
        out[r, a:b] = True
    return out


def _rule_flanks(share: np.ndarray, w: int, rule_ink: float, flank_ink: float) -> np.ndarray:
    """Cells within `w` of a vertical rule: a run of at most `w` cells inked in `rule_ink` of the
    window's rows, with a column inked in at most `flank_ink` of them within `w` on each side."""
    ruled = _row_runs_kept(share >= rule_ink, lambda n: n <= w)
    light = (share <= flank_ink).astype(np.uint8)
    pad = np.zeros((share.shape[0], w), np.uint8)
    ext = np.hstack([pad, light, pad])
    left = np.zeros(share.shape, bool)
    right = np.zeros(share.shape, bool)
    for d in range(1, w + 1):   # a light column d cells to the left / right
        left |= ext[:, w - d: w - d + share.shape[1]].astype(bool)
        right |= ext[:, w + d: w + d + share.shape[1]].astype(bool)
    rule = ruled & left & right
    return maximum_filter1d(rule.astype(np.uint8), 2 * w + 1, axis=1).astype(bool)


def _bridged(mask: np.ndarray, gap: int) -> np.ndarray:
    """`mask` with the gaps of at most `gap` cells between two runs of a row filled."""
    row, first, end = _gutter_runs(~mask)
    fill = (end - first <= gap) & (first > 0) & (end < mask.shape[1])
    out = mask.copy()
    for r, a, b in zip(row[fill].tolist(), first[fill].tolist(), end[fill].tolist()):
        out[r, a:b] = True
    return out


def blank_gutters(grey: np.ndarray, xyxy: np.ndarray, line_h: float, window: float = 4.0, reach: float = 3.0,
                  ink: float = 0.02, max_ink: float = 0.05, min_cover: float = 0.5, min_w: float = 0.4,
                  bridge: float = 0.25, min_len: float = 6.0, shrink: float = 0.25, rule_ink: float = 0.9,
                  flank_ink: float = 0.3, rule_w: float = 0.3) -> Gutters:
    """Gutter cells of a page from its pixels: vertical bands left blank between columns of text.

    DB runs lines across a narrow gutter (two columns of the 1780s-1810s NZZ, 20-30 px at
    40 px lines), and then the lines themselves show no gutter (`find_gutters`); the page
    does. A cell is a gutter cell when it holds no ink, the cells of its column within
    ``window`` line heights above it (or below it) hold ink in at most ``max_ink`` of
    them, and single text lines cover at least ``min_cover`` of the cells on each side
    within ``reach`` line heights. A vertical rule in the gutter (1813: letters touch it, so
    the bands beside it are not quite blank) counts as blank with its sides: a run at most
    ``rule_w`` line heights wide inked in ``rule_ink`` of the window's rows, with a column
    inked in at most ``flank_ink`` of them within ``rule_w`` on each side (`_rule_flanks`).
    Blank runs closer than ``bridge`` line heights join, runs narrower than ``min_w`` are
    word spaces, and a gutter runs down at least ``min_len`` line heights (the masthead's
    letter spacing does not).

    Args:
        grey: (H, W) uint8 page; xyxy: (N, 4) its text lines, page pixels; line_h: their
            median height. Cells as `find_gutters`' (line_h/10 x line_h/2), so the two
            rasters combine.
        ink: share of dark pixels that makes a cell inked.

    Returns:
        ``Gutters``; an empty (0, 0) mask for no lines.
    """
    if xyxy.shape[0] == 0 or line_h <= 0 or grey.size == 0:
        return Gutters(np.zeros((0, 0), bool), 1.0, 1.0)
    cell_w, cell_h = line_h / 10, line_h / 2
    shape = (int(np.ceil(grey.shape[0] / cell_h)), int(np.ceil(grey.shape[1] / cell_w)))
    inked = _ink_cells(grey, cell_w, cell_h, shape, ink)
    single = xyxy[xyxy[:, 3] - xyxy[:, 1] <= 1.5 * line_h]   # headlines and merged blocks are no column
    d = np.minimum(shrink * (single[:, 3] - single[:, 1]), (single[:, 2] - single[:, 0]) / 2)
    covered = _coverage(single + np.stack([d, 0 * d, -d, 0 * d], 1), cell_w, cell_h, shape).astype(np.float64)
    k = max(1, int(round(window * line_h / cell_h)))
    h = max(1, int(round(reach * line_h / cell_w / 2)))
    r = np.arange(shape[0])
    mask = np.zeros(shape, bool)
    near_rule = np.zeros(shape, bool)
    for top, bottom in ((np.clip(r - k, 0, None), r + 1), (r, np.clip(r + k + 1, None, shape[0]))):
        share = _window_share(inked.astype(np.float64), top, bottom)
        near = _rule_flanks(share, max(1, int(round(rule_w * line_h / cell_w))), rule_ink, flank_ink)
        near_rule |= near
        blank = (share <= max_ink) | (near & (share <= flank_ink)) | (near & (share >= rule_ink))
        mask |= blank & (_side_best(_window_share(covered, top, bottom), h) >= min_cover)
    mask &= ~inked | near_rule
    gap, width = int(round(bridge * line_h / cell_w)), int(round(min_w * line_h / cell_w))
    mask = _bridged(mask, gap)
    mask = _row_runs_kept(mask, lambda n: n >= width)
    # tall enough: vertical runs of the mask, one cell of skew either way allowed
    skewed = maximum_filter1d(mask.astype(np.uint8), 3, axis=1).astype(bool)
    tall = _row_runs_kept(skewed.T, lambda n: n * cell_h >= min_len * line_h).T
    return Gutters(mask & tall, cell_w, cell_h)


def _cells(gutters: Gutters, x0: np.ndarray, x1: np.ndarray, yc: np.ndarray):
    """Raster row of ``yc`` and the cell range [a, b) lying fully inside [x0, x1]."""
    rows, cols = gutters.mask.shape
    r = np.clip((yc / gutters.cell_h).astype(np.int64), 0, max(rows - 1, 0))
    a = np.clip(np.ceil(x0 / gutters.cell_w).astype(np.int64), 0, cols)
    b = np.clip(np.floor(x1 / gutters.cell_w).astype(np.int64), 0, cols)
    return r, a, np.maximum(a, b)


def gutter_cells_between(gutters: Gutters, x0: np.ndarray, x1: np.ndarray, yc: np.ndarray) -> np.ndarray:
    """(K,) number of gutter cells in row ``yc`` strictly inside [x0, x1] (row sums, O(K))."""
    if gutters.mask.size == 0:
        return np.zeros(np.shape(x0), np.int64)
    csum = np.hstack([np.zeros((gutters.mask.shape[0], 1), np.int64), gutters.mask.cumsum(1)])
    r, a, b = _cells(gutters, x0, x1, yc)
    return csum[r, b] - csum[r, a]


def _gutter_runs(mask: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(row, first cell, end cell) of every horizontal run of gutter cells."""
    edge = np.diff(np.pad(mask, ((0, 0), (1, 1))).astype(np.int8), axis=1)
    row, first = np.nonzero(edge == 1)
    _, end = np.nonzero(edge == -1)  # row-major order pairs each start with its end
    return row, first, end


def split_at_gutters(xyxy: np.ndarray, gutters: Gutters, min_piece: float) -> tuple[np.ndarray, np.ndarray]:
    """Cut every line at the gutter runs it crosses.

    A run with at least ``min_piece`` pixels of the line on each side cuts the line in
    two; a run with less on one side trims that stub off (DB ran a line a little over the
    gutter, or into the vertical rule). Pieces keep the line's y range.

    Returns:
        (M, 4) pieces, M >= N, and (M,) index of the line each piece came from, sorted.
    """
    n = xyxy.shape[0]
    xyxy = xyxy.copy()
    if n == 0 or gutters.mask.size == 0:
        return xyxy, np.arange(n)
    yc = (xyxy[:, 1] + xyxy[:, 3]) / 2
    hit = np.flatnonzero(gutter_cells_between(gutters, xyxy[:, 0], xyxy[:, 2], yc) > 0)
    if hit.size == 0:
        return xyxy, np.arange(n)
    run_r, run_a, run_b = _gutter_runs(gutters.mask)  # sorted by row, then by first cell
    r, _, _ = _cells(gutters, xyxy[hit, 0], xyxy[hit, 2], yc[hit])
    # Pairs (hit line, gutter run of its raster row), in line then run order: a row holds a
    # few runs, so this is O(lines), where an all-pairs (lines x runs) matrix took 8 s at 10k lines.
    first = np.searchsorted(run_r, r, side="left")
    count = np.searchsorted(run_r, r, side="right") - first
    pl = np.repeat(np.arange(hit.size), count)
    pr = np.repeat(first, count) + (np.arange(pl.size) - np.repeat(np.cumsum(count) - count, count))
    line = hit[pl]
    cut_l = run_a[pr] * gutters.cell_w   # piece to the left ends here
    cut_r = run_b[pr] * gutters.cell_w   # piece to the right starts here

    def sides():
        inside = (cut_l > xyxy[line, 0]) & (cut_r < xyxy[line, 2])
        return inside, cut_l - xyxy[line, 0] >= min_piece, xyxy[line, 2] - cut_r >= min_piece

    inside, left_ok, right_ok = sides()
    k = inside & ~left_ok & right_ok
    trim_r = inside & left_ok & ~right_ok
    np.maximum.at(xyxy[:, 0], line[k], cut_r[k])
    np.minimum.at(xyxy[:, 2], line[trim_r], cut_l[trim_r])
    inside, left_ok, right_ok = sides()
    k = np.flatnonzero(inside & left_ok & right_ok)  # sorted by line, then by run start
    li, cut_l, cut_r = pl[k], cut_l[k], cut_r[k]
    if li.size == 0:
        return xyxy, np.arange(n)
    lines = hit[li]
    cut = np.unique(lines)
    # Each cut line yields (its runs + 1) pieces: starts = [x0, run ends...], ends = [run starts..., x1].
    start_key = np.concatenate([cut, lines])
    start_x = np.concatenate([xyxy[cut, 0], cut_r])
    end_key = np.concatenate([lines, cut])
    end_x = np.concatenate([cut_l, xyxy[cut, 2]])
    o_s = np.lexsort((start_x, start_key))
    o_e = np.lexsort((end_x, end_key))
    parent = start_key[o_s]
    pieces = np.stack([start_x[o_s], xyxy[parent, 1], end_x[o_e], xyxy[parent, 3]], 1)
    whole = np.setdiff1d(np.arange(n), cut)
    out = np.concatenate([xyxy[whole], pieces])
    src = np.concatenate([whole, parent])
    order = np.argsort(src, kind="stable")
    return out[order], src[order]
