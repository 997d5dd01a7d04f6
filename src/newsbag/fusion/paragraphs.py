"""Paragraph regions from a structure source's blocks, corrected with the other members' evidence.

The steps of the ``paragraphs`` recipe (`paragraph_regions.fuse_paragraphs` strings them together), each a
pure function over (N, 4) xyxy arrays. Lengths given "in lines" are multiples of the page's
median text-line height ``lh``. Everything is sort-and-sweep or STRtree pairs: near-linear in
the number of boxes.
"""

from __future__ import annotations

import numpy as np

import shapely

from .geometry import Pairs, area, cross_pairs, group_extent, self_pairs
from .match import connected_groups

__all__ = ["inside_pairs", "noise_mask", "unnest_blocks", "gutter_cuts", "edge_rows", "join_pairs", "lines_back",
           "matched_lines"]

_EPS = 1e-9


def inside_pairs(boxes: np.ndarray, items: np.ndarray, t: float = 0.5,
                 tree: shapely.STRtree | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(K,) pairs (box, item) where at least `t` of the item lies inside the box (`tree`: the
    `geometry.box_tree` of `items`, when the caller queries them often)."""
    p = cross_pairs(boxes, items, tree)
    ok = p.inter >= t * np.maximum(area(items)[p.j], _EPS)
    return p.i[ok], p.j[ok]


def noise_mask(blocks: np.ndarray, score: np.ndarray, evidence: np.ndarray, lh: float,
               max_h: float, min_score: float, min_cover: float, tall: float = 0.0,
               pairs: Pairs | None = None) -> np.ndarray:
    """(N,) bool: blocks to keep.

    A block is noise (show-through from the back of the page, specks, rules) when no
    evidence box (text regions of the other families) covers `min_cover` of it and it is
    either lower than `max_h` lines or scored below `min_score` by its detector (and, with
    `tall` > 0, lower than `tall` lines: a tall block is a masthead more often than noise). Measured on
    nzz: such blocks are lower and less confident than real text, and Tesseract, which
    thresholds the page globally, rarely finds text in them. `pairs`: ``cross_pairs(blocks,
    evidence)`` in any order, when the caller has them.
    """
    p = cross_pairs(blocks, evidence) if pairs is None else pairs
    best = np.zeros(len(blocks))
    np.maximum.at(best, p.i, p.inter / np.maximum(area(blocks)[p.i], _EPS))
    h = blocks[:, 3] - blocks[:, 1]
    doubtful = np.nan_to_num(score, nan=1.0) < min_score
    if tall > 0:
        doubtful &= h < tall * lh
    weak = (h < max_h * lh) | doubtful
    return ~(weak & (best < min_cover))


def unnest_blocks(blocks: np.ndarray, lines: np.ndarray, gutters: np.ndarray, lh: float, t: float,
                  max_h: float, poke: float, tree: shapely.STRtree | None = None) -> tuple[np.ndarray, tuple]:
    """Blocks that hold another block and cross a column gutter, replaced by their own lines.

    A block the line detector built around another of its blocks (`t` of the other inside
    it) grouped lines that are not one paragraph: on nzz mastheads and datelines, lines that
    run through show-through text join side-by-side header items (issue no., date, price)
    into one wide block. When such a block is lower than `max_h` lines and reaches more
    than `poke` lines past a column gutter of the page on both sides (`gutters`, x
    positions), each of its lines (clipped to it) becomes a region; lines that lie in another
    block stay with that block. A line is thinner than the block, so it holds fewer items.

    Returns:
        (cut,) indices of the blocks replaced, and the pieces: parent (M,) block index, (M, 4).
    """
    none = np.zeros(0, np.intp), (np.zeros(0, np.intp), np.zeros((0, 4)))
    if len(blocks) < 2 or not len(lines) or not len(gutters):
        return none
    p = self_pairs(blocks)
    outer = np.r_[p.i, p.j]
    inner = np.r_[p.j, p.i]
    holds = np.r_[p.inter, p.inter] >= t * np.maximum(area(blocks)[inner], _EPS)
    nested = np.zeros(len(blocks), bool)
    nested[outer[holds]] = True
    # a gutter strictly inside (x0 + poke, x1 - poke), in lines
    crosses = (np.searchsorted(gutters, blocks[:, 2] - poke * lh, "left")
               > np.searchsorted(gutters, blocks[:, 0] + poke * lh, "right"))
    cut_mask = nested & crosses & (blocks[:, 3] - blocks[:, 1] < max_h * lh)
    if not cut_mask.any():
        return none
    b, j = inside_pairs(blocks, lines, tree=tree)
    elsewhere = np.zeros(len(lines), bool)
    elsewhere[j[~cut_mask[b]]] = True
    ok = cut_mask[b] & ~elsewhere[j]
    b, j = b[ok], j[ok]
    pieces = np.column_stack([np.maximum(lines[j, :2], blocks[b, :2]), np.minimum(lines[j, 2:], blocks[b, 2:])])
    return np.flatnonzero(cut_mask), (b, pieces)


def _pairs_within(group: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """All index pairs (a, b), a < b, of positions that share a `group` id (sorted by group)."""
    end = np.searchsorted(group, group, side="right")
    n_after = end - np.arange(len(group)) - 1
    a = np.repeat(np.arange(len(group)), n_after)
    b = a + 1 + np.arange(len(a)) - np.repeat(np.cumsum(n_after) - n_after, n_after)
    return a, b


def gutter_cuts(blocks: np.ndarray, evidence: np.ndarray, lines: np.ndarray, lh: float,
                min_h: float, t_in: float = 0.6, tree: shapely.STRtree | None = None) -> tuple[np.ndarray, tuple]:
    """Cut blocks at gutters between side-by-side evidence boxes inside them.

    Where the line detector ran lines across a narrow gutter, its blocks span two columns;
    another family often separates them. Two evidence boxes (each `t_in` inside the block,
    at least `min_h` lines tall) that are x-disjoint and overlap by half the lower one's
    height put a gutter at the middle of the gap between them; the block is cut there, and
    each piece shrinks to the text lines (clipped to it) inside it.

    Returns:
        (cut,) indices of the blocks cut, and the pieces: parent (M,) block index, (M, 4).
    """
    none = np.zeros(0, np.intp), (np.zeros(0, np.intp), np.zeros((0, 4)))
    if not len(blocks) or not len(evidence) or not len(lines):
        return none
    # Only tall evidence can cut: the others need no query. Sorted by block, then evidence
    # index, the pairs come in the same order whichever way they were found.
    tall = np.flatnonzero(evidence[:, 3] - evidence[:, 1] >= min_h * lh)
    p = cross_pairs(evidence[tall], blocks)
    ok = p.inter >= t_in * np.maximum(area(evidence)[tall[p.i]], _EPS)
    o = np.argsort(p.j[ok], kind="stable")
    e, b = tall[p.i[ok][o]], p.j[ok][o]
    i, j = _pairs_within(b)
    lo, hi = evidence[e[i]], evidence[e[j]]
    left = np.where((lo[:, 2] <= hi[:, 0])[:, None], lo, hi)
    right = np.where((lo[:, 2] <= hi[:, 0])[:, None], hi, lo)
    apart = left[:, 2] <= right[:, 0]
    y_over = np.minimum(lo[:, 3], hi[:, 3]) - np.maximum(lo[:, 1], hi[:, 1])
    low = np.minimum(lo[:, 3] - lo[:, 1], hi[:, 3] - hi[:, 1])
    hit = apart & (y_over >= 0.5 * low)
    if not hit.any():
        return none
    gb, gx = b[i[hit]], (left[hit, 2] + right[hit, 0]) / 2
    # One cut per gutter: cuts of one block closer than 2 lines are the same gutter.
    o = np.lexsort((gx, gb))
    gb, gx = gb[o], gx[o]
    new = np.r_[True, (gb[1:] != gb[:-1]) | (np.diff(gx) > 2 * lh)]
    gb, gx = gb[new], gx[new]
    cut = np.unique(gb)
    # Pieces: [x0, g1], [g1, g2], ..., [gk, x1] of each cut block.
    starts = np.searchsorted(gb, cut)
    counts = np.diff(np.r_[starts, len(gb)])
    parent = np.repeat(cut, counts + 1)
    edges_lo = np.empty(len(parent))
    edges_hi = np.empty(len(parent))
    first = np.r_[0, np.cumsum(counts + 1)[:-1]]
    is_first = np.zeros(len(parent), bool)
    is_first[first] = True
    is_last = np.zeros(len(parent), bool)
    is_last[first + counts] = True
    edges_lo[is_first] = blocks[cut, 0]
    edges_lo[~is_first] = gx
    edges_hi[is_last] = blocks[cut, 2]
    edges_hi[~is_last] = gx
    pieces = np.column_stack([edges_lo, blocks[parent, 1], edges_hi, blocks[parent, 3]])
    q = cross_pairs(pieces, lines, tree)
    clip = np.column_stack([np.maximum(lines[q.j, :2], pieces[q.i, :2]), np.minimum(lines[q.j, 2:], pieces[q.i, 2:])])
    keep = (clip[:, 2] - clip[:, 0] > lh) & (clip[:, 3] - clip[:, 1] > 0.5 * (lines[q.j, 3] - lines[q.j, 1]))
    ext = group_extent(clip[keep], q.i[keep], len(pieces))
    found = np.isfinite(ext[:, 0])
    return cut, (parent[found], ext[found])


def edge_rows(blocks: np.ndarray, lines: np.ndarray, lh: float,
              tree: shapely.STRtree | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(N, 4) extents of each block's first and last row of text lines (clipped to it).

    A row: the lines inside the block whose centres lie within half a line of the top-most
    (bottom-most) line's centre; the detector often splits one printed line in pieces.
    Blocks without lines get +-inf.
    """
    b, j = inside_pairs(blocks, lines, tree=tree)
    n = len(blocks)
    own = np.column_stack([np.maximum(lines[j, :2], blocks[b, :2]), np.minimum(lines[j, 2:], blocks[b, 2:])])
    yc = (own[:, 1] + own[:, 3]) / 2
    top = np.full(n, np.inf)
    np.minimum.at(top, b, yc)
    bottom = np.full(n, -np.inf)
    np.maximum.at(bottom, b, yc)
    first = np.abs(yc - top[b]) < 0.5 * lh
    last = np.abs(yc - bottom[b]) < 0.5 * lh
    return group_extent(own[first], b[first], n), group_extent(own[last], b[last], n)


def join_pairs(blocks: np.ndarray, lines: np.ndarray, lh: float, max_gap: float, indent: float, short: float,
               align: float = 1.0, tree: shapely.STRtree | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(K,) pairs (upper, lower) of blocks that continue one paragraph.

    The block detector cuts a paragraph where its own cues fire on pieces of lines; the
    boundary between two blocks of one column is rejoined when, looking at the blocks' own
    edge rows, there is no paragraph cue: the lower block's first row starts less than
    `indent` lines right of the pair's left edge (no first-line indent), the upper block's
    last row ends less than `short` lines before the pair's right edge (no short last
    line), the rows are less than `max_gap` lines apart, and the blocks' left edges lie
    within `align` lines and their x-overlap covers 80% of the wider one (same column, same
    measure: a heading or a narrower box is never joined).
    """
    if len(blocks) < 2 or not len(lines):
        return np.zeros(0, np.intp), np.zeros(0, np.intp)
    first, last = edge_rows(blocks, lines, lh, tree)
    reach = blocks + np.array([0.0, 0.0, 0.0, (max_gap + 1.0) * lh])
    p = cross_pairs(reach, blocks)
    a, b = p.i, p.j
    w = blocks[:, 2] - blocks[:, 0]
    x_over = np.minimum(blocks[a, 2], blocks[b, 2]) - np.maximum(blocks[a, 0], blocks[b, 0])
    ok = (a != b) & (x_over >= 0.8 * np.maximum(w[a], w[b]))
    ok &= (blocks[b, 1] > blocks[a, 1] + 0.5 * lh) & (blocks[b, 3] > blocks[a, 3])
    ok &= np.abs(blocks[a, 0] - blocks[b, 0]) < align * lh
    with np.errstate(invalid="ignore"):
        gap = first[b, 1] - last[a, 3]
        x0 = np.minimum(blocks[a, 0], blocks[b, 0])
        x1 = np.maximum(blocks[a, 2], blocks[b, 2])
        ok &= np.isfinite(gap) & (gap < max_gap * lh)
        ok &= (x1 - last[a, 2] < short * lh) & (first[b, 0] - x0 < indent * lh)
    return a[ok], b[ok]


def lines_back(regions: np.ndarray, lines: np.ndarray, evidence: np.ndarray,
               min_cover: float, tree: shapely.STRtree | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Blocks of the text lines no region holds but evidence boxes cover `min_cover` of.

    Such lines (each less than half inside every region) that touch once grown by half
    their height form one block each; evidence from another family keeps the show-through
    and specks the noise step removed from coming back.

    Returns:
        blocks (K, 4), and (M,) pairs: line index, block id.
    """
    none = np.zeros((0, 4)), np.zeros(0, np.intp), np.zeros(0, np.intp)
    if not len(lines):
        return none
    held = np.zeros(len(lines), bool)
    held[inside_pairs(regions, lines, tree=tree)[1]] = True
    p = cross_pairs(lines, evidence)
    cov = np.bincount(p.i, p.inter, minlength=len(lines)) / np.maximum(area(lines), _EPS)
    idx = np.flatnonzero(~held & (cov >= min_cover))
    own = lines[idx]
    if not len(own):
        return none
    half = (own[:, 3] - own[:, 1]) / 2
    grown = own + np.column_stack([np.zeros_like(half), -half, np.zeros_like(half), half])
    q = self_pairs(grown)
    gid = connected_groups(len(own), q.i, q.j)
    return group_extent(own, gid, int(gid.max()) + 1), idx, gid


def matched_lines(regions: np.ndarray, lines: np.ndarray, evidence: np.ndarray, t_iou: float,
                  pairs: Pairs | None = None) -> np.ndarray:
    """(K,) indices of text lines the regions leave out that an evidence box matches.

    A line less than half inside the regions (all together) that a text box of another
    family matches at IoU >= `t_iou` is an item two detectors agree on (a mark, a number,
    a short heading the block detector left out); it comes back as a region of its own.
    The match, unlike `lines_back`'s cover, keeps lines inside other families' large boxes
    (most of the lines the regions leave out) from coming back. `pairs`: ``cross_pairs(lines,
    evidence)`` in any order, when the caller has them.
    """
    if not len(lines) or not len(evidence):
        return np.zeros(0, np.intp)
    a = np.maximum(area(lines), _EPS)
    r = cross_pairs(lines, regions)
    held = np.bincount(r.i, r.inter, minlength=len(lines)) >= 0.5 * a
    p = cross_pairs(lines, evidence) if pairs is None else pairs
    iou = p.inter / np.maximum(a[p.i] + area(evidence)[p.j] - p.inter, _EPS)
    best = np.zeros(len(lines))
    np.maximum.at(best, p.i, iou)
    return np.flatnonzero(~held & (best >= t_iou))
