"""Which pages to correct by hand first: those whose sources disagree most, spread over issues, years and layouts."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Mapping, Sequence

import numpy as np

from .fusion.grid import column_bounds

__all__ = ["PageFacts", "Pick", "SPREAD_PENALTY", "issue_of", "layout_signature", "pick_pages"]

# What a pick costs each later page that shares its issue, year or layout signature, per pick
# shared, in units of disagreement (0..1). A page of a new issue beats one more page of a picked
# issue unless it disagrees less by more than 0.5 (0.8 when year and layout are shared too).
SPREAD_PENALTY: Mapping[str, float] = {"issue": 0.5, "year": 0.2, "layout": 0.1}

# A date in a page's name: 17810901, 1781-09-01, 1781_09_01 (years 1500..2099), not part of a
# longer number (a newspaper's id such as sn84026749 holds none).
_DATE = re.compile(r"(?<!\d)(1[5-9]\d\d|20\d\d)[-_]?(0[1-9]|1[0-2])[-_]?(0[1-9]|[12]\d|3[01])(?!\d)")
_YEAR = re.compile(r"(?<!\d)(1[5-9]\d\d|20\d\d)(?!\d)")
# Region counts are told apart in these buckets: (upper bound exclusive, name).
_REGION_BUCKETS = ((10, "<10"), (30, "10-29"), (100, "30-99"), (float("inf"), "100+"))
_MAX_COLUMNS = 8
_GUTTER_TRIM = 0.01   # of the page width: what the reading order trims off boxes without text lines


@dataclass(frozen=True)
class PageFacts:
    """What the pick knows of one page: its disagreement (0..1; higher = its correction teaches
    more), the issue and year it belongs to (`issue_of`; year None when unknown) and its layout
    signature (`layout_signature`)."""

    page_id: str
    disagreement: float
    issue: str
    year: str | None
    layout: str


@dataclass(frozen=True)
class Pick:
    """A picked page: its rank (1 = first), and its gain when picked (disagreement less the spread penalties)."""

    rank: int
    facts: PageFacts
    gain: float


def first_date(text: str) -> str | None:
    """The first date in `text` as YYYY-MM-DD (``17810901``, ``1781-09-01``, ``1781_09_01``), or None:
    the issue of a page, for `issue_of` and tune's folds alike.

    >>> first_date("nzz_17810901_0_0_a1_p1_1"), first_date("p3")
    ('1781-09-01', None)
    """
    m = _DATE.search(text)
    return "-".join(m.groups()) if m else None


def issue_of(page_id: str) -> tuple[str, str | None]:
    """(issue, year) of a page, from the readable part of its id (the folders and stem of its
    path under the input root, folders joined by ``__``; `inputs.page_id_for`).

    The rule: the first date in the name is the issue (``1781-09-01`` for
    ``nzz_17810901_0_0_a1_p1_1``, ``1908-03-12`` for ``sn84026749/1908-03-12/ed-1/seq-1``),
    and its year the year. Otherwise the issue is the folder part (every page of one folder is one
    issue; ``paper/1921`` for ``paper/1921/p3``) or, for a page in no folder, the page itself;
    the year is the first stand-alone year (1500..2099) in the name, else None.

    >>> issue_of("issue7__p1-0a1b2c3d")
    ('issue7', None)
    """
    readable = page_id.rsplit("-", 1)[0] if re.search(r"-[0-9a-f]{8}$", page_id) else page_id
    date = first_date(readable)
    if date:
        return date, date[:4]
    folder, _, _ = readable.rpartition("__")
    year = _YEAR.search(readable)
    return folder.replace("__", "/") or readable, year.group(1) if year else None


def layout_signature(text_xyxy: np.ndarray, n_regions: int, width: float) -> str:
    """A page's layout in a few words: its column count and its region count's bucket.

    Args:
        text_xyxy: (N, 4) the text-like regions of the page's layout, page pixels.
        n_regions: how many regions the layout has.
        width: page width in pixels.

    Returns:
        e.g. ``"3 col, 30-99 regions"``; columns are the gutters the reading order finds
        (`fusion.grid.column_bounds`) plus one, at most ``8+``.

    >>> layout_signature(np.zeros((0, 4)), 0, 100)
    '1 col, <10 regions'
    """
    cols = len(column_bounds(text_xyxy, width, _GUTTER_TRIM * width)) + 1
    shown = f"{_MAX_COLUMNS}+" if cols >= _MAX_COLUMNS else str(cols)
    bucket = next(name for limit, name in _REGION_BUCKETS if n_regions < limit)
    return f"{shown} col, {bucket} regions"


def _codes(values: list) -> np.ndarray:
    """Integer codes of `values` (equal values, equal codes); None gets -1, which matches nothing."""
    seen: dict = {}
    return np.array([-1 if v is None else seen.setdefault(v, len(seen)) for v in values], np.int64)


def pick_pages(pages: Sequence[PageFacts], n: int, penalty: Mapping[str, float] = SPREAD_PENALTY) -> list[Pick]:
    """The `n` pages whose correction teaches most, picked greedily: each step takes the page of
    highest gain, its disagreement less ``penalty[k]`` times the number of pages already picked
    that share its issue, year or layout (k); a page of unknown year shares no year. Ties go to
    the smaller page id, so the pick is the same whatever the order of `pages`.

    Args:
        pages: the candidates (page ids unique).
        n: how many to pick (fewer when there are fewer pages).
        penalty: the cost of a shared "issue", "year" and "layout".

    Returns:
        The picks in the order they were taken.
    """
    pool = sorted(pages, key=lambda p: p.page_id)
    if not pool or n <= 0:
        return []
    score = np.array([p.disagreement for p in pool], float)
    keys = {k: _codes([getattr(p, k) for p in pool]) for k in ("issue", "year", "layout")}
    shared = {k: np.zeros(len(pool) + 1, np.int64) for k in keys}   # picks per code; code -1 stays 0
    taken = np.zeros(len(pool), bool)
    picks: list[Pick] = []
    for rank in range(1, min(n, len(pool)) + 1):
        gain = score - sum(penalty.get(k, 0.0) * shared[k][codes] for k, codes in keys.items())
        gain[taken] = -np.inf
        best = int(np.argmax(gain))   # the first maximum: the smallest page id
        taken[best] = True
        for k, codes in keys.items():
            if codes[best] >= 0:
                shared[k][codes[best]] += 1
        picks.append(Pick(rank, pool[best], round(float(gain[best]), 4)))
    return picks
