"""The dense N x N greedy NMS that runners/_picodet.py used before the sweep; tests only (89a66c1)."""

from __future__ import annotations

import numpy as np


def iou_matrix(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """(N, M) IoU of xyxy boxes ``a`` (N, 4) against ``b`` (M, 4); 0 where the union is empty."""
    lt = np.maximum(a[:, None, :2], b[None, :, :2])
    rb = np.minimum(a[:, None, 2:], b[None, :, 2:])
    inter = np.clip(rb - lt, 0, None).prod(axis=2)
    area_a = np.clip(a[:, 2:] - a[:, :2], 0, None).prod(axis=1)
    area_b = np.clip(b[:, 2:] - b[:, :2], 0, None).prod(axis=1)
    union = area_a[:, None] + area_b[None, :] - inter
    return np.divide(inter, union, out=np.zeros_like(inter, dtype=np.float64), where=union > 0)


def nms_per_class_dense(boxes: np.ndarray, scores: np.ndarray, classes: np.ndarray,
                  iou_threshold: float) -> np.ndarray:
    """Greedy NMS within each class; indices of kept boxes, highest score first.

    Args:
        boxes: (N, 4) xyxy; scores: (N,); classes: (N,) int.
        iou_threshold: a box is dropped when its IoU with a kept, higher-scoring box of
            the same class is above this.

    Returns:
        (K,) int64 indices into the inputs.
    """
    n = boxes.shape[0]
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    order = np.argsort(-scores, kind="stable")
    iou = iou_matrix(boxes[order], boxes[order])
    same = classes[order][:, None] == classes[order][None, :]
    # suppress[i, j]: i (higher score) would remove j if i is kept.
    suppress = np.triu((iou > iou_threshold) & same, k=1)
    keep = np.ones(n, dtype=bool)
    for i in range(n):  # one pass over candidates; each step is a vectorised row
        if keep[i]:
            keep &= ~suppress[i]
    return order[keep]
