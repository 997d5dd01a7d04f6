"""Fusion variants: one function per method over pooled source boxes, listed in `VARIANTS`.

Input boxes carry ``data["source"]`` ("<stage>/<variant>") and ``data["family"]``; boxes
of coarse class ``line`` are text-line evidence, never output regions. Outputs carry
``data["member_idx"]`` (object array of int lists into the input) and
``data["support_bits"]`` (int64 bit set over `source_names(boxes)`); `describe` turns
them into the JSON ``support`` and ``members`` lists.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from itertools import chain
from typing import Callable

import numpy as np

from .. import labels
from ..articles import group_articles
from ..contract import Boxes, column_codes, float_list, member_table_records, str_list, take_rows
from ..labels import COARSE, coarse_codes
from .geometry import Pairs, area, box_tree, cross_pairs, group_extent, pairs_between, self_pairs, subset_pairs
from .match import connected_groups, pair_scores
from .metrics import best_source
from .grid import column_bounds
from .order import PageLines, reading_order
from .segments import recipe_segments
from .paragraphs import gutter_cuts, inside_pairs, join_pairs, lines_back, matched_lines, noise_mask, unnest_blocks
from .variants import BestSingleParams, ConsensusParams, ParagraphParams

__all__ = ["VARIANTS", "take_sources", "fuse_consensus", "fuse_best_single", "fuse_paragraphs", "effective_params",
           "source_names", "describe", "articles", "member_records", "member_table"]

# By coarse code (lookups instead of np.isin, ~30 us a call on these small arrays): text and
# titles, and the class a box counts as when text and titles count as one.
_IS_TEXTLIKE = np.isin(np.arange(len(COARSE)), [COARSE["text"], COARSE["title"]])
_TEXT_AS_ONE = np.where(_IS_TEXTLIKE, COARSE["text"], np.arange(len(COARSE)))
_TEXT_CODE = labels.label_code("text")
# Unscored boxes (MinerU) weigh like a middling score in coordinate averaging.
_NAN_SCORE_WEIGHT = 0.5
_EPS = 1e-9


def source_names(boxes: Boxes) -> np.ndarray:
    """Sorted unique source names; ``support_bits`` bit k stands for entry k."""
    return column_codes(boxes, "source")[0]


def _glob_rank(names: np.ndarray, globs: tuple[str, ...]) -> np.ndarray:
    import fnmatch

    rank = np.full(len(names), len(globs), np.int64)
    for k, g in reversed(list(enumerate(globs))):
        rank[[fnmatch.fnmatchcase(str(n), g) for n in names]] = k
    return rank


def _glob_weight(names: np.ndarray, weights: tuple[tuple[str, float], ...]) -> np.ndarray:
    import fnmatch

    w = np.ones(len(names))
    for g, value in weights:
        w[[fnmatch.fnmatchcase(str(n), g) for n in names]] = value
    return w


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
        self.textlike = textlike = _IS_TEXTLIKE[coarse]
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
        self.cov = cov.reshape(n, n_src) / np.maximum(area(boxes.xyxy), _EPS)[:, None]
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


def take_sources(pool: Boxes, pairs: Pairs, mask: np.ndarray) -> tuple[Boxes, Pairs]:
    """``pool[mask]`` and its overlapping pairs, for a variant over whole sources (`mask` takes
    every box of each source it takes). A mask that takes every box gives the pool itself (P4
    and the "*" recipes: no copy to make)."""
    if mask.all():
        return pool, pairs
    return pool[mask], subset_pairs(pairs, mask)


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
            cov_c = np.bincount(cont, inter, minlength=g) / np.maximum(group_area, _EPS)
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
    xyxy /= np.maximum(weight_sum, _EPS)[:, None]
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
    replaced = _Resolved(take_rows(xyxy, gone), score[gone], label[gone], _split_by(idx, gone_pos[gid], len(gone)),
                         support[gone], group_rank[gone])
    return _Resolved(take_rows(xyxy, kept), score[kept], label[kept], _split_by(idx[held], owner[held], len(kept)),
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


def _split_by(values: np.ndarray, owner: np.ndarray, n: int) -> np.ndarray:
    """(n,) object array: entry k lists the `values` whose `owner` is k (owner -1: none).

    Lists, not array views: a page's variants make thousands of them, and views cost 1.3 % of
    a 6 x 300-box page's instructions more to make and free (callgrind)."""
    if n == 0:   # most rounds replace no container
        return np.zeros(0, object)
    ok = owner >= 0
    mine = owner[ok]
    o = np.argsort(mine, kind="stable")
    flat = values[ok][o]
    return _pieces(flat.tolist(), np.cumsum(np.bincount(mine, minlength=n)).tolist())


def _pieces(seq, ends: list[int]) -> np.ndarray:
    """(len(ends),) object array of the consecutive slices ``seq[0:ends[0]], seq[ends[0]:ends[1]], ...``
    (C-level maps: no Python step per piece)."""
    return np.fromiter(map(seq.__getitem__, map(slice, [0, *ends[:-1]], ends)), dtype=object, count=len(ends))


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
    klass = _TEXT_AS_ONE[coarse_codes(res.label)]
    alive = np.ones(len(res.xyxy), bool)
    a = np.maximum(area(res.xyxy), _EPS)
    for r in np.unique(res.rank)[1:]:
        cand = np.flatnonzero(res.rank == r)
        better = np.flatnonzero(alive & (res.rank < r))
        p = cross_pairs(take_rows(res.xyxy, cand), take_rows(res.xyxy, better))
        ok = klass[cand[p.i]] == klass[better[p.j]]
        covered = np.bincount(p.i[ok], p.inter[ok], minlength=len(cand)) / a[cand]
        alive[cand[covered > t_shadow]] = False
    return res if alive.all() else res.take(np.flatnonzero(alive))


def _order(xyxy: np.ndarray, label: np.ndarray, meta, lines: np.ndarray, page: PageLines | None) -> np.ndarray:
    """Reading rank of fused regions (`order.reading_order`, on the page's `PageLines` if they hold `lines`)."""
    ev = page if page is not None and page.holds(lines, meta.width) else lines
    return reading_order(xyxy, meta.width, meta.height, lines=ev, text=coarse_codes(label) == COARSE["text"])


def _textlike_of(label: np.ndarray) -> np.ndarray:
    return _IS_TEXTLIKE[coarse_codes(label)]


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
    taken_share = np.bincount(taken.i, taken.inter, minlength=len(cand)) / np.maximum(area(cand_xyxy), _EPS)
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


def _page_sized(boxes: Boxes, share: float) -> np.ndarray:
    """(N,) bool: boxes covering `share` of the page or more (`max_page_share`)."""
    return area(boxes.xyxy) >= share * float(boxes.meta.width) * float(boxes.meta.height)


def effective_params(params: ConsensusParams | BestSingleParams | ParagraphParams, boxes: Boxes):
    """`params` as they act on `boxes`: a consensus `max_page_share` that no box reaches
    leaves nothing out, so it acts as 1. Variants with equal effective params over the same
    boxes give the same result: "union" and "P4" differ only in that share."""
    if isinstance(params, ConsensusParams) and params.max_page_share < 1 and len(boxes):
        if not _page_sized(boxes, params.max_page_share).any():
            return replace(params, max_page_share=1.0)
    return params


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
    (7) With `titles`, text regions with heading evidence become ``headline`` (`_titles`).

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
        return _empty(boxes)
    if pairs is None:
        pairs = self_pairs(boxes.xyxy)
    if params.max_page_share < 1:
        # A member that fails on a page returns one page-sized box (CDLA's "figure" on old
        # scans): it is neither a region nor a vote for every box under it.
        page_sized = _page_sized(boxes, params.max_page_share)
        if page_sized.any():
            sel = np.flatnonzero(~page_sized)
            out = fuse_consensus(boxes[sel], replace(params, max_page_share=1.0), subset_pairs(pairs, ~page_sized), page)
            members = np.fromiter((sel[m].tolist() for m in out.data["member_idx"]), dtype=object, count=len(out))
            return Boxes(out.xyxy, out.score, out.label, out.meta, {**out.data, "member_idx": members})
    pre = _Prepared(boxes, pairs)
    coarse, is_line, textlike, src_names = pre.coarse, pre.is_line, pre.textlike, pre.src_names
    # (1) support: families whose compatible boxes cover each box.
    n_fam, sup_bits = pre.support(params.t_cover)

    region = ~is_line
    lines = take_rows(boxes.xyxy, is_line)
    keep = region & _voted(boxes, n_fam, lines, params)

    rank = _glob_rank(src_names, params.granularity)
    sw = _glob_weight(src_names, params.weights)[pre.src]
    weight = np.where(np.isnan(boxes.score), _NAN_SCORE_WEIGHT, boxes.score) * sw

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
        label = _titles(xyxy, label, take_rows(boxes.xyxy, region & (coarse == COARSE["title"])), lines)

    order = _order(xyxy, label, meta, lines, page)
    return Boxes(
        xyxy=xyxy, score=score.astype(np.float32), label=label, meta=meta,
        data={"member_idx": members, "support_bits": support, "order": order},
    )


_HEADLINE = np.int8(labels.label_code("headline"))


def _titles(xyxy: np.ndarray, label: np.ndarray, title_xyxy: np.ndarray, lines: np.ndarray,
            t_cover: float = 0.5, max_lines: int = 3, tall: float = 1.8) -> np.ndarray:
    """Labels with text regions that heading evidence calls titles relabelled ``headline``.

    Evidence: title boxes of the sources (Tesseract's heading types, layout models' titles)
    cover at least `t_cover` of the region, or it holds 1..`max_lines` text lines whose
    mean height is at least `tall` x the page's median line height (headlines and
    mastheads are set larger than body text). Averaging picks the label of the heaviest
    member, nearly always a body-text source, so without this headlines came out as text.
    """
    text = np.flatnonzero(coarse_codes(label) == COARSE["text"])
    if not len(text):
        return label
    is_title = np.zeros(len(text), bool)
    text_xyxy = take_rows(xyxy, text)
    if len(title_xyxy):
        p = cross_pairs(text_xyxy, title_xyxy)
        cov = np.bincount(p.i, p.inter, minlength=len(text)) / np.maximum(area(text_xyxy), _EPS)
        is_title |= cov >= t_cover
    if len(lines):
        mb, ml = inside_pairs(text_xyxy, lines)
        h = lines[:, 3] - lines[:, 1]
        n = np.bincount(mb, minlength=len(text))
        mean_h = np.bincount(mb, h[ml], minlength=len(text)) / np.maximum(n, 1)
        is_title |= (n >= 1) & (n <= max_lines) & (mean_h >= tall * float(np.median(h)))
    out = label.copy()
    out[text[is_title]] = _HEADLINE
    return out


def _empty(boxes: Boxes) -> Boxes:
    return Boxes(
        xyxy=np.zeros((0, 4)), score=np.zeros(0, np.float32), label=np.zeros(0, np.int8), meta=boxes.meta,
        data={"member_idx": np.zeros(0, object), "support_bits": np.zeros(0, np.int64),
              "order": np.zeros(0, np.int64)},
    )


def fuse_best_single(boxes: Boxes, params: BestSingleParams, pairs: Pairs | None = None,
                     choose: Callable[[Boxes], str] | None = None, page: PageLines | None = None) -> Boxes:
    """The boxes of one region source, chosen by `choose` (default: `metrics.best_source`)."""
    coarse = coarse_codes(boxes.label)
    region = coarse != COARSE["line"]
    if not region.any():
        return _empty(boxes)
    name = (choose or best_source)(boxes)
    names, src = column_codes(boxes, "source")
    k = int(np.searchsorted(names, name))
    idx = np.flatnonzero(region & (src == k)) if k < len(names) and names[k] == name else np.zeros(0, np.intp)
    bit = np.int64(1) << np.int64(k)
    members = _pieces(idx.tolist(), range(1, len(idx) + 1))   # each its own one-member list
    xyxy = boxes.xyxy[idx]
    return Boxes(
        xyxy=xyxy, score=boxes.score[idx], label=boxes.label[idx], meta=boxes.meta,
        data={"member_idx": members, "support_bits": np.full(len(idx), bit, np.int64),
              "order": _order(xyxy, boxes.label[idx], boxes.meta, boxes.xyxy[coarse == COARSE["line"]], page)},
    )


def _regroup(mem: np.ndarray, owner: np.ndarray, parent: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Member pairs (mem, owner) of regions after region k became regions where parent == k."""
    o = np.argsort(owner, kind="stable")
    mem, owner = mem[o], owner[o]
    n = max(int(owner.max()) + 1 if len(owner) else 0, int(parent.max()) + 1 if len(parent) else 0)
    start = np.searchsorted(owner, np.arange(n))
    count = np.bincount(owner, minlength=n)
    c = count[parent]
    pos = np.repeat(start[parent] - np.r_[0, np.cumsum(c)[:-1]], c) + np.arange(int(c.sum()))
    return mem[pos], np.repeat(np.arange(len(parent)), c)


@dataclass(frozen=True)
class _Blocks:
    """Paragraph regions while `fuse_paragraphs` builds them: input box ``mem[k]`` is a member of
    region ``owner[k]``."""

    xyxy: np.ndarray    # (R, 4)
    mem: np.ndarray     # (K,) indices into the input boxes
    owner: np.ndarray   # (K,) indices into `xyxy`

    def kept(self, keep: np.ndarray) -> _Blocks:
        """The regions where `keep` (R,) is true, with their members."""
        return _Blocks(self.xyxy[keep], *_regroup(self.mem, self.owner, np.flatnonzero(keep)))

    def replaced(self, cut: np.ndarray, parent: np.ndarray, pieces: np.ndarray) -> _Blocks:
        """Regions `cut` replaced by `pieces` (their members follow `parent`); the rest stay first."""
        if not len(cut):
            return self
        stay = np.setdiff1d(np.arange(len(self.xyxy)), cut)
        mem, owner = _regroup(self.mem, self.owner, np.concatenate([stay, parent]))
        return _Blocks(np.concatenate([self.xyxy[stay], pieces]), mem, owner)

    def appended(self, new_xyxy: np.ndarray, new_mem: np.ndarray, new_owner: np.ndarray) -> _Blocks:
        """Regions `new_xyxy` after the current ones; `new_mem` are members of new region `new_owner`."""
        return _Blocks(np.concatenate([self.xyxy, new_xyxy]), np.concatenate([self.mem, new_mem]),
                       np.concatenate([self.owner, len(self.xyxy) + np.asarray(new_owner, np.intp)]))


@dataclass(frozen=True)
class _ParagraphEvidence:
    """What `fuse_paragraphs` derives from its boxes before it builds a region (step 0, 1)."""

    coarse: np.ndarray        # (N,) coarse class codes
    is_line: np.ndarray       # (N,) bool, text lines (evidence only)
    region: np.ndarray        # (N,) bool, region boxes under `max_page_share`
    textlike: np.ndarray      # (N,) bool, text and title regions
    src: np.ndarray           # (N,) source codes
    rank: np.ndarray          # (S,) granularity rank of each source
    in_base: np.ndarray       # (N,) bool, the structure source's text blocks
    is_evidence: np.ndarray   # (N,) bool, text regions of the other families
    same_family: bool         # the text lines come from the structure source's family
    lines: np.ndarray         # (L, 4) text lines
    line_h: float             # their median height (0 without lines)
    pairs: Pairs | None       # overlapping pairs of the input, when the caller has them

    def evidence_pairs(self, mask: np.ndarray) -> Pairs | None:
        """Pairs of the boxes of `mask` with the evidence: from the caller's pairs (no tree over the evidence)."""
        return None if self.pairs is None else pairs_between(self.pairs, mask, self.is_evidence)


def _paragraph_evidence(boxes: Boxes, params: ParagraphParams, pairs: Pairs | None) -> _ParagraphEvidence:
    """Steps (0) and (1) of `fuse_paragraphs`: region boxes, the structure source's blocks, the evidence."""
    coarse = coarse_codes(boxes.label)
    is_line = coarse == COARSE["line"]
    region = ~is_line & ~_page_sized(boxes, params.max_page_share)
    textlike = region & _IS_TEXTLIKE[coarse]
    src_names, src = column_codes(boxes, "source")
    _, fam = column_codes(boxes, "family")
    rank = _glob_rank(src_names, params.granularity)
    lines = boxes.xyxy[is_line]
    in_base = np.zeros(len(boxes), bool)
    if textlike.any():
        key = rank[src[textlike]] * len(src_names) + src[textlike]
        in_base = textlike & (src == src[textlike][np.argmin(key)])
    base = np.flatnonzero(in_base)
    no_base = not len(base)
    return _ParagraphEvidence(
        coarse=coarse, is_line=is_line, region=region, textlike=textlike, src=src, rank=rank, in_base=in_base,
        is_evidence=np.zeros(len(boxes), bool) if no_base else textlike & (fam != fam[base[0]]),
        # The score rule needs the text-line detector's scale (a block's score is the mean text
        # probability of its lines): layout models' scores mean something else.
        same_family=not no_base and bool((fam[is_line] == fam[base[0]]).any()),
        lines=lines, line_h=float(np.median(lines[:, 3] - lines[:, 1])) if len(lines) else 0.0, pairs=pairs)


def fuse_paragraphs(boxes: Boxes, params: ParagraphParams, pairs: Pairs | None = None,
                    page: PageLines | None = None) -> Boxes:
    """Paragraph regions: the structure source's text blocks, corrected by the other members.

    Steps (`paragraphs` has each one): (0) boxes covering `max_page_share` of the page are
    left out. (1) The structure source is the first of `granularity` with text boxes on the
    page ("auto": the run's source leaderboard); its text blocks are the base. (2) Noise
    blocks no other family sees are dropped (`noise_mask`); low blocks built around another
    block across a column gutter become their lines (`unnest_blocks`, with `nest_share`).
    (3) Blocks are cut at gutters between side-by-side text boxes of the other families
    (`gutter_cuts`) and (4) at column gutters of the text lines (`segments.column_segments`,
    with `split_columns`). (5) With `join`, blocks of one column with no paragraph cue
    between them are joined (`join_pairs`). (5b) With `lines_match`, lines the regions leave
    out that another family boxes too become regions (`matched_lines`). (6) Image and table
    boxes of every source are added where no better-ranked source has one and no text region
    covers them. (7) With `titles`, text regions with heading evidence become ``headline``.
    Text lines (coarse class ``line``) are evidence only, except as regions of their own
    (5b: `lines_match`, `lines_back`), which are labelled ``text``. Support: the member
    sources plus every source whose same-class boxes cover `t_cover` of the region.
    """
    if len(boxes) == 0:
        return _empty(boxes)
    ev = _paragraph_evidence(boxes, params, pairs)
    base = np.flatnonzero(ev.in_base)
    blocks = _Blocks(boxes.xyxy[base], base.copy(), np.arange(len(base)))
    if len(ev.lines) and len(base):
        blocks = _corrected_blocks(blocks, boxes.score[base], boxes.xyxy[ev.is_evidence], ev, params,
                                   boxes.meta.width)
    extra = _other_classes(boxes, ev.region & ~ev.textlike, ev.coarse, ev.src, ev.rank, blocks.xyxy)
    blocks = blocks.appended(boxes.xyxy[extra], extra, np.arange(len(extra)))
    return _paragraph_boxes(boxes, blocks, ev, params, page)


def _corrected_blocks(blocks: _Blocks, base_score: np.ndarray, evidence: np.ndarray, ev: _ParagraphEvidence,
                      params: ParagraphParams, width: float) -> _Blocks:
    """Steps (2) to (5b) of `fuse_paragraphs` on the base blocks of a page with text lines.

    Args:
        base_score: (R,) scores of the base blocks; evidence: (E, 4) the other families' text regions.
    """
    lines, lh = ev.lines, ev.line_h
    tree = box_tree(lines)
    blocks = _denoised_blocks(blocks, base_score, evidence, ev, params, width, tree)
    if params.gutter_min_h > 0:
        cut, (parent, pieces) = gutter_cuts(blocks.xyxy, evidence, lines, lh, params.gutter_min_h, tree=tree)
        blocks = blocks.replaced(cut, parent, pieces)
    if params.split_columns:
        mb, ml = inside_pairs(blocks.xyxy, lines, tree=tree)
        n_cols, parent, seg = recipe_segments(blocks.xyxy, lines, mb, ml, params, width)
        blocks = blocks.replaced(np.flatnonzero(n_cols >= 2), parent, seg)
    if params.join:
        a, b = join_pairs(blocks.xyxy, lines, lh, params.join_gap, params.join_indent, params.join_short, tree=tree)
        if len(a):
            gid = connected_groups(len(blocks.xyxy), a, b)
            blocks = _Blocks(group_extent(blocks.xyxy, gid, int(gid.max()) + 1), blocks.mem, gid[blocks.owner])
    line_idx = np.flatnonzero(ev.is_line)
    if params.lines_match > 0:
        li = matched_lines(blocks.xyxy, lines, evidence, params.lines_match, pairs=ev.evidence_pairs(ev.is_line))
        blocks = blocks.appended(lines[li], line_idx[li], np.arange(len(li)))
    if params.lines_back:
        back, li, bid = lines_back(blocks.xyxy, lines, evidence, params.lines_back_cover, tree)
        blocks = blocks.appended(back, line_idx[li], bid)
    return blocks


def _denoised_blocks(blocks: _Blocks, base_score: np.ndarray, evidence: np.ndarray, ev: _ParagraphEvidence,
                     params: ParagraphParams, width: float, tree) -> _Blocks:
    """Step (2) of `fuse_paragraphs`: noise blocks dropped, nested blocks unnested."""
    keep = noise_mask(blocks.xyxy, base_score, evidence, ev.line_h, params.noise_h,
                      params.noise_score if ev.same_family else 0.0, params.noise_cover, params.noise_tall,
                      pairs=ev.evidence_pairs(ev.in_base))
    if params.nest_share > 0:
        # On the detector's own blocks, before noise goes: a dropped inner block still
        # shows that the outer one is not a paragraph. Pieces keep their block's verdict.
        gutters = column_bounds(ev.lines, width, 0.5 * ev.line_h)
        cut, (parent, pieces) = unnest_blocks(blocks.xyxy, ev.lines, gutters, ev.line_h, params.nest_share,
                                              params.nest_max_h, params.nest_poke, tree=tree)
        blocks = blocks.replaced(cut, parent, pieces)
        keep = np.r_[np.delete(keep, cut), keep[parent]]
    return blocks.kept(keep)


def _paragraph_boxes(boxes: Boxes, blocks: _Blocks, ev: _ParagraphEvidence, params: ParagraphParams,
                     page: PageLines | None) -> Boxes:
    """The finished regions of `fuse_paragraphs` as fused boxes: members, score, label, support, order."""
    meta, xyxy = boxes.meta, blocks.xyxy
    n = len(xyxy)
    # One member once per region (joins and cuts can repeat one), sorted by region then index.
    key = np.unique(blocks.owner.astype(np.int64) * len(boxes) + blocks.mem)
    own, flat = (key // len(boxes)).astype(np.intp), (key % len(boxes)).astype(np.intp)
    members = _split_by(flat, own, n)
    score = np.bincount(own, np.nan_to_num(boxes.score[flat].astype(np.float64), nan=_NAN_SCORE_WEIGHT), minlength=n)
    score = score / np.maximum(np.bincount(own, minlength=n), 1)
    first = np.r_[True, own[1:] != own[:-1]] if len(own) else np.zeros(0, bool)
    label = np.zeros(n, np.int8)
    label[own[first]] = boxes.label[flat[first]]
    label[coarse_codes(label) == COARSE["line"]] = _TEXT_CODE
    support = _support(xyxy, label, boxes, ev.region, ev.coarse, ev.src, flat, own, params.t_cover)
    if params.titles:
        label = _titles(xyxy, label, boxes.xyxy[ev.region & (ev.coarse == COARSE["title"])], ev.lines)
    return Boxes(
        xyxy=xyxy, score=score.astype(np.float32), label=label, meta=meta,
        data={"member_idx": members, "support_bits": support,
              "order": _order(xyxy, label, meta, ev.lines, page)},
    )


def _other_classes(boxes: Boxes, cand: np.ndarray, coarse: np.ndarray, src: np.ndarray, rank: np.ndarray,
                   text_xyxy: np.ndarray) -> np.ndarray:
    """Indices of image and table boxes kept: no better-ranked same-class box overlaps half of
    either, and text regions cover less than half of them."""
    idx = np.flatnonzero(cand & np.isin(coarse, [COARSE["image"], COARSE["table"]]))
    if not len(idx):
        return idx
    sub = boxes.xyxy[idx]
    p = cross_pairs(sub, sub)
    a = np.maximum(area(sub), _EPS)
    share = p.inter / np.minimum(a[p.i], a[p.j])
    r = rank[src[idx]] * (int(src.max()) + 1) + src[idx]
    worse = (p.i != p.j) & (coarse[idx][p.i] == coarse[idx][p.j]) & (share >= 0.5) & (
        (r[p.i] > r[p.j]) | ((r[p.i] == r[p.j]) & (p.i > p.j)))
    keep = np.ones(len(idx), bool)
    keep[p.i[worse]] = False
    t = cross_pairs(sub, text_xyxy)
    keep &= np.bincount(t.i, t.inter, minlength=len(idx)) / a < 0.5
    return idx[keep]


def _support(xyxy, label, boxes, region, coarse, src, flat, own, t_cover) -> np.ndarray:
    """(N,) int64 support bits: member sources plus sources whose same-class boxes cover `t_cover`."""
    n, n_src = len(xyxy), int(src.max()) + 1
    bit = np.int64(1) << np.arange(n_src, dtype=np.int64)
    support = np.zeros(n, np.int64)
    np.bitwise_or.at(support, own, bit[src[flat]])
    idx = np.flatnonzero(region)
    k_in = _TEXT_AS_ONE[coarse[idx]]
    k_out = _TEXT_AS_ONE[coarse_codes(label)]
    p = cross_pairs(xyxy, take_rows(boxes.xyxy, idx))
    ok = k_out[p.i] == k_in[p.j]
    cov = np.zeros(n * n_src)
    np.add.at(cov, p.i[ok] * n_src + src[idx[p.j[ok]]], p.inter[ok])
    cov = cov.reshape(n, n_src) / np.maximum(area(xyxy), _EPS)[:, None]
    return support | ((cov >= t_cover) * bit).sum(axis=1).astype(np.int64)


VARIANTS: dict[str, Callable[..., Boxes]] = {
    "consensus": fuse_consensus,
    "best_single": fuse_best_single,
    "paragraphs": fuse_paragraphs,
}


def member_records(boxes: Boxes) -> list[dict]:
    """One JSON member record per input box (``source``, ``bbox_xyxy``, ``label``, ``score``)."""
    return member_table_records(member_table(boxes), range(len(boxes)))


def member_table(boxes: Boxes) -> dict:
    """The member records of every input box as columns: build once per page, share across variants.

    Strings as codes into ``sources`` / ``labels``; `contract.member_table_records` gives back the records
    (a third of the bytes of a record list, and no dict per box to build and encode).
    """
    label_names = np.array(labels.LABELS, dtype=object)
    raw = boxes.data.get("raw_label", label_names[boxes.label.astype(np.intp)])
    src_names, src = column_codes(boxes, "source")
    raw = str_list(raw.tolist())
    raw_names = sorted(set(raw))
    lookup = {v: k for k, v in enumerate(raw_names)}
    return {"sources": src_names.tolist(), "labels": raw_names,
            "source": src.tolist(), "bbox_xyxy": np.round(boxes.xyxy, 2).tolist(),
            "label": list(map(lookup.__getitem__, raw)),
            "score": float_list(np.round(boxes.score.astype(np.float64), 4))}



def describe(fused: Boxes, boxes: Boxes, source: str, index: np.ndarray | None = None,
             table_sources: list[str] | None = None) -> Boxes:
    """Fused boxes with JSON-ready ``support``, ``members`` and ``source`` columns.

    Args:
        fused: output of a variant function run on `boxes`.
        boxes: that variant's input.
        source: the value of the ``source`` column ("fusion/<variant>").
        index: (len(boxes),) pool index of each box of `boxes`. With it, ``members`` holds
            pool indices (rows of the page's `member_table`, which the stage stores once per
            page for all variants); without it, the member records themselves.
        table_sources: that table's ``sources``; with it, ``support`` holds indices into them
            instead of the names (the names were 40 % of a fused page's bytes).
    """
    names = source_names(boxes).tolist()
    if table_sources is not None:
        position = {s: k for k, s in enumerate(table_sources)}
        names = [position[s] for s in names]
    n = len(fused)
    bits = fused.data["support_bits"].tolist()
    by_bits = {sb: [names[b] for b in range(len(names)) if sb >> b & 1] for sb in set(bits)}
    # One gather over all members, then slices: no numpy call per fused box, and the per-box
    # steps are C-level maps.
    parts = fused.data["member_idx"].tolist()
    ends = np.cumsum(np.fromiter(map(len, parts), np.intp, count=n)).tolist()
    flat = np.fromiter(chain.from_iterable(parts), np.intp, count=ends[-1] if n else 0)
    recs = (index[flat] if index is not None else flat).tolist()
    if index is None:
        table = member_records(boxes)
        recs = [table[m] for m in recs]
    # fromiter keeps each list one object (np.array would stack equal-length lists 2-D).
    support = np.fromiter(map(list, map(by_bits.__getitem__, bits)), dtype=object, count=n)
    members = _pieces(recs, ends)
    return Boxes(
        xyxy=fused.xyxy, score=fused.score, label=fused.label, meta=fused.meta,
        data={"support": support, "members": members, "order": fused.data["order"],
              "article": articles(fused), "source": np.full(len(fused), source, object)},
    )


def articles(fused: Boxes) -> np.ndarray:
    """(N,) article id of each text or title region in reading order (`articles.group_articles`), -1 for the rest."""
    coarse = coarse_codes(fused.label)
    read = np.flatnonzero((coarse == COARSE["text"]) | (coarse == COARSE["title"]))
    out = np.full(len(fused), -1, dtype=np.int64)
    order = fused.data["order"][read]
    rank = np.where(order >= 0, order, np.iinfo(np.int64).max)
    out[read] = group_articles(fused.xyxy[read], coarse[read] == COARSE["title"], rank)
    return out
