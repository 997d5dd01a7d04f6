"""The one-region-at-a-time article walk that articles.py used before the vectorised one; tests only."""

from __future__ import annotations

import numpy as np


def _same_column(a, b, min_share: float = 0.5) -> bool:
    overlap = min(a[2], b[2]) - max(a[0], b[0])
    return overlap >= min_share * min(a[2] - a[0], b[2] - b[0])


def group_articles_walk(xyxy: np.ndarray, is_title: np.ndarray, rank: np.ndarray) -> np.ndarray:
    xyxy = np.asarray(xyxy, dtype=np.float64).reshape(-1, 4)
    article = [-1] * xyxy.shape[0]
    boxes = xyxy.tolist()
    titles = np.asarray(is_title, dtype=bool).tolist()
    current = -1
    head = None
    last = None
    last_title = False
    for i in np.argsort(np.asarray(rank), kind="stable").tolist():
        box = boxes[i]
        if titles[i]:
            deck = last_title and last is not None and _same_column(box, last) and box[1] >= last[1]
            if not deck:
                current += 1
                head = list(box)
            else:
                head = [min(head[0], box[0]), head[1], max(head[2], box[2]), box[3]]
        else:
            below = last is not None and _same_column(box, last) and box[1] >= last[1]
            under_head = head is not None and _same_column(box, head, 0.3) and box[1] >= head[1]
            next_column = last is not None and box[1] < last[3] and box[0] >= last[0] + 0.5 * (last[2] - last[0])
            if current < 0 or not (below or under_head or next_column):
                current += 1
                head = None
        article[i] = current
        last, last_title = box, titles[i]
    return np.array(article, dtype=np.intp)
