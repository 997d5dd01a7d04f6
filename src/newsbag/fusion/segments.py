"""Boxes cut at the column gutters of the text lines inside them (`column_segments`): fused text
regions that hold two columns' lines become one region per column."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..contract import take_rows
from .geometry import group_extent

__all__ = ["column_segments", "recipe_segments"]


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


def recipe_segments(xyxy: np.ndarray, lines: np.ndarray, member_box: np.ndarray, member_line: np.ndarray, params,
                    width: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """`column_segments` with a fusion recipe's column-split params (`col_*`, shares of the page width)."""
    return column_segments(xyxy, lines, member_box, member_line, params.col_gap * width,
                           min_lines=params.col_min_lines, tol=params.col_tol, slack=params.col_slack * width)
