"""Degenerate sources: a detector that answers a page with one page-sized box, or almost nothing,
where its peers find dozens of text regions.

A runner that answers this way reports the page ok (not empty, not failed), so neither the
run report nor the empty-page count says anything; only the peers on the same page do
(`paddle_layout/cdla` boxes a whole old broadsheet as one `figure`).
"""

from __future__ import annotations

import numpy as np

from .geometry import area

__all__ = ["degenerate_reasons", "largest_box_share", "PEER_MIN_TEXT", "PAGE_SIZED", "FEW_SHARE"]

# "Dozens": the peers' median text regions on the page. A page of a few big blocks (a title
# page, a full-page advertisement) is no evidence against anyone.
PEER_MIN_TEXT = 20
# One box over half the page, with at most one other region: a page-sized answer.
PAGE_SIZED = 0.5
# Almost nothing: at most this share of the peers' median text regions (and at most 2 when that is less).
FEW_SHARE = 0.1


def largest_box_share(xyxy: np.ndarray, width: float, height: float) -> float:
    """Share of the page the largest of `xyxy` (N, 4) covers (0 for no box).

    >>> largest_box_share(np.zeros((0, 4)), 10, 10)
    0.0
    """
    xyxy = np.asarray(xyxy, float).reshape(-1, 4)
    return float(area(xyxy).max() / (width * height)) if len(xyxy) and width * height > 0 else 0.0


def degenerate_reasons(n_regions: np.ndarray, n_text: np.ndarray, largest_share: np.ndarray,
                       peer: np.ndarray) -> list[str]:
    """Why each source of one page is degenerate there, or "" when it is not.

    Args:
        n_regions: (S,) regions of each source on the page (text lines not counted).
        n_text: (S,) its text and title regions.
        largest_share: (S,) share of the page its largest box covers (`largest_box_share`).
        peer: (S,) bool, the sources compared with one another (region sources); the others
            (the text-line evidence) are neither compared nor counted in the median.

    Returns:
        (S,) reasons: a page-sized box, or too few text regions, against the median text
        regions of the *other* peers; "" where fine, not a peer, or with peers finding few.
    """
    n_regions, n_text = np.asarray(n_regions), np.asarray(n_text)
    largest_share, peer = np.asarray(largest_share, float), np.asarray(peer, bool)
    reasons = [""] * len(n_text)
    for i in np.flatnonzero(peer):
        others = peer.copy()
        others[i] = False
        if not others.any():
            continue
        median = float(np.median(n_text[others]))
        if median < PEER_MIN_TEXT:
            continue
        said = f"where the other sources find {median:g} text regions (median)"
        if n_regions[i] <= 2 and largest_share[i] >= PAGE_SIZED:
            reasons[i] = f"one page-sized box ({largest_share[i]:.0%} of the page) {said}"
        elif n_text[i] <= max(2.0, FEW_SHARE * median):
            reasons[i] = f"{int(n_text[i])} text region(s) {said}"
    return reasons
