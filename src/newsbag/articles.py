"""Articles (pure): a headline and the body regions that follow it, rule-based.

The rules follow how American Stories associates headlines with article bodies: walking the
page in reading order, a headline opens an article (a headline right below another one is a
deck of the same headline), and a body region joins the open article while it stays in the
headline's column, or when the reading order moves on to the next column to the right, above
the end of the last region (the article continues there). Anything else opens an article without a headline.
"""

from __future__ import annotations

import numpy as np

__all__ = ["group_articles"]


def _same_column(a, b, min_share: float = 0.5) -> bool:
    """The boxes share at least `min_share` of the narrower one's width."""
    overlap = min(a[2], b[2]) - max(a[0], b[0])
    return overlap >= min_share * min(a[2] - a[0], b[2] - b[0])


def group_articles(xyxy: np.ndarray, is_title: np.ndarray, rank: np.ndarray) -> np.ndarray:
    """Article id of every region, numbered in reading order from 0.

    Args:
        xyxy: (N, 4) text and title regions, pixels.
        is_title: (N,) bool, headline regions.
        rank: (N,) reading-order rank (smaller first).

    Returns:
        (N,) int article ids.

    >>> group_articles(np.zeros((0, 4)), np.zeros(0, bool), np.zeros(0)).shape
    (0,)
    """
    xyxy = np.asarray(xyxy, dtype=np.float64).reshape(-1, 4)
    article = [-1] * xyxy.shape[0]
    # Python floats and lists: the walk is sequential, and numpy scalars made it 5x slower
    # (75 of 330 ms of a 6 x 300-box page's fusion, 11 variants). Same float arithmetic.
    boxes = xyxy.tolist()
    titles = np.asarray(is_title, dtype=bool).tolist()
    current = -1
    head: list | None = None   # the open article's headline extent
    last: list | None = None   # its last region
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
