"""The pages tuning fits on: each page's source boxes pooled once, its ground truth, and scoring a candidate on them.

A trial fuses every page in this process from what `load_pages` holds: no file is read and
no model runs again, and the pool's overlapping pairs are computed once per page, not per trial.
Scores are `evaluate`'s: text IoU-F1 and pixel F1 of the text class, in the annotation's pixels.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

from .. import labels, rundir
from ..contract import Boxes
from ..errors import InputError, first_line
from ..evaluate import LONG_SIDE, PRED_CLASS, eval_classes, gt_scale, page_metrics_by_class
from ..fusion.fuse import VARIANTS
from ..fusion.pooling import take_sources
from ..fusion.geometry import Pairs
from ..fusion.metrics import iou_f1, pixel_prf, union_mask
from ..fusion.page import pool_sources
from ..fusion.options import FusionConfig
from ..groundtruth import GtPage, match_pages
from ..page_reader import read_source_boxes
from .protocol import issue_key
from .space import Candidate

__all__ = ["TunePage", "load_pages", "score_candidate", "Scores"]

log = logging.getLogger(__name__)

# Coarse codes `evaluate` counts as predicted text (text, title, text line).
_TEXT_CODES = np.array([labels.COARSE[c] for c, kind in PRED_CLASS.items() if kind == "text"])


@dataclass
class TunePage:
    """One ground-truth page, loaded once per tune."""

    page_id: str
    issue: str                        # `protocol.issue_key` of its path
    pool: Boxes                       # every source box of the page
    pairs: Pairs                      # its overlapping pairs
    line_mask: np.ndarray             # (N,) the text-line evidence
    gt_text: np.ndarray               # (G, 4) ground-truth text boxes, annotation pixels
    gt_mask: np.ndarray               # their union, rasterised as `evaluate` does
    scale: tuple[float, float]        # run page pixels -> annotation pixels
    size: tuple[float, float]         # annotation width, height
    current: tuple[float, float]      # the current recommendation's (iou_f1, pixel_f1), from its stored page
    _taken: dict = field(default_factory=dict)   # member tuple -> (boxes, pairs)

    def take(self, members: tuple[str, ...]) -> tuple[Boxes, Pairs]:
        """The pool's boxes of `members` and the text lines, with their pairs (cached per member set)."""
        if members not in self._taken:
            mask = np.isin(self.pool.data["source"], members) | self.line_mask
            self._taken[members] = take_sources(self.pool, self.pairs, mask)
        return self._taken[members]


@dataclass(frozen=True)
class Scores:
    iou_f1: np.ndarray     # (P,) per page
    pixel_f1: np.ndarray   # (P,)


def _text_scores(page: TunePage, xyxy: np.ndarray) -> tuple[float, float]:
    pred = np.asarray(xyxy, float).reshape(-1, 4) * np.array([*page.scale, *page.scale])
    mask = union_mask(pred, *page.size, LONG_SIDE)
    return iou_f1(pred, page.gt_text), pixel_prf(mask, page.gt_mask)[2]


def score_candidate(pages: list[TunePage], c: Candidate, order: tuple[str, ...]) -> Scores:
    """Fuse each page with `c` and score its text against the ground truth.

    `order`: the run's source order, which an empty or "auto" granularity stands for (as fusion
    resolves ``"granularity": "auto"``). No member: every page scores 0.
    """
    params = c.params
    if getattr(params, "granularity", None) in ((), ("auto",)):
        params = replace(params, granularity=order)
    iou, pix = np.zeros(len(pages)), np.zeros(len(pages))
    if not c.members:
        return Scores(iou, pix)
    fn = VARIANTS[c.method]
    for k, page in enumerate(pages):
        boxes, pairs = page.take(c.members)
        fused = fn(boxes, params, pairs)
        text = np.isin(labels.coarse_codes(fused.label), _TEXT_CODES)
        iou[k], pix[k] = _text_scores(page, fused.xyxy[text])
    return Scores(np.nan_to_num(iou), np.nan_to_num(pix))


def _gt_text(gt: GtPage) -> np.ndarray:
    """(G, 4) the page's ground-truth text boxes in its own pixels, as `evaluate` scores them."""
    return gt.xyxy[eval_classes(gt) == "text"].reshape(-1, 4)


def _load_one(run_dir: Path, rec: dict, ann: GtPage, gt: np.ndarray, cfg: FusionConfig, sources: list[str],
              current: str) -> TunePage:
    """A page with ground truth `ann` and its text boxes `gt` (`_gt_text`)."""
    pid = rec["page_id"]
    boxes = {}
    for s in sources:
        path = rundir.sources_root(run_dir) / s / f"{pid}.json"
        if path.exists():
            boxes[s] = read_source_boxes(path, pid, s)[0]
    if not boxes:
        raise ValueError("no source has an output for it")
    pooled = pool_sources(boxes, cfg)
    by_class, absent = page_metrics_by_class(rundir.fused_dir(run_dir, current), rec, ann)
    if absent:
        raise ValueError(f"the recommended variant {current} has no output for it; run fusion first")
    size = (float(ann.width), float(ann.height))
    return TunePage(pid, issue_key(rec["path"]), pooled.pool, pooled.pairs, pooled.line_mask, gt,
                    union_mask(gt, *size, LONG_SIDE), gt_scale(rec, ann), size,
                    (float(np.nan_to_num(by_class["text"]["iou_f1"])), float(np.nan_to_num(by_class["text"]["pixel_f1"]))))


def load_pages(run_dir: Path, gt_dir: Path, cfg: FusionConfig, current: str) -> tuple[list[TunePage], dict[str, str]]:
    """Every run page with text ground truth, loaded once; and the pages left out -> why
    (ground truth unusable or without text, no source output)."""
    run_dir = Path(run_dir)
    matched, _, bad = match_pages(run_dir, gt_dir)
    skipped = dict(bad)
    sources = rundir.discover_sources(run_dir)
    pages = []
    for rec, ann in matched:
        gt = _gt_text(ann)
        if not len(gt):
            skipped[rec["page_id"]] = "its ground truth has no text region"
            continue
        try:
            pages.append(_load_one(run_dir, rec, ann, gt, cfg, sources, current))
        except (ValueError, KeyError, TypeError) as exc:
            skipped[rec["page_id"]] = first_line(exc)
    for name, why in skipped.items():
        log.warning("tune: %s: %s; skipped", name, why)
    if len(pages) < 2:
        raise InputError(f"tune: {len(pages)} page(s) with text ground truth in {gt_dir}; at least 2 are needed")
    return pages, skipped
