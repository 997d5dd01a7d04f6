"""Newspaper reading order (recursive XY-cut, columns first) and column gutters in text lines."""

from __future__ import annotations

import numpy as np

from .geometry import group_extent

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


def _xycut(xyxy: np.ndarray, tol_x: float, tol_y: float) -> list[int]:
    """Box indices in XY-cut reading order: depth first, left part / upper band first.

    An explicit stack instead of recursion: no recursion limit on deep cut trees (a
    staircase of n boxes nests n levels), and every split makes each part strictly
    smaller, so the loop ends after at most 2n - 1 blocks.
    """
    out: list[int] = []
    stack = [np.arange(len(xyxy))]
    while stack:
        idx = stack.pop()
        if len(idx) <= 1:
            out.extend(idx.tolist())
            continue
        sub = xyxy[idx]
        # Columns first: a gutter that runs through the whole block splits it left to right;
        # only when there is none do we cut into horizontal bands (masthead, headline, body).
        for lo, hi, tol in ((sub[:, 0], sub[:, 2], tol_x), (sub[:, 1], sub[:, 3], tol_y)):
            order, group = _cuts(lo, hi, tol)
            if group[-1] > 0:
                parts = idx[order]
                bounds = [0, *(np.flatnonzero(group[1:] != group[:-1]) + 1).tolist(), len(parts)]
                stack.extend(parts[a:b] for a, b in zip(bounds[-2::-1], bounds[:0:-1]))
                break
        else:
            out.extend(idx[np.lexsort((sub[:, 0], sub[:, 1]))].tolist())
    return out


def reading_order(xyxy: np.ndarray, width: float, height: float, tol: float = 0.005) -> np.ndarray:
    """(N,) reading rank of each box: recursive XY-cut that prefers column cuts.

    Args:
        xyxy: (N, 4) boxes in page pixels.
        width, height: page size; overlaps below `tol` of it still count as a gap, because
            fused boxes of neighbouring columns often touch.

    >>> reading_order(np.zeros((0, 4)), 10, 10).shape
    (0,)
    """
    out = _xycut(np.asarray(xyxy, float), tol * width, tol * height)
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
    n_cols = np.ones(len(box_xyxy), np.int64)
    none = (n_cols, np.zeros(0, np.intp), np.zeros((0, 4)))
    box_xyxy = np.asarray(box_xyxy, float)
    bx, lx = box_xyxy[member_box], line_xyxy[member_line]
    x0, x1 = np.maximum(lx[:, 0], bx[:, 0]), np.minimum(lx[:, 2], bx[:, 2])
    ok = x1 > x0
    mb, ml, x0, x1 = member_box[ok], member_line[ok], x0[ok], x1[ok]
    if len(mb) == 0:
        return none
    # Trimmed ends; a line shorter than 2 * slack shrinks to its centre.
    mid = (x0 + x1) / 2
    t0, t1 = np.minimum(x0 + slack, mid), np.maximum(x1 - slack, mid)
    n_box = len(box_xyxy)
    tol_n = np.floor(tol * np.bincount(mb, minlength=n_box))
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
    start = low & ~np.r_[False, low[:-1]]
    end = low & ~np.r_[low[1:], False]
    s, e = np.flatnonzero(start), np.flatnonzero(end)
    gb, g0, g1 = eb[s], ex[s], ex[e + 1]
    cand = (g1 - g0 >= min_gap) & (g0 > xmin[gb]) & (g1 < xmax[gb])
    gb, g0, g1 = gb[cand], g0[cand], g1[cand]
    if len(gb) == 0:
        return none
    big = 4.0 * (np.abs(box_xyxy).max() + np.abs(line_xyxy).max() + 1.0)
    while True:  # dropping an unsupported cut merges segments: recount until all stand
        centre = gb * big + (g0 + g1) / 2
        first_cut = np.searchsorted(centre, mb * big - big / 2)
        sa = np.searchsorted(centre, mb * big + t0) - first_cut
        sz = np.searchsorted(centre, mb * big + t1) - first_cut
        n_cut = np.bincount(gb, minlength=n_box)
        seg_base = np.r_[0, np.cumsum(n_cut + 1)]   # segment ids: box b owns seg_base[b] + 0..n_cut[b]
        whole = np.bincount(seg_base[mb[sa == sz]] + sa[sa == sz], minlength=seg_base[-1])
        cut_k = np.arange(len(gb)) - np.searchsorted(gb, gb)   # index of each cut within its box
        left = seg_base[gb] + cut_k
        valid = (whole[left] >= min_lines) & (whole[left + 1] >= min_lines)
        if valid.all():
            break
        gb, g0, g1 = gb[valid], g0[valid], g1[valid]
        if len(gb) == 0:
            return none
    # Line pieces: a line spanning segments sa..sz is cut at the gutter centres in between;
    # every piece is clipped to its segment, so neighbouring columns do not overlap.
    mid_cut = (g0 + g1) / 2
    reps = sz - sa + 1
    k = np.repeat(np.arange(len(mb)), reps)
    seg_in_box = sa[k] + (np.arange(len(k)) - np.repeat(np.cumsum(reps) - reps, reps))
    cut_of = np.searchsorted(gb, mb[k]) + seg_in_box          # global cut index right of the piece
    n_cut_k = n_cut[mb[k]]
    px0 = np.where(seg_in_box > 0, np.maximum(x0[k], mid_cut[np.maximum(cut_of - 1, 0)]), x0[k])
    px1 = np.where(seg_in_box < n_cut_k, np.minimum(x1[k], mid_cut[np.minimum(cut_of, len(gb) - 1)]), x1[k])
    keep = px1 > px0
    seg = (seg_base[mb[k]] + seg_in_box)[keep]
    ly = line_xyxy[ml[k][keep]]
    pieces = np.stack([px0[keep], ly[:, 1], px1[keep], ly[:, 3]], axis=1)
    ext = group_extent(pieces, seg, seg_base[-1])
    seg_box = np.repeat(np.arange(n_box), n_cut + 1)
    cut_boxes = n_cut > 0
    sel = cut_boxes[seg_box] & np.isfinite(ext[:, 0])
    parent = seg_box[sel]
    pb = box_xyxy[parent]
    out = np.concatenate([np.maximum(ext[sel, :2], pb[:, :2]), np.minimum(ext[sel, 2:], pb[:, 2:])], axis=1)
    n_cols = np.where(cut_boxes, np.bincount(parent, minlength=n_box), 1)
    return n_cols, parent, out
