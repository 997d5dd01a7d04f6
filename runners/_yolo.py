"""YOLOv8 pre/post-processing in numpy: letterbox, decode [1, 4+C, N], class-agnostic NMS, un-letterbox.

Follows Ultralytics semantics (LetterBox with centred padding, ``non_max_suppression``
with ``agnostic=True``, ``scale_boxes``) so an exported ONNX model gives the same boxes
without a checkout of ultralytics or of the American Stories repository.
"""

from __future__ import annotations

import numpy as np

__all__ = ["resize_bilinear", "letterbox", "decode_yolov8", "nms_xyxy", "unletterbox_xyxy"]


def resize_bilinear(image: np.ndarray, size_wh: tuple[int, int]) -> np.ndarray:
    """Bilinear resize with OpenCV INTER_LINEAR semantics (half-pixel centres, no antialias).

    Args:
        image: (H, W, C) uint8.
        size_wh: target (width, height).

    Returns:
        (height, width, C) uint8.
    """
    h, w = image.shape[:2]
    out_w, out_h = int(size_wh[0]), int(size_wh[1])
    if (out_w, out_h) == (w, h):
        return image.copy()

    def axis(n_out: int, n_in: int):
        src = (np.arange(n_out, dtype=np.float64) + 0.5) * (n_in / n_out) - 0.5
        src = np.clip(src, 0.0, n_in - 1)
        i0 = np.floor(src).astype(np.intp)
        i1 = np.minimum(i0 + 1, n_in - 1)
        return i0, i1, (src - i0).astype(np.float32)

    y0, y1, wy = axis(out_h, h)
    x0, x1, wx = axis(out_w, w)
    img = image.astype(np.float32)
    rows = img[y0] * (1.0 - wy)[:, None, None] + img[y1] * wy[:, None, None]
    out = rows[:, x0] * (1.0 - wx)[None, :, None] + rows[:, x1] * wx[None, :, None]
    return np.clip(np.rint(out), 0, 255).astype(np.uint8)


def letterbox(image: np.ndarray, size: int = 1280, pad_value: int = 114):
    """Resize keeping aspect so the long side is `size`, pad the rest with `pad_value`, centred.

    Args:
        image: (H, W, 3) uint8 RGB.
        size: square model input side in pixels.
        pad_value: grey level of the padding (Ultralytics uses 114).

    Returns:
        (canvas (size, size, 3) uint8, gain, (pad_left, pad_top)) where a point p of the
        original maps to p * gain + pad in the canvas.
    """
    h, w = image.shape[:2]
    gain = min(size / h, size / w)
    new_w, new_h = int(round(w * gain)), int(round(h * gain))
    dw, dh = (size - new_w) / 2.0, (size - new_h) / 2.0
    # Ultralytics splits an odd padding with round(d -/+ 0.1).
    top, left = int(round(dh - 0.1)), int(round(dw - 0.1))
    canvas = np.full((size, size, 3), pad_value, dtype=np.uint8)
    canvas[top:top + new_h, left:left + new_w] = resize_bilinear(image, (new_w, new_h))
    return canvas, gain, (left, top)


def decode_yolov8(output: np.ndarray, conf: float):
    """Boxes above `conf` from a YOLOv8 head output (no objectness column).

    Args:
        output: (1, 4 + C, N) or (4 + C, N): rows cx, cy, w, h (input pixels) then C class scores.
        conf: keep boxes whose best class score is > conf.

    Returns:
        (xyxy (K, 4) float64 in model-input pixels, score (K,) float32, class_id (K,) int64).
    """
    pred = np.asarray(output)
    if pred.ndim == 3:
        if pred.shape[0] != 1:
            raise ValueError(f"expected batch 1 output, got shape {pred.shape}")
        pred = pred[0]
    if pred.ndim != 2 or pred.shape[0] < 5:
        raise ValueError(f"expected output (1, 4+C, N), got shape {np.shape(output)}")
    cls_scores = pred[4:]
    class_id = cls_scores.argmax(axis=0)
    score = cls_scores[class_id, np.arange(pred.shape[1])]
    keep = score > conf
    cx, cy, bw, bh = (pred[i, keep].astype(np.float64) for i in range(4))
    xyxy = np.stack([cx - bw / 2, cy - bh / 2, cx + bw / 2, cy + bh / 2], axis=1)
    return xyxy.reshape(-1, 4), score[keep].astype(np.float32), class_id[keep].astype(np.int64)


def nms_xyxy(xyxy: np.ndarray, score: np.ndarray, iou: float, max_det: int = 0) -> np.ndarray:
    """Greedy class-agnostic NMS; indices of kept boxes, best score first.

    Each step suppresses, in one vectorised IoU row, every remaining box that overlaps the
    current best by more than `iou` (torchvision.ops.nms semantics: suppress if IoU > iou).

    Args:
        xyxy: (N, 4) boxes.
        score: (N,) scores.
        iou: suppression threshold.
        max_det: keep at most this many (0 = no cap).

    Returns:
        (K,) int64 indices into the inputs.
    """
    order = np.argsort(-np.asarray(score, dtype=np.float64), kind="stable")
    boxes = np.asarray(xyxy, dtype=np.float64)
    area = np.clip(boxes[:, 2] - boxes[:, 0], 0, None) * np.clip(boxes[:, 3] - boxes[:, 1], 0, None)
    keep = []
    while order.size:
        best, rest = order[0], order[1:]
        keep.append(best)
        if max_det and len(keep) >= max_det:
            break
        ix0 = np.maximum(boxes[best, 0], boxes[rest, 0])
        iy0 = np.maximum(boxes[best, 1], boxes[rest, 1])
        ix1 = np.minimum(boxes[best, 2], boxes[rest, 2])
        iy1 = np.minimum(boxes[best, 3], boxes[rest, 3])
        inter = np.clip(ix1 - ix0, 0, None) * np.clip(iy1 - iy0, 0, None)
        union = area[best] + area[rest] - inter
        overlap = np.divide(inter, union, out=np.zeros_like(inter), where=union > 0)
        order = rest[overlap <= iou]
    return np.asarray(keep, dtype=np.int64)


def unletterbox_xyxy(xyxy: np.ndarray, gain: float, pad: tuple[int, int], width: int, height: int) -> np.ndarray:
    """Map boxes from the letterboxed canvas back to original pixels, clipped to the image.

    Args:
        xyxy: (N, 4) canvas pixels.
        gain, pad: as returned by `letterbox`.
        width, height: original image size.

    Returns:
        (N, 4) float64 original pixels (a new array).
    """
    out = np.asarray(xyxy, dtype=np.float64).reshape(-1, 4).copy()
    out[:, [0, 2]] = (out[:, [0, 2]] - pad[0]) / gain
    out[:, [1, 3]] = (out[:, [1, 3]] - pad[1]) / gain
    out[:, [0, 2]] = out[:, [0, 2]].clip(0, width)
    out[:, [1, 3]] = out[:, [1, 3]].clip(0, height)
    return out
