"""Sort-and-sweep neighbour search for the runners' post-processing (numpy only).

Candidate pairs come from one sort and two binary searches instead of an N x N matrix, so
time and memory grow with N log N plus the number of pairs returned.
"""

from __future__ import annotations

import numpy as np

__all__ = ["window_pairs", "first_match"]


def window_pairs(key: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """All (i, j), i != j, with ``lo[i] <= key[j] <= hi[i]``, sorted by i.

    Args:
        key: (N,) sort key of every item; lo, hi: (N,) window of each item on that key.

    Returns:
        (K,) i and (K,) j int64 index arrays.

    >>> window_pairs(np.zeros(0), np.zeros(0), np.zeros(0))[0].shape
    (0,)
    """
    order = np.argsort(key, kind="stable")
    ks = key[order]
    start = np.searchsorted(ks, lo, side="left")
    count = np.maximum(np.searchsorted(ks, hi, side="right") - start, 0)
    i = np.repeat(np.arange(key.size), count)
    offset = np.arange(i.size) - np.repeat(np.cumsum(count) - count, count)
    j = order[np.repeat(start, count) + offset]
    keep = i != j
    return i[keep], j[keep]


def first_match(start: np.ndarray, order: np.ndarray, match) -> np.ndarray:
    """For each query q, the first ``order[p]`` with p >= start[q] and ``match(q, order[p])``.

    Args:
        start: (Q,) first position of ``order`` each query may look at.
        order: (N,) item indices in scan order.
        match: vectorised predicate ``match(queries, items) -> bool array``.

    Returns:
        (Q,) int64 item index, -1 where none matches. All queries scan at once in chunks
        that double (4, 8, 16, ...): a query whose answer lies k places on costs O(k) and
        the number of numpy passes is O(log N).
    """
    n = order.size
    found = np.full(start.size, -1, np.int64)
    active = np.flatnonzero(start < n)
    pos = start[active].astype(np.int64)
    chunk = 4
    while active.size:
        span = np.minimum(chunk, n - pos)
        q = np.repeat(np.arange(active.size), span)
        p = np.repeat(pos, span) + (np.arange(q.size) - np.repeat(np.cumsum(span) - span, span))
        hit = match(active[q], order[p])
        first = np.full(active.size, -1, np.int64)
        # Assigning in reverse leaves each query's smallest hit position in ``first``.
        first[q[hit][::-1]] = p[hit][::-1]
        got = first >= 0
        found[active[got]] = order[first[got]]
        pos = pos + span
        more = ~got & (pos < n)
        active, pos = active[more], pos[more]
        chunk *= 2
    return found
