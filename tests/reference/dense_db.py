"""The dense N x N line grouping that runners/_db.py used before the sweep (kept to test the sweep against).

Copied from runners/_db.py and _columns.py at 89a66c1 (all-pairs matrices); tests only.
"""

from __future__ import annotations

import numpy as np
from scipy.sparse import coo_matrix
from scipy.sparse.csgraph import connected_components

import _columns
from _db import union_xyxy


def _pairs(mask: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Index pairs (i < j) of a dense symmetric boolean matrix."""
    return np.nonzero(np.triu(mask, k=1))


def _components(n: int, i: np.ndarray, j: np.ndarray) -> np.ndarray:
    """(n,) connected-component id per node of the graph with edges (i, j)."""
    graph = coo_matrix((np.ones(i.size, dtype=np.int8), (i, j)), shape=(n, n))
    return connected_components(graph, directed=False)[1].astype(np.int64)


def group_lines_dense(xyxy: np.ndarray, gap_factor: float = 0.6, word_gap: float = 0.5, row_shift: float = 0.3,
                min_overlap: float = 0.5, indent: float = 0.6, centre_inset: float = 1.0,
                min_h: float = 0.6, min_w: float = 1.0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Group text lines into paragraph blocks that never cross a column gutter.

    Lengths below are in units of the page's median line height ``lh``.

    0. Gutters: ``_columns.find_gutters`` on the line boxes; lines DB ran across a gutter
       are cut there (``split_at_gutters``). Specks (pieces lower than ``min_h`` or
       narrower than ``min_w``: dirt, rules, show-through) are dropped: as one-piece
       blocks they were ~30% of all blocks on the nzz pages and matched nothing.
    1. Rows: DB often splits one printed line at wide word spaces. Pieces whose centres
       lie less than ``row_shift`` x the taller height apart vertically, less than
       ``word_gap`` apart horizontally and with no gutter cell between their centres are
       joined into one row. Centres, not overlap: a short piece overlaps the lines above
       and below it and would chain them into one "row".
    2. Blocks: each row is linked to its nearest row below and above in its column
       (horizontal overlap >= ``min_overlap`` x the narrower row, and left edges within
       1 lh or the overlap also covers ``min_overlap`` of the wider row). Only adjacent
       rows: unclipped DB boxes overlap, so a link skipping a line would look as close as
       a real one and jump over every paragraph cue. A link is kept when
       - the vertical gap (negative when they overlap) is below ``gap_factor`` x the
         smaller row height, and their heights differ by less than 2x (headline);
       - there is no paragraph cue: the upper row ends more than 1 lh left of the lower
         (short last line); the lower row starts ``indent``..4 lh right of the upper and
         ends where it does (indented first line); the lower row is inset by more than
         ``centre_inset`` on both sides (centred heading or dateline).
    Blocks are the connected components of the kept links. Pairs are scored densely in
    numpy (N^2 booleans: 1,500 lines -> 2.3 MB), no Python loop over boxes.

    Returns:
        pieces (M, 4), parent (M,) index of the input line of each piece (sorted; a line
        may give several pieces or none), block (M,) ids in 0..K-1.
    """
    n = xyxy.shape[0]
    if n == 0:
        return np.zeros((0, 4)), np.zeros(0, np.int64), np.zeros(0, np.int64)
    line_h = float(np.median(xyxy[:, 3] - xyxy[:, 1]))
    gutters = _columns.find_gutters(xyxy, line_h)
    pieces, parent = split_at_gutters_dense(xyxy, gutters, min_piece=2 * line_h)
    ph, pw = pieces[:, 3] - pieces[:, 1], pieces[:, 2] - pieces[:, 0]
    keep = (ph >= min_h * line_h) & (pw >= min_w * line_h)
    pieces, parent = pieces[keep], parent[keep]
    m = pieces.shape[0]
    if m == 0:
        return pieces, parent, np.zeros(0, np.int64)
    x0, y0, x1, y1 = (pieces[:, k] for k in range(4))
    h = y1 - y0
    yc = (y0 + y1) / 2
    shift = np.abs(yc[:, None] - yc[None, :]) / np.maximum(h[:, None], h[None, :])
    h_gap = np.maximum(x0[:, None], x0[None, :]) - np.minimum(x1[:, None], x1[None, :])
    i, j = np.nonzero((shift < row_shift) & (h_gap < word_gap * line_h))
    xc = (x0 + x1) / 2
    blocked = _columns.gutter_cells_between(gutters, np.minimum(xc[i], xc[j]), np.maximum(xc[i], xc[j]),
                                            (yc[i] + yc[j]) / 2) > 0
    row = _components(m, i[~blocked], j[~blocked])
    rows = union_xyxy(pieces, row)

    x0, y0, x1, y1 = (rows[:, k] for k in range(4))
    w, h = x1 - x0, y1 - y0
    overlap = np.minimum(x1[:, None], x1[None, :]) - np.maximum(x0[:, None], x0[None, :])
    narrow = np.minimum(w[:, None], w[None, :])
    wide = np.maximum(w[:, None], w[None, :])
    aligned = np.abs(x0[:, None] - x0[None, :]) <= line_h
    column = (overlap >= min_overlap * narrow) & (aligned | (overlap >= min_overlap * wide))
    # Only vertically adjacent rows are linked (each row's nearest row below and above in
    # its column): with unclipped, overlapping DB boxes a link skipping one line is as
    # "close" as a real one and would jump over every paragraph cue.
    yc = (y0 + y1) / 2
    below = column & (yc[None, :] > yc[:, None])
    top = np.where(below, y0[None, :], np.inf)
    nearest_below = np.argmin(top, axis=1)
    bottom = np.where(below, -y1[:, None], np.inf)
    nearest_above = np.argmin(bottom, axis=0)
    has_below, has_above = np.isfinite(top.min(1)), np.isfinite(bottom.min(0))
    up = np.concatenate([np.flatnonzero(has_below), nearest_above[has_above]])
    lo = np.concatenate([nearest_below[has_below], np.flatnonzero(has_above)])
    gap = y0[lo] - y1[up]
    h_lo, h_hi = np.minimum(h[up], h[lo]), np.maximum(h[up], h[lo])
    close = (gap < gap_factor * h_lo) & (h_hi < 2 * h_lo)
    short_last = x1[up] < x1[lo] - line_h
    step = x0[lo] - x0[up]
    first_line = (step >= indent * line_h) & (step <= 4 * line_h) & (np.abs(x1[lo] - x1[up]) <= 0.5 * line_h)
    centred = (step > centre_inset * line_h) & (x1[up] - x1[lo] > centre_inset * line_h)
    keep = close & ~short_last & ~first_line & ~centred
    i, j = up[keep], lo[keep]
    block = _components(rows.shape[0], i, j)
    return pieces, parent, block[row]


def split_at_gutters_dense(xyxy: np.ndarray, gutters, min_piece: float) -> tuple[np.ndarray, np.ndarray]:
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
    hit = np.flatnonzero(_columns.gutter_cells_between(gutters, xyxy[:, 0], xyxy[:, 2], yc) > 0)
    if hit.size == 0:
        return xyxy, np.arange(n)
    run_r, run_a, run_b = _columns._gutter_runs(gutters.mask)
    r, _, _ = _columns._cells(gutters, xyxy[hit, 0], xyxy[hit, 2], yc[hit])
    same_row = run_r[None, :] == r[:, None]
    cut_l = run_a[None, :] * gutters.cell_w   # piece to the left ends here
    cut_r = run_b[None, :] * gutters.cell_w   # piece to the right starts here

    def sides():
        inside = same_row & (cut_l > xyxy[hit, 0, None]) & (cut_r < xyxy[hit, 2, None])
        return inside, cut_l - xyxy[hit, 0, None] >= min_piece, xyxy[hit, 2, None] - cut_r >= min_piece

    inside, left_ok, right_ok = sides()
    li, ri = np.nonzero(inside & ~left_ok & right_ok)
    np.maximum.at(xyxy[:, 0], hit[li], cut_r[0, ri])
    li, ri = np.nonzero(inside & left_ok & ~right_ok)
    np.minimum.at(xyxy[:, 2], hit[li], cut_l[0, ri])
    inside, left_ok, right_ok = sides()
    li, ri = np.nonzero(inside & left_ok & right_ok)  # sorted by line, then by run start
    if li.size == 0:
        return xyxy, np.arange(n)
    lines = hit[li]
    cut = np.unique(lines)
    # Each cut line yields (its runs + 1) pieces: starts = [x0, run ends...], ends = [run starts..., x1].
    start_key = np.concatenate([cut, lines])
    start_x = np.concatenate([xyxy[cut, 0], cut_r[0, ri]])
    end_key = np.concatenate([lines, cut])
    end_x = np.concatenate([cut_l[0, ri], xyxy[cut, 2]])
    o_s = np.lexsort((start_x, start_key))
    o_e = np.lexsort((end_x, end_key))
    parent = start_key[o_s]
    pieces = np.stack([start_x[o_s], xyxy[parent, 1], end_x[o_e], xyxy[parent, 3]], 1)
    whole = np.setdiff1d(np.arange(n), cut)
    out = np.concatenate([xyxy[whole], pieces])
    src = np.concatenate([whole, parent])
    order = np.argsort(src, kind="stable")
    return out[order], src[order]
