"""Cross-source matching: which boxes are evidence for each other, and their groups."""

from __future__ import annotations

import numpy as np

from .geometry import Pairs, area

__all__ = ["pair_scores", "connected_groups"]


def pair_scores(xyxy: np.ndarray, pairs: Pairs) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """IoU, share of box i inside box j, and share of box j inside box i, each (K,)."""
    a = area(xyxy)
    ai, aj = a[pairs.i], a[pairs.j]
    union = ai + aj - pairs.inter
    iou = np.divide(pairs.inter, union, out=np.zeros_like(pairs.inter), where=union > 0)
    ioa_i = np.divide(pairs.inter, ai, out=np.zeros_like(pairs.inter), where=ai > 0)
    ioa_j = np.divide(pairs.inter, aj, out=np.zeros_like(pairs.inter), where=aj > 0)
    return iou, ioa_i, ioa_j


def connected_groups(n: int, i: np.ndarray, j: np.ndarray) -> np.ndarray:
    """(n,) group ids 0..G-1 of the connected components of the edges (i[k], j[k]).

    Min-label propagation with pointer jumping: each round is vectorised and the number of
    rounds grows with the log of the component diameter. Ids follow the first member.

    >>> connected_groups(3, np.array([], int), np.array([], int)).tolist()
    [0, 1, 2]
    """
    lab = np.arange(n)
    if len(i):
        while True:
            m = np.minimum(lab[i], lab[j])
            new = lab.copy()
            np.minimum.at(new, i, m)
            np.minimum.at(new, j, m)
            new = new[new]
            while True:
                jumped = new[new]
                if np.array_equal(jumped, new):
                    break
                new = jumped
            if np.array_equal(new, lab):
                break
            lab = new
    # Every label is a root (lab[lab] == lab): number the roots in index order, as np.unique
    # would, without its sort.
    return (np.cumsum(lab == np.arange(n)) - 1)[lab]
