"""The recursive XY-cut that fusion/order.py used before the iterative one; tests only (89a66c1)."""

from __future__ import annotations

import numpy as np


def _cuts(lo: np.ndarray, hi: np.ndarray, tol: float) -> tuple[np.ndarray, np.ndarray]:
    """Sort intervals by `lo` and return (order, group id) where a gap > -tol starts a group."""
    order = np.argsort(lo, kind="stable")
    lo_s, hi_s = lo[order], hi[order]
    run = np.maximum.accumulate(hi_s)
    new = np.empty(len(order), bool)
    new[0] = True
    new[1:] = lo_s[1:] > run[:-1] - tol
    return order, np.cumsum(new) - 1


def _xycut(xyxy: np.ndarray, idx: np.ndarray, tol_x: float, tol_y: float, out: list) -> None:
    if len(idx) <= 1:
        out.extend(idx.tolist())
        return
    sub = xyxy[idx]
    # Columns first: a gutter that runs through the whole block splits it left to right;
    # only when there is none do we cut into horizontal bands (masthead, headline, body).
    for lo, hi, tol in ((sub[:, 0], sub[:, 2], tol_x), (sub[:, 1], sub[:, 3], tol_y)):
        order, group = _cuts(lo, hi, tol)
        if group[-1] > 0:
            parts = idx[order]
            bounds = [0, *(np.flatnonzero(np.diff(group)) + 1).tolist(), len(parts)]
            for a, b in zip(bounds[:-1], bounds[1:]):
                if b - a == 1:
                    out.append(int(parts[a]))
                else:
                    _xycut(xyxy, parts[a:b], tol_x, tol_y, out)
            return
    out.extend(idx[np.lexsort((sub[:, 0], sub[:, 1]))].tolist())


def reading_order_recursive(xyxy: np.ndarray, width: float, height: float, tol: float = 0.005) -> np.ndarray:
    """(N,) reading rank of each box: recursive XY-cut that prefers column cuts.

    Args:
        xyxy: (N, 4) boxes in page pixels.
        width, height: page size; overlaps below `tol` of it still count as a gap, because
            fused boxes of neighbouring columns often touch.

    >>> reading_order(np.zeros((0, 4)), 10, 10).shape
    (0,)
    """
    out: list[int] = []
    _xycut(np.asarray(xyxy, float), np.arange(len(xyxy)), tol * width, tol * height, out)
    rank = np.empty(len(xyxy), np.int64)
    rank[np.asarray(out, np.intp)] = np.arange(len(out))
    return rank
