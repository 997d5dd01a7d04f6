"""Newspaper reading order (recursive XY-cut, columns first) and column gutters in text lines."""

from __future__ import annotations

import numpy as np

__all__ = ["reading_order", "column_segments"]


def _cuts(lo: np.ndarray, hi: np.ndarray, tol: float) -> tuple[np.ndarray, np.ndarray]:
    """Sort intervals by `lo` and return (order, group id) where a gap > -tol starts a group."""
    order = np.argsort(lo, kind="stable")
    lo_s, hi_s = lo[order], hi[order]
    run = np.maximum.accumulate(hi_s)
    new = np.empty(len(order), bool)
    new[0] = True
    new[1:] = lo_s[1:] > run[:-1] - tol
    return order, np.cumsum(new) - 1


def _xycut(xyxy: np.ndarray, idx: np.ndarray, tol_x: float, tol_y: float, out: list) -> None:
    if len(idx) <= 1:
        out.extend(idx.tolist())
        return
    sub = xyxy[idx]
    # Columns first: a gutter that runs through the whole block splits it left to right;
    # only when there is none do we cut into horizontal bands (masthead, headline, body).
    for lo, hi, tol in ((sub[:, 0], sub[:, 2], tol_x), (sub[:, 1], sub[:, 3], tol_y)):
        order, group = _cuts(lo, hi, tol)
        if group[-1] > 0:
            parts = idx[order]
            bounds = [0, *(np.flatnonzero(np.diff(group)) + 1).tolist(), len(parts)]
            for a, b in zip(bounds[:-1], bounds[1:]):
                if b - a == 1:
                    out.append(int(parts[a]))
                else:
                    _xycut(xyxy, parts[a:b], tol_x, tol_y, out)
            return
    out.extend(idx[np.lexsort((sub[:, 0], sub[:, 1]))].tolist())


def reading_order(xyxy: np.ndarray, width: float, height: float, tol: float = 0.005) -> np.ndarray:
    """(N,) reading rank of each box: recursive XY-cut that prefers column cuts.

    Args:
        xyxy: (N, 4) boxes in page pixels.
        width, height: page size; overlaps below `tol` of it still count as a gap, because
            fused boxes of neighbouring columns often touch.

    >>> reading_order(np.zeros((0, 4)), 10, 10).shape
    (0,)
    """
    out: list[int] = []
    _xycut(np.asarray(xyxy, float), np.arange(len(xyxy)), tol * width, tol * height, out)
    rank = np.empty(len(xyxy), np.int64)
    rank[np.asarray(out, np.intp)] = np.arange(len(out))
    return rank


def column_segments(
    box_xyxy: np.ndarray,
    line_xyxy: np.ndarray,
    member_box: np.ndarray,
    member_line: np.ndarray,
    min_gap: float,
    min_lines: int = 2,
    wide: float = 0.6,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Cut boxes at vertical gutters of the text lines inside them.

    A gutter is a gap of at least `min_gap` pixels in the x-projection of a box's lines
    with at least `min_lines` lines on each side; lines that run across the gutter hide it,
    so the cut is conservative. Lines wider than `wide` of their box (a headline over
    several columns) are left out of the projection and become one segment of their own.

    Args:
        box_xyxy: (B, 4) boxes; line_xyxy: (L, 4) text lines.
        member_box, member_line: (K,) pairs: line member_line[k] lies inside box member_box[k].
        min_gap: gutter width in pixels.

    Returns:
        n_cols (B,) number of column segments per box (1 when uncut or without lines),
        seg_parent (M,) box index of each segment of the cut boxes, seg_xyxy (M, 4) the
        segments (their lines' extent, clipped to the parent box).
    """
    n_cols = np.ones(len(box_xyxy), np.int64)
    bw = box_xyxy[member_box, 2] - box_xyxy[member_box, 0]
    lw = line_xyxy[member_line, 2] - line_xyxy[member_line, 0]
    is_wide = lw > wide * bw
    narrow_box, narrow_line = member_box[~is_wide], member_line[~is_wide]
    if len(narrow_box) == 0:
        return n_cols, np.zeros(0, np.intp), np.zeros((0, 4))
    lx = line_xyxy[narrow_line]
    order = np.lexsort((lx[:, 0], narrow_box))
    b, lx = narrow_box[order], lx[order]
    big = 4.0 * (np.abs(line_xyxy).max() + 1.0)
    run = np.maximum.accumulate(lx[:, 2] + b * big) - b * big
    first = np.empty(len(b), bool)
    first[0] = True
    first[1:] = b[1:] != b[:-1]
    cut = np.zeros(len(b), bool)
    cut[1:] = ~first[1:] & (lx[1:, 0] - run[:-1] >= min_gap)
    seg = np.cumsum(first | cut) - 1
    count = np.bincount(seg)
    # A cut stands only when both neighbouring segments hold enough lines.
    valid = cut.copy()
    k = np.flatnonzero(cut)
    valid[k] = (count[seg[k - 1]] >= min_lines) & (count[seg[k]] >= min_lines)
    seg = np.cumsum(first | valid) - 1
    nseg = seg[-1] + 1
    seg_box = np.zeros(nseg, np.intp)
    seg_box[seg] = b
    per_box = np.bincount(seg_box, minlength=len(box_xyxy))
    n_cols[per_box > 0] = per_box[per_box > 0]
    # Wide lines of a cut box form one more segment.
    w_box, w_line = member_box[is_wide], member_line[is_wide]
    w_sel = n_cols[w_box] >= 2
    w_box, w_line = w_box[w_sel], w_line[w_sel]
    w_ids, w_seg = np.unique(w_box, return_inverse=True)
    all_seg = np.concatenate([seg, nseg + w_seg.reshape(-1)])
    all_lx = np.concatenate([lx, line_xyxy[w_line]])
    seg_box = np.concatenate([seg_box, w_ids])
    total = nseg + len(w_ids)
    ext = np.empty((total, 4))
    ext[:, :2] = np.inf
    ext[:, 2:] = -np.inf
    np.minimum.at(ext[:, 0], all_seg, all_lx[:, 0])
    np.minimum.at(ext[:, 1], all_seg, all_lx[:, 1])
    np.maximum.at(ext[:, 2], all_seg, all_lx[:, 2])
    np.maximum.at(ext[:, 3], all_seg, all_lx[:, 3])
    sel = n_cols[seg_box] >= 2
    parent = seg_box[sel]
    pb = box_xyxy[parent]
    out = np.concatenate([np.maximum(ext[sel, :2], pb[:, :2]), np.minimum(ext[sel, 2:], pb[:, 2:])], axis=1)
    n_cols[w_ids] += 1
    return n_cols, parent, out
