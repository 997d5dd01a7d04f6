"""Source selection over a page's pooled boxes, shared by the fusion methods: source names
and their ranks and weights by glob, the boxes of chosen sources, page-sized boxes left out."""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from ..contract import Boxes, column_codes
from .geometry import Pairs, area, subset_pairs
from .options import BestSingleParams, ConsensusParams, ParagraphParams

__all__ = ["source_names", "glob_rank", "glob_weight", "take_sources", "page_sized", "effective_params"]


def source_names(boxes: Boxes) -> np.ndarray:
    """Sorted unique source names; ``support_bits`` bit k stands for entry k."""
    return column_codes(boxes, "source")[0]


def glob_rank(names: np.ndarray, globs: tuple[str, ...]) -> np.ndarray:
    import fnmatch

    rank = np.full(len(names), len(globs), np.int64)
    for k, g in reversed(list(enumerate(globs))):
        rank[[fnmatch.fnmatchcase(str(n), g) for n in names]] = k
    return rank


def glob_weight(names: np.ndarray, weights: tuple[tuple[str, float], ...]) -> np.ndarray:
    import fnmatch

    w = np.ones(len(names))
    for g, value in weights:
        w[[fnmatch.fnmatchcase(str(n), g) for n in names]] = value
    return w


def take_sources(pool: Boxes, pairs: Pairs, mask: np.ndarray) -> tuple[Boxes, Pairs]:
    """``pool[mask]`` and its overlapping pairs, for a variant over whole sources (`mask` takes
    every box of each source it takes). A mask that takes every box gives the pool itself (P4
    and the "*" recipes: no copy to make)."""
    if mask.all():
        return pool, pairs
    return pool[mask], subset_pairs(pairs, mask)


def page_sized(boxes: Boxes, share: float) -> np.ndarray:
    """(N,) bool: boxes covering `share` of the page or more (`max_page_share`)."""
    return area(boxes.xyxy) >= share * float(boxes.meta.width) * float(boxes.meta.height)


def effective_params(params: ConsensusParams | BestSingleParams | ParagraphParams, boxes: Boxes):
    """`params` as they act on `boxes`: a consensus `max_page_share` that no box reaches
    leaves nothing out, so it acts as 1. Variants with equal effective params over the same
    boxes give the same result: "union" and "P4" differ only in that share."""
    if isinstance(params, ConsensusParams) and params.max_page_share < 1 and len(boxes):
        if not page_sized(boxes, params.max_page_share).any():
            return replace(params, max_page_share=1.0)
    return params
