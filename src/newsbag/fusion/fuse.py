"""Fusion variants: one function per method over pooled source boxes, listed in `VARIANTS`.

Input boxes carry ``data["source"]`` ("<stage>/<variant>") and ``data["family"]``; boxes
of coarse class ``line`` are text-line evidence, never output regions. Outputs carry
``data["member_idx"]`` (object array of int lists into the input) and
``data["support_bits"]`` (int64 bit set over `source_names(boxes)`); `describe` turns
them into the JSON ``support`` and ``members`` lists.
"""

from __future__ import annotations

from itertools import chain
from typing import Callable

import numpy as np

from .. import labels
from ..articles import group_articles
from ..contract import Boxes, column_codes, float_list, member_table_records, str_list
from ..labels import COARSE, coarse_codes
from .consensus import fuse_consensus
from .geometry import Pairs
from .metrics import best_source
from .order import PageLines
from .paragraph_regions import fuse_paragraphs
from .pooling import source_names
from .regions import empty_fused, list_pieces, region_order
from .options import BestSingleParams

__all__ = ["VARIANTS", "fuse_best_single", "describe", "articles", "member_records", "member_table"]


def fuse_best_single(boxes: Boxes, params: BestSingleParams, pairs: Pairs | None = None,
                     choose: Callable[[Boxes], str] | None = None, page: PageLines | None = None) -> Boxes:
    """The boxes of one region source, chosen by `choose` (default: `metrics.best_source`)."""
    coarse = coarse_codes(boxes.label)
    region = coarse != COARSE["line"]
    if not region.any():
        return empty_fused(boxes)
    name = (choose or best_source)(boxes)
    names, src = column_codes(boxes, "source")
    k = int(np.searchsorted(names, name))
    idx = np.flatnonzero(region & (src == k)) if k < len(names) and names[k] == name else np.zeros(0, np.intp)
    bit = np.int64(1) << np.int64(k)
    members = list_pieces(idx.tolist(), range(1, len(idx) + 1))   # each its own one-member list
    xyxy = boxes.xyxy[idx]
    return Boxes(
        xyxy=xyxy, score=boxes.score[idx], label=boxes.label[idx], meta=boxes.meta,
        data={"member_idx": members, "support_bits": np.full(len(idx), bit, np.int64),
              "order": region_order(xyxy, boxes.label[idx], boxes.meta, boxes.xyxy[coarse == COARSE["line"]], page)},
    )


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
    members = list_pieces(recs, ends)
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
