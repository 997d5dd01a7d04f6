"""The ``consensus`` fusion method: family votes, WBF averaging of matched boxes, one
granularity per nest, and the steps that give uncovered text lines a region."""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from ..contract import Boxes, column_codes, take_rows
from ..labels import COARSE, coarse_codes
from .geometry import Pairs, area, cross_pairs, group_extent, self_pairs, subset_pairs
from .match import connected_groups, pair_scores
from .order import PageLines
from .paragraphs import inside_pairs
from .pooling import glob_rank, glob_weight, page_sized
from .regions import (EPS, IS_TEXTLIKE, NAN_SCORE_WEIGHT, TEXT_AS_ONE, empty_fused, region_order, split_by,
                      with_headlines)
from .segments import recipe_segments
from .options import ConsensusParams

__all__ = ["fuse_consensus"]


class _Resolved:
    """Fused boxes of one resolution round (groups averaged, nesting resolved)."""

    _COLS = ("xyxy", "score", "label", "member_idx", "support_bits", "rank")

    def __init__(self, xyxy, score, label, member_idx, support_bits, rank, replaced=None):
        self.xyxy, self.score, self.label = xyxy, score, label
        self.member_idx, self.support_bits = member_idx, support_bits
        # Best granularity rank (`ConsensusParams.granularity`) among the members.
        self.rank = rank
        # Containers dropped for their finer children (their lines may need a home).
        self.replaced = replaced

    def take(self, idx: np.ndarray) -> _Resolved:
        # `replaced` belongs to the round, not to the boxes taken: keep it (the column step
        # gives the lines of replaced containers a home after the shadow step's take).
        return _Resolved(*(take_rows(getattr(self, c), idx) for c in self._COLS), self.replaced)

    def extend(self, other: _Resolved) -> _Resolved:
        return _Resolved(*(np.concatenate([getattr(self, c), getattr(other, c)]) for c in self._COLS),
                         self.replaced)


class _Prepared:
    """What `fuse_consensus` derives from its boxes and pairs alone, whatever the params."""

    def __init__(self, boxes: Boxes, pairs: Pairs):
        self.boxes, self.pairs = boxes, pairs
        n = len(boxes)
        self.coarse = coarse = coarse_codes(boxes.label)
        self.is_line = is_line = coarse == COARSE["line"]
        self.textlike = textlike = IS_TEXTLIKE[coarse]
        self.src_names, self.src = src_names, src = column_codes(boxes, "source")
        self.fam_names, self.fam = column_codes(boxes, "family")
        n_src = len(src_names)
        i, j, inter = pairs.i, pairs.j, pairs.inter
        self.iou = pair_scores(boxes.xyxy, pairs)[0]
        same = coarse[i] == coarse[j]
        # Pairs `_resolve` may match: one coarse class, two sources.
        self.matchable = same & (src[i] != src[j])
        # Coverage of each box by each source's compatible boxes (text lines count for text and titles).
        j_for_i = same | (is_line[j] & textlike[i])
        i_for_j = same | (is_line[i] & textlike[j])
        cov = np.zeros(n * n_src)
        np.add.at(cov, i[j_for_i] * n_src + src[j[j_for_i]], inter[j_for_i])
        np.add.at(cov, j[i_for_j] * n_src + src[i[i_for_j]], inter[i_for_j])
        self.cov = cov.reshape(n, n_src) / np.maximum(area(boxes.xyxy), EPS)[:, None]
        self._support: dict[float, tuple[np.ndarray, np.ndarray]] = {}

    def support(self, t_cover: float) -> tuple[np.ndarray, np.ndarray]:
        """(n_fam (N,) families that cover `t_cover` of each box, its own included; sup_bits (N,)
        int64 bit set of such sources, bit k for `src_names` entry k)."""
        if t_cover not in self._support:
            n, n_src = len(self.boxes), len(self.src_names)
            if n_src > 62:
                raise ValueError(f"at most 62 sources can be fused at once, got {n_src}")
            fam_of_src = np.zeros(n_src, np.intp)
            fam_of_src[self.src] = self.fam
            src_ok = self.cov >= t_cover
            src_ok[np.arange(n), self.src] = True
            fam_ok = np.zeros((n, len(self.fam_names)), bool)
            for f in range(len(self.fam_names)):
                fam_ok[:, f] = src_ok[:, fam_of_src == f].any(axis=1)
            bit = np.int64(1) << np.arange(n_src, dtype=np.int64)
            self._support[t_cover] = fam_ok.sum(axis=1), (src_ok * bit).sum(axis=1).astype(np.int64)
        return self._support[t_cover]


def _nesting(xyxy: np.ndarray, coarse: np.ndarray, group_rank: np.ndarray, own_n: np.ndarray,
             params: ConsensusParams) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Where fused groups nest (a child inside a container, IoA >= `t_ioa`, without matching it
    on IoU), which granularity stays (`ConsensusParams.prefer`; children side by side always win).

    Args:
        xyxy: (G, 4) the groups' boxes; coarse, group_rank, own_n: (G,) their coarse class,
            best granularity rank and number of families.

    Returns:
        keep (G,) bool; absorber (G,) the kept coarser group that takes each swallowed group's
        members (itself otherwise); splits (G,) bool, containers that gave way to their children.
    """
    g = len(xyxy)
    keep = np.ones(g, bool)
    absorber = np.arange(g)
    splits = np.zeros(g, bool)
    if g > 1:
        nest = self_pairs(xyxy)
        nest_iou, ioa_i, ioa_j = pair_scores(xyxy, nest)
        group_area = area(xyxy)
        same = (coarse[nest.i] == coarse[nest.j]) & (nest_iou < params.t_iou)
        i_in_j = same & (ioa_i >= params.t_ioa) & (group_area[nest.i] <= group_area[nest.j])
        j_in_i = same & (ioa_j >= params.t_ioa) & (group_area[nest.j] < group_area[nest.i]) & ~i_in_j
        child = np.concatenate([nest.i[i_in_j], nest.j[j_in_i]])
        cont = np.concatenate([nest.j[i_in_j], nest.i[j_in_i]])
        inter = np.concatenate([nest.inter[i_in_j], nest.inter[j_in_i]])
        if len(child):
            n_c = np.bincount(cont, minlength=g)
            cov_c = np.bincount(cont, inter, minlength=g) / np.maximum(group_area, EPS)
            splits = (n_c >= 2) & (cov_c >= params.t_split)
            gutter = _side_by_side(xyxy, child, cont, g) if params.split_columns else np.zeros(g, bool)
            child_rank = np.full(g, np.iinfo(np.int64).max)
            np.minimum.at(child_rank, cont, group_rank[child])
            coexist = np.zeros(g, bool)
            if params.prefer == "coarse":
                splits[:] = False
            elif params.prefer == "support":
                mean_own = np.bincount(cont, own_n[child], minlength=g) / np.maximum(n_c, 1)
                splits &= (mean_own > own_n + 1e-9) | ((np.abs(mean_own - own_n) <= 1e-9) & (child_rank <= group_rank))
            elif params.prefer == "rank":
                # Better-ranked children covering the container replace it; covering less,
                # both stay (the shadow step decides); a better-ranked container absorbs.
                coexist = (child_rank < group_rank) & ~splits
                splits &= child_rank <= group_rank
            # Children side by side (x-disjoint, overlapping in y) mean the container spans
            # a column gutter: the finer boxes win whatever their coverage or rank.
            splits |= gutter
            parent_ok = ~splits[cont] & ~coexist[cont]
            keep = ~splits & (np.bincount(child, parent_ok, minlength=g) == 0)
            # Boxes swallowed by a kept coarser box hand it their members.
            ok = np.flatnonzero(parent_ok)
            o = ok[np.lexsort((group_area[cont[ok]], child[ok]))]
            firsto = np.r_[True, child[o][1:] != child[o][:-1]] if len(o) else np.zeros(0, bool)
            absorber[child[o][firsto]] = cont[o][firsto]
            for _ in range(64):
                nxt = absorber[absorber]
                if np.array_equal(nxt, absorber):
                    break
                absorber = nxt
    return keep, absorber, splits


def _resolve(
    idx: np.ndarray,
    pre: _Prepared,
    sup_bits: np.ndarray,
    rank: np.ndarray,
    weight: np.ndarray,
    params: ConsensusParams,
) -> _Resolved:
    """Average IoU-matched boxes of `idx` (WBF style), then keep one granularity per nest."""
    boxes, pairs, src, fam = pre.boxes, pre.pairs, pre.src, pre.fam
    n = len(boxes)
    chosen = np.zeros(n, bool)
    chosen[idx] = True
    matched = chosen[pairs.i] & chosen[pairs.j] & pre.matchable & (pre.iou >= params.t_iou)
    local = np.full(n, -1, np.intp)
    local[idx] = np.arange(len(idx))
    gid = connected_groups(len(idx), local[pairs.i[matched]], local[pairs.j[matched]])
    n_groups = int(gid.max()) + 1 if len(gid) else 0

    member_weight = weight[idx]
    weighted = take_rows(boxes.xyxy, idx) * member_weight[:, None]
    # One bincount per corner: the sums of a 2-D np.add.at, added in the same order (4x faster).
    xyxy = (np.stack([np.bincount(gid, weighted[:, k], minlength=n_groups) for k in range(4)], axis=1)
            if n_groups else np.zeros((0, 4)))
    weight_sum = np.bincount(gid, member_weight, minlength=n_groups)
    xyxy /= np.maximum(weight_sum, EPS)[:, None]
    member_score = boxes.score[idx].astype(np.float64)
    scored = ~np.isnan(member_score)
    score_sum = np.bincount(gid[scored], member_score[scored], minlength=n_groups)
    n_scored = np.bincount(gid[scored], minlength=n_groups)
    score = np.where(n_scored > 0, score_sum / np.maximum(n_scored, 1), np.nan)
    label = boxes.label[idx[_heaviest(gid, member_weight, n_groups)]]
    support = np.zeros(n_groups, np.int64)
    np.bitwise_or.at(support, gid, sup_bits[idx])
    n_families = int(fam.max()) + 1 if len(fam) else 1
    # Families per group as a bool table (np.unique sorted them).
    family_seen = np.zeros(n_groups * n_families, bool)
    family_seen[gid * n_families + fam[idx]] = True
    own_n = np.count_nonzero(family_seen.reshape(n_groups, n_families), axis=1).astype(np.float64)
    group_rank = np.full(n_groups, np.iinfo(np.int64).max)
    np.minimum.at(group_rank, gid, rank[src[idx]])

    keep, absorber, splits = _nesting(xyxy, coarse_codes(label), group_rank, own_n, params)
    kept = np.flatnonzero(keep)
    # Each group's members go to the kept box that holds them: itself or its absorber.
    kept_pos = np.full(n_groups, -1, np.intp)
    kept_pos[kept] = np.arange(len(kept))
    owner = kept_pos[np.where(keep, np.arange(n_groups), absorber)][gid]
    held = owner >= 0
    kept_support = np.zeros(len(kept), np.int64)
    np.bitwise_or.at(kept_support, owner[held], sup_bits[idx[held]])
    gone = np.flatnonzero(splits)
    gone_pos = np.full(n_groups, -1, np.intp)
    gone_pos[gone] = np.arange(len(gone))
    replaced = _Resolved(take_rows(xyxy, gone), score[gone], label[gone], split_by(idx, gone_pos[gid], len(gone)),
                         support[gone], group_rank[gone])
    return _Resolved(take_rows(xyxy, kept), score[kept], label[kept], split_by(idx[held], owner[held], len(kept)),
                     kept_support, group_rank[kept], replaced)


def _heaviest(gid: np.ndarray, w: np.ndarray, g: int) -> np.ndarray:
    """(g,) position of each group's heaviest member, the first one on ties (NaN weighs least):
    the head of each group in ``np.lexsort((-w, gid))``, found without sorting (3x faster)."""
    if np.isnan(w).any():
        top = np.lexsort((-w, gid))
        first = np.ones(len(top), bool)
        first[1:] = gid[top][1:] != gid[top][:-1]
        out = np.empty(g, np.intp)
        out[gid[top[first]]] = top[first]
        return out
    best = np.full(g, -np.inf)
    np.maximum.at(best, gid, w)
    heavy = np.flatnonzero(w == best[gid])
    out = np.full(g, len(w), np.intp)
    np.minimum.at(out, gid[heavy], heavy)
    return out


def _side_by_side(xyxy: np.ndarray, child: np.ndarray, cont: np.ndarray, g: int) -> np.ndarray:
    """(g,) bool: containers holding two children that sit side by side.

    Side by side: disjoint in x, and their y ranges overlap by half the lower one's height.
    Pairs are formed within each container only (children per container are few).
    """
    o = np.argsort(cont, kind="stable")
    cn, ch = cont[o], child[o]
    end = np.searchsorted(cn, cn, side="right")
    n_after = end - np.arange(len(cn)) - 1
    i = np.repeat(np.arange(len(cn)), n_after)
    j = i + 1 + np.arange(len(i)) - np.repeat(np.cumsum(n_after) - n_after, n_after)
    a, b = take_rows(xyxy, ch[i]), take_rows(xyxy, ch[j])
    x_apart = (a[:, 2] <= b[:, 0]) | (b[:, 2] <= a[:, 0])
    y_over = np.minimum(a[:, 3], b[:, 3]) - np.maximum(a[:, 1], b[:, 1])
    low = np.minimum(a[:, 3] - a[:, 1], b[:, 3] - b[:, 1])
    hit = x_apart & (y_over >= 0.5 * low)
    out = np.zeros(g, bool)
    out[cn[i[hit]]] = True
    return out


def _drop_shadowed(res: _Resolved, t_shadow: float) -> _Resolved:
    """Drop boxes covered by more than `t_shadow` of their area by better-ranked kept boxes.

    Rank by rank, so a worse-ranked source only adds regions where the preferred ones
    found nothing, instead of overlapping them at another granularity. Text and titles
    shadow each other; other classes only their own.
    """
    klass = TEXT_AS_ONE[coarse_codes(res.label)]
    alive = np.ones(len(res.xyxy), bool)
    a = np.maximum(area(res.xyxy), EPS)
    for r in np.unique(res.rank)[1:]:
        cand = np.flatnonzero(res.rank == r)
        better = np.flatnonzero(alive & (res.rank < r))
        p = cross_pairs(take_rows(res.xyxy, cand), take_rows(res.xyxy, better))
        ok = klass[cand[p.i]] == klass[better[p.j]]
        covered = np.bincount(p.i[ok], p.inter[ok], minlength=len(cand)) / a[cand]
        alive[cand[covered > t_shadow]] = False
    return res if alive.all() else res.take(np.flatnonzero(alive))


def _textlike_of(label: np.ndarray) -> np.ndarray:
    return IS_TEXTLIKE[coarse_codes(label)]


def _uncovered(res: _Resolved, lines: np.ndarray) -> np.ndarray:
    """(L,) bool: lines with less than half of them inside any text region of `res`."""
    _, ml = inside_pairs(take_rows(res.xyxy, _textlike_of(res.label)), lines)
    uncovered = np.ones(len(lines), bool)
    uncovered[ml] = False
    return uncovered


def _fill_from_boxes(res: _Resolved, lines: np.ndarray, cand: np.ndarray, boxes: Boxes, args: tuple,
                     min_lines: int) -> _Resolved:
    """Add rejected boxes holding >= `min_lines` text lines that no kept text region covers."""
    uncovered = _uncovered(res, lines)
    if not uncovered.any() or not len(cand):
        return res
    cand_xyxy = take_rows(boxes.xyxy, cand)
    cb, _ = inside_pairs(cand_xyxy, take_rows(lines, uncovered))
    n_new = np.bincount(cb, minlength=len(cand))
    taken = cross_pairs(cand_xyxy, take_rows(res.xyxy, _textlike_of(res.label)))
    taken_share = np.bincount(taken.i, taken.inter, minlength=len(cand)) / np.maximum(area(cand_xyxy), EPS)
    fill = cand[(n_new >= min_lines) & (taken_share < 0.5)]
    return _line_blocks(res, _resolve(fill, *args), lines) if len(fill) else res


def _line_blocks(res: _Resolved, rep: _Resolved | None, lines: np.ndarray) -> _Resolved:
    """Add blocks of the lines inside `rep` boxes that no text region of `res` covers.

    Uncovered lines of one `rep` box that follow each other (gap < their mean height) and
    overlap horizontally form one block; it inherits that box's label and evidence. Used
    for containers dropped for side-by-side children and for rejected boxes taken back for
    their lines: only the part of them that holds text comes back.
    """
    if rep is None or not len(rep.xyxy):
        return res
    uncovered = _uncovered(res, lines)
    cb, cl = inside_pairs(rep.xyxy, lines[uncovered])
    if not len(cl):
        return res
    o = np.argsort(cl, kind="stable")
    cb, cl = cb[o], cl[o]
    first = np.r_[True, cl[1:] != cl[:-1]]
    cb, cl = cb[first], cl[first]                       # one container per line
    own = lines[uncovered][cl]
    half = (own[:, 3] - own[:, 1]) / 2
    grown = own + np.stack([np.zeros_like(half), -half, np.zeros_like(half), half], 1)
    p = self_pairs(grown)
    same = cb[p.i] == cb[p.j]
    gid = connected_groups(len(own), p.i[same], p.j[same])
    g = int(gid.max()) + 1
    ext = group_extent(own, gid, g)
    parent = np.zeros(g, np.intp)
    parent[gid] = cb
    blocks = rep.take(parent)
    pb = rep.xyxy[parent]
    blocks.xyxy = np.concatenate([np.maximum(ext[:, :2], pb[:, :2]), np.minimum(ext[:, 2:], pb[:, 2:])], 1)
    return res.extend(blocks)


def _voted(boxes: Boxes, n_fam: np.ndarray, lines: np.ndarray, params: ConsensusParams) -> np.ndarray:
    """(N,) bool, step (2) of `fuse_consensus`: boxes with `vote` families, or a score of
    `solo_score`, or at least `solo_min_size` text-line heights wide and tall."""
    keep = n_fam >= params.vote
    if params.solo_score is not None:
        keep |= np.nan_to_num(boxes.score, nan=-1.0) >= params.solo_score
    if params.solo_min_size is not None and len(lines):
        line_h = float(np.median(lines[:, 3] - lines[:, 1]))
        wh = boxes.xyxy[:, 2:] - boxes.xyxy[:, :2]
        keep |= (wh >= np.asarray(params.solo_min_size) * line_h).all(axis=1)
    return keep


def _split_at_gutters(res: _Resolved, lines: np.ndarray, params: ConsensusParams, width: float) -> _Resolved:
    """Text regions cut at the column gutters their text lines show (`segments.column_segments`)."""
    t = np.flatnonzero(_textlike_of(res.label))
    t_xyxy = take_rows(res.xyxy, t)
    mb, ml = inside_pairs(t_xyxy, lines)
    n_cols, parent, seg = recipe_segments(t_xyxy, lines, mb, ml, params, width)
    if not len(parent):
        return res
    stay = np.setdiff1d(np.arange(len(res.xyxy)), t[n_cols >= 2])
    pieces = res.take(t[parent])
    pieces.xyxy = seg
    return res.take(stay).extend(pieces)


def fuse_consensus(boxes: Boxes, params: ConsensusParams, pairs: Pairs | None = None,
                   page: PageLines | None = None) -> Boxes:
    """Fuse pooled source boxes by family votes, WBF averaging and granularity choice.

    Steps: (0) boxes covering `max_page_share` of the page or more are left out. (1) support of a box = families whose same-class boxes (text lines count for
    text and titles) cover at least `t_cover` of it, plus its own family; correlated
    sources of one family are one vote. (2) Keep boxes with >= `vote` families or a score
    >= `solo_score`, or at least `solo_min_size` text-line heights wide and tall (a large
    block is rarely noise; small ones need a second family). (3) Average IoU-matched kept
    boxes, weighted by score and source weight. (4) Where kept boxes nest, keep the finer
    ones if they cover `t_split` of the container and the evidence prefers them (see
    `ConsensusParams.prefer`), else the container; with `split_columns`, a container
    holding children side by side spans a gutter and always gives way to them.
    (5) Optionally (`fill_lines`) take back rejected boxes holding text lines no kept
    region covers, as blocks of those lines. With `t_shadow` < 1, drop boxes that
    better-ranked boxes already cover (`granularity` ranks). (6) With
    `split_columns`, give the uncovered lines of containers that gave way blocks too, then
    cut text regions at column gutters of their text lines (`segments.column_segments`).
    (7) With `titles`, text regions with heading evidence become ``headline`` (`with_headlines`).

    Args:
        boxes: pooled boxes of one page (sources plus optional text-line evidence).
        params: the variant's parameters.
        pairs: overlapping pairs of `boxes` when the caller already has them.
        page: the page's `order.PageLines`, computed once for all its variants.

    Returns:
        Fused boxes with ``member_idx``, ``support_bits`` and ``order`` columns.
    """
    meta = boxes.meta
    n = len(boxes)
    if n == 0:
        return empty_fused(boxes)
    if pairs is None:
        pairs = self_pairs(boxes.xyxy)
    if params.max_page_share < 1:
        # A member that fails on a page returns one page-sized box (CDLA's "figure" on old
        # scans): it is neither a region nor a vote for every box under it.
        too_big = page_sized(boxes, params.max_page_share)
        if too_big.any():
            sel = np.flatnonzero(~too_big)
            out = fuse_consensus(boxes[sel], replace(params, max_page_share=1.0), subset_pairs(pairs, ~too_big), page)
            members = np.fromiter((sel[m].tolist() for m in out.data["member_idx"]), dtype=object, count=len(out))
            return Boxes(out.xyxy, out.score, out.label, out.meta, {**out.data, "member_idx": members})
    pre = _Prepared(boxes, pairs)
    coarse, is_line, textlike, src_names = pre.coarse, pre.is_line, pre.textlike, pre.src_names
    # (1) support: families whose compatible boxes cover each box.
    n_fam, sup_bits = pre.support(params.t_cover)

    region = ~is_line
    lines = take_rows(boxes.xyxy, is_line)
    keep = region & _voted(boxes, n_fam, lines, params)

    rank = glob_rank(src_names, params.granularity)
    sw = glob_weight(src_names, params.weights)[pre.src]
    weight = np.where(np.isnan(boxes.score), NAN_SCORE_WEIGHT, boxes.score) * sw

    args = (pre, sup_bits, rank, weight, params)
    res = _resolve(np.flatnonzero(keep), *args)
    if len(lines) and params.fill_lines:
        res = _fill_from_boxes(res, lines, cand=np.flatnonzero(region & textlike & ~keep), boxes=boxes,
                               args=args, min_lines=params.fill_min_lines)
    if params.t_shadow < 1:
        res = _drop_shadowed(res, params.t_shadow)
    if len(lines) and params.split_columns:
        res = _split_at_gutters(_line_blocks(res, res.replaced, lines), lines, params, meta.width)
    xyxy, score, label, members, support = res.xyxy, res.score, res.label, res.member_idx, res.support_bits
    if params.titles:
        label = with_headlines(xyxy, label, take_rows(boxes.xyxy, region & (coarse == COARSE["title"])), lines)

    order = region_order(xyxy, label, meta, lines, page)
    return Boxes(
        xyxy=xyxy, score=score.astype(np.float32), label=label, meta=meta,
        data={"member_idx": members, "support_bits": support, "order": order},
    )
