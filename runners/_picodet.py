"""Pure numpy pre/post-processing for PP-PicoDet (GFL head) and PaddleDetection ONNX exports.

No model library and no cv2 here: resize, normalisation, GFL box decoding and per-class
NMS are array functions that the runners and their tests call directly.
"""

from __future__ import annotations

import numpy as np

import _sweep

__all__ = [
    "IMAGENET_MEAN",
    "IMAGENET_STD",
    "resize_bilinear",
    "to_input_tensor",
    "anchor_centres",
    "decode_gfl_level",
    "decode_gfl",
    "iou_matrix",
    "nms_per_class",
]

IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)


def _axis_taps(n_out: int, n_in: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Source indices (i0, i1) and weight of i1 for one axis, OpenCV INTER_LINEAR rules.

    Half-pixel centres: src = (dst + 0.5) * n_in / n_out - 0.5, clamped at 0 on the left and
    to the last pixel on the right, exactly as cv2.resize does (no antialiasing).
    """
    src = (np.arange(n_out, dtype=np.float64) + 0.5) * (n_in / n_out) - 0.5
    src = np.clip(src, 0.0, None)
    i0 = np.floor(src).astype(np.int64)
    frac = src - i0
    i0 = np.minimum(i0, n_in - 1)
    i1 = np.minimum(i0 + 1, n_in - 1)
    frac = np.where(i0 == n_in - 1, 0.0, frac)
    return i0, i1, frac.astype(np.float32)


def resize_bilinear(image: np.ndarray, out_hw: tuple[int, int]) -> np.ndarray:
    """Resize like ``cv2.resize(..., interpolation=INTER_LINEAR)`` (no antialias).

    PP-PicoDet and PP-OCR were trained on OpenCV resizes; an antialiased (Pillow) downscale
    changes CDLA's output a lot: ~33 blocks vs ~5 on a clean page
    (docs/design.md, Models that run without a download).

    Args:
        image: (H, W) or (H, W, C) array, any numeric dtype.
        out_hw: (height, width) of the result, both >= 1.

    Returns:
        float32 array of shape (out_h, out_w) or (out_h, out_w, C).
    """
    out_h, out_w = int(out_hw[0]), int(out_hw[1])
    if out_h < 1 or out_w < 1:
        raise ValueError(f"resize target must be at least 1x1, got {out_h}x{out_w}")
    in_h, in_w = image.shape[:2]
    y0, y1, fy = _axis_taps(out_h, in_h)
    x0, x1, fx = _axis_taps(out_w, in_w)
    extra = (1,) * (image.ndim - 2)
    # Rows first: the intermediate has out_h rows, so a big downscale touches few pixels.
    top = image[y0].astype(np.float32)
    rows = top + (image[y1].astype(np.float32) - top) * fy.reshape((-1, 1) + extra)
    left = rows[:, x0]
    return left + (rows[:, x1] - left) * fx.reshape((1, -1) + extra)


def to_input_tensor(image: np.ndarray, out_hw: tuple[int, int], mean=IMAGENET_MEAN,
                    std=IMAGENET_STD, bgr: bool = True) -> np.ndarray:
    """(1, 3, h, w) float32 network input: resize, /255, (x - mean) / std, CHW.

    Args:
        image: (H, W) grey or (H, W, 3) RGB uint8 page. Grey pages are resized once and
            then broadcast to three channels (3x cheaper on the usual newspaper scans).
        out_hw: network input (height, width).
        mean, std: per-channel statistics in the model's channel order.
        bgr: feed channels as B, G, R. Paddle models are trained on cv2-decoded images.
    """
    resized = resize_bilinear(image, out_hw)
    if resized.ndim == 2:
        resized = np.repeat(resized[:, :, None], 3, axis=2)
    elif bgr:
        resized = resized[:, :, ::-1]
    mean_a = np.asarray(mean, dtype=np.float32) * 255.0
    std_a = np.asarray(std, dtype=np.float32) * 255.0
    chw = ((resized - mean_a) / std_a).transpose(2, 0, 1)
    return np.ascontiguousarray(chw[None], dtype=np.float32)


def anchor_centres(input_hw: tuple[int, int], stride: int) -> np.ndarray:
    """(N, 2) anchor centres (x, y) of one level, row-major over a ceil(H/s) x ceil(W/s) grid."""
    rows = -(-int(input_hw[0]) // stride)
    cols = -(-int(input_hw[1]) // stride)
    yy, xx = np.meshgrid(np.arange(rows), np.arange(cols), indexing="ij")
    return np.stack([(xx.ravel() + 0.5) * stride, (yy.ravel() + 0.5) * stride], axis=1)


def decode_gfl_level(dist: np.ndarray, centres: np.ndarray, stride: int) -> np.ndarray:
    """Boxes of one level from GFL distributions.

    Args:
        dist: (N, 4 * B) logits: for each side (left, top, right, bottom) B bins.
        centres: (N, 2) anchor centres (x, y) in input pixels.
        stride: the level's stride.

    Returns:
        (N, 4) xyxy in network-input pixels: centre -/+ stride * E[bin] per side.
    """
    n = dist.shape[0]
    logits = dist.reshape(n, 4, -1).astype(np.float64)
    logits = logits - logits.max(axis=2, keepdims=True)
    prob = np.exp(logits)
    prob /= prob.sum(axis=2, keepdims=True)
    distance = (prob * np.arange(prob.shape[2])).sum(axis=2) * stride  # (N, 4) l, t, r, b
    cx, cy = centres[:, 0], centres[:, 1]
    return np.stack([cx - distance[:, 0], cy - distance[:, 1],
                     cx + distance[:, 2], cy + distance[:, 3]], axis=1)


def decode_gfl(score_levels, dist_levels, input_hw, strides=(8, 16, 32, 64)):
    """All levels: (M, 4) xyxy in input pixels and (M, C) class scores (already sigmoid)."""
    boxes, scores = [], []
    for score, dist, stride in zip(score_levels, dist_levels, strides):
        score = np.asarray(score).reshape(-1, np.asarray(score).shape[-1])
        dist = np.asarray(dist).reshape(score.shape[0], -1)
        centres = anchor_centres(input_hw, stride)
        if centres.shape[0] != score.shape[0]:
            raise ValueError(f"stride {stride}: {score.shape[0]} anchors from the model, "
                             f"{centres.shape[0]} from a {input_hw[0]}x{input_hw[1]} grid")
        boxes.append(decode_gfl_level(dist, centres, stride))
        scores.append(score)
    return np.concatenate(boxes), np.concatenate(scores)


def iou_matrix(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """(N, M) IoU of xyxy boxes ``a`` (N, 4) against ``b`` (M, 4); 0 where the union is empty."""
    lt = np.maximum(a[:, None, :2], b[None, :, :2])
    rb = np.minimum(a[:, None, 2:], b[None, :, 2:])
    inter = np.clip(rb - lt, 0, None).prod(axis=2)
    area_a = np.clip(a[:, 2:] - a[:, :2], 0, None).prod(axis=1)
    area_b = np.clip(b[:, 2:] - b[:, :2], 0, None).prod(axis=1)
    union = area_a[:, None] + area_b[None, :] - inter
    return np.divide(inter, union, out=np.zeros_like(inter, dtype=np.float64), where=union > 0)


def _iou_pairs(boxes: np.ndarray, i: np.ndarray, j: np.ndarray) -> np.ndarray:
    """(K,) IoU of the pairs (boxes[i], boxes[j]); the same arithmetic as ``iou_matrix``."""
    x0, y0, x1, y1 = (np.ascontiguousarray(boxes[:, k]) for k in range(4))
    inter = (np.clip(np.minimum(x1[i], x1[j]) - np.maximum(x0[i], x0[j]), 0, None)
             * np.clip(np.minimum(y1[i], y1[j]) - np.maximum(y0[i], y0[j]), 0, None))
    area = np.clip(x1 - x0, 0, None) * np.clip(y1 - y0, 0, None)
    union = area[i] + area[j] - inter
    return np.divide(inter, union, out=np.zeros_like(inter, dtype=np.float64), where=union > 0)


def nms_per_class(boxes: np.ndarray, scores: np.ndarray, classes: np.ndarray,
                  iou_threshold: float) -> np.ndarray:
    """Greedy NMS within each class; indices of kept boxes, highest score first.

    Candidate pairs come from a sweep over left edges, not an N x N matrix: IoU > t needs
    an x-overlap above t x the wider box's width (IoU <= overlap / width of the wider box),
    so the wider box's left edge lies within (1 - t) x its width of the other's. 20,000
    candidates (a lowered score threshold): well under a second, where N x N took minutes and GBs.

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
    boxes = np.asarray(boxes, dtype=np.float64)
    order = np.argsort(-scores, kind="stable")
    rank = np.empty(n, np.int64)
    rank[order] = np.arange(n)
    src, dst = [], []
    for cls in np.unique(classes):
        members = np.flatnonzero(classes == cls)
        sub = boxes[members]
        if iou_threshold < 0:  # IoU 0 is above the threshold: every pair of the class
            i, j = np.nonzero(~np.eye(members.size, dtype=bool))
        else:
            w = np.clip(sub[:, 2] - sub[:, 0], 0, None)
            reach = (1 - min(iou_threshold, 1.0)) * w + 1e-6 * (np.abs(sub[:, 0]) + w + 1)
            i, j = _sweep.window_pairs(sub[:, 0], sub[:, 0] - reach, sub[:, 0] + reach)
        i, j = members[i], members[j]
        # Orient every pair from the higher-ranked box (which would suppress) to the lower;
        # a pair found from both windows just gives a duplicate edge.
        i, j = np.where(rank[i] < rank[j], i, j), np.where(rank[i] < rank[j], j, i)
        hit = _iou_pairs(boxes, i, j) > iou_threshold
        src.append(i[hit])
        dst.append(j[hit])
    src, dst = np.concatenate(src), np.concatenate(dst)
    # Visit suppressors in score order: a box's own suppressors all rank above it, so its
    # keep flag is final when its turn comes. Only boxes with edges are visited.
    by_rank = np.lexsort((rank[dst], rank[src]))
    src, dst = src[by_rank], dst[by_rank]
    bounds = np.flatnonzero(np.r_[True, src[1:] != src[:-1], True]) if src.size else np.zeros(1, np.int64)
    keep = np.ones(n, dtype=bool)
    for a, b in zip(bounds[:-1].tolist(), bounds[1:].tolist()):
        if keep[src[a]]:
            keep[dst[a:b]] = False
    return order[keep[order]]
