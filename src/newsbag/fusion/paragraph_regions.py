"""The ``paragraphs`` fusion method: the structure source's text blocks, corrected by the other
members (the steps themselves are in `paragraphs`)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .. import labels
from ..contract import Boxes, column_codes, take_rows
from ..labels import COARSE, coarse_codes
from .geometry import Pairs, area, box_tree, cross_pairs, group_extent, pairs_between
from .grid import column_bounds
from .match import connected_groups
from .order import PageLines
from .paragraphs import gutter_cuts, inside_pairs, join_pairs, lines_back, matched_lines, noise_mask, unnest_blocks
from .pooling import glob_rank, page_sized
from .regions import (EPS, IS_TEXTLIKE, NAN_SCORE_WEIGHT, TEXT_AS_ONE, empty_fused, region_order, split_by,
                      with_headlines)
from .segments import recipe_segments
from .options import ParagraphParams

__all__ = ["fuse_paragraphs"]

_TEXT_CODE = labels.label_code("text")


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
    region = ~is_line & ~page_sized(boxes, params.max_page_share)
    textlike = region & IS_TEXTLIKE[coarse]
    src_names, src = column_codes(boxes, "source")
    _, fam = column_codes(boxes, "family")
    rank = glob_rank(src_names, params.granularity)
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
        return empty_fused(boxes)
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
    members = split_by(flat, own, n)
    score = np.bincount(own, np.nan_to_num(boxes.score[flat].astype(np.float64), nan=NAN_SCORE_WEIGHT), minlength=n)
    score = score / np.maximum(np.bincount(own, minlength=n), 1)
    first = np.r_[True, own[1:] != own[:-1]] if len(own) else np.zeros(0, bool)
    label = np.zeros(n, np.int8)
    label[own[first]] = boxes.label[flat[first]]
    label[coarse_codes(label) == COARSE["line"]] = _TEXT_CODE
    support = _support(xyxy, label, boxes, ev.region, ev.coarse, ev.src, flat, own, params.t_cover)
    if params.titles:
        label = with_headlines(xyxy, label, boxes.xyxy[ev.region & (ev.coarse == COARSE["title"])], ev.lines)
    return Boxes(
        xyxy=xyxy, score=score.astype(np.float32), label=label, meta=meta,
        data={"member_idx": members, "support_bits": support,
              "order": region_order(xyxy, label, meta, ev.lines, page)},
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
    a = np.maximum(area(sub), EPS)
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
    k_in = TEXT_AS_ONE[coarse[idx]]
    k_out = TEXT_AS_ONE[coarse_codes(label)]
    p = cross_pairs(xyxy, take_rows(boxes.xyxy, idx))
    ok = k_out[p.i] == k_in[p.j]
    cov = np.zeros(n * n_src)
    np.add.at(cov, p.i[ok] * n_src + src[idx[p.j[ok]]], p.inter[ok])
    cov = cov.reshape(n, n_src) / np.maximum(area(xyxy), EPS)[:, None]
    return support | ((cov >= t_cover) * bit).sum(axis=1).astype(np.int64)
