"""Steps every fusion method shares on its output regions: member lists, reading order,
headline evidence, the empty result. Fused boxes carry ``data["member_idx"]``,
``data["support_bits"]`` and ``data["order"]`` (see `fuse`)."""

from __future__ import annotations

import numpy as np

from .. import labels
from ..contract import Boxes, take_rows
from ..labels import COARSE, coarse_codes
from .geometry import area, cross_pairs
from .order import PageLines, reading_order
from .paragraphs import inside_pairs

__all__ = ["IS_TEXTLIKE", "TEXT_AS_ONE", "NAN_SCORE_WEIGHT", "EPS", "split_by", "list_pieces", "region_order",
           "with_headlines", "empty_fused"]

# By coarse code (lookups instead of np.isin, ~30 us a call on these small arrays): text and
# titles, and the class a box counts as when text and titles count as one.
IS_TEXTLIKE = np.isin(np.arange(len(COARSE)), [COARSE["text"], COARSE["title"]])
TEXT_AS_ONE = np.where(IS_TEXTLIKE, COARSE["text"], np.arange(len(COARSE)))
# Unscored boxes (MinerU) weigh like a middling score in coordinate averaging.
NAN_SCORE_WEIGHT = 0.5
EPS = 1e-9


def split_by(values: np.ndarray, owner: np.ndarray, n: int) -> np.ndarray:
    """(n,) object array: entry k lists the `values` whose `owner` is k (owner -1: none).

    Lists, not array views: a page's variants make thousands of them, and views cost 1.3 % of
    a 6 x 300-box page's instructions more to make and free (callgrind)."""
    if n == 0:   # most rounds replace no container
        return np.zeros(0, object)
    ok = owner >= 0
    mine = owner[ok]
    o = np.argsort(mine, kind="stable")
    flat = values[ok][o]
    return list_pieces(flat.tolist(), np.cumsum(np.bincount(mine, minlength=n)).tolist())


def list_pieces(seq, ends: list[int]) -> np.ndarray:
    """(len(ends),) object array of the consecutive slices ``seq[0:ends[0]], seq[ends[0]:ends[1]], ...``
    (C-level maps: no Python step per piece)."""
    return np.fromiter(map(seq.__getitem__, map(slice, [0, *ends[:-1]], ends)), dtype=object, count=len(ends))


def region_order(xyxy: np.ndarray, label: np.ndarray, meta, lines: np.ndarray, page: PageLines | None) -> np.ndarray:
    """Reading rank of fused regions (`order.reading_order`, on the page's `PageLines` if they hold `lines`)."""
    ev = page if page is not None and page.holds(lines, meta.width) else lines
    return reading_order(xyxy, meta.width, meta.height, lines=ev, text=coarse_codes(label) == COARSE["text"])


_HEADLINE = np.int8(labels.label_code("headline"))


def with_headlines(xyxy: np.ndarray, label: np.ndarray, title_xyxy: np.ndarray, lines: np.ndarray,
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
        cov = np.bincount(p.i, p.inter, minlength=len(text)) / np.maximum(area(text_xyxy), EPS)
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


def empty_fused(boxes: Boxes) -> Boxes:
    return Boxes(
        xyxy=np.zeros((0, 4)), score=np.zeros(0, np.float32), label=np.zeros(0, np.int8), meta=boxes.meta,
        data={"member_idx": np.zeros(0, object), "support_bits": np.zeros(0, np.int64),
              "order": np.zeros(0, np.int64)},
    )
