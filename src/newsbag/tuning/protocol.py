"""The tuning protocol's pure parts: which issue a page belongs to, folds by issue, the bootstrap interval, adoption.

No I/O: `tuning.run` reads the run and ground truth and calls these.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import PurePosixPath

import numpy as np

from ..suggest import first_date

__all__ = ["issue_key", "fold_split", "bootstrap_interval", "Interval", "Decision", "decide", "PIXEL_GUARD"]

# Tuned pixel F1 may fall at most this far below the current recommendation's (issue 44).
PIXEL_GUARD = 0.005


def issue_key(path: str) -> str:
    """The issue a page belongs to, from its path relative to the input root: the first date in
    it ("1781-09-01"), else its folder, else its file stem (a page alone). Pages of one issue
    share layout and print, so they stay on one side of a fold.

    >>> issue_key("nzz/0002_nzz_17810901_0_0_a1_p1_1.tif"), issue_key("paper/1921/p3.png"), issue_key("p.png")
    ('1781-09-01', 'paper/1921', 'p')
    """
    pure = PurePosixPath(str(path).replace("\\", "/"))
    if date := first_date(pure.as_posix()):
        return date
    parent = pure.parent.as_posix()
    return parent if parent not in ("", ".") else pure.stem


def fold_split(groups: dict[str, str], k: int, seed: int) -> list[list[str]]:
    """Pages into `k` folds (fewer when there are fewer issues), whole issues each, sizes as even
    as whole issues allow; deterministic in `seed`.

    Args:
        groups: page id -> its issue (`issue_key`).

    Returns:
        Folds of sorted page ids; every page in exactly one; no issue in two.

    Raises:
        ValueError: fewer than two issues (nothing to hold out).
    """
    issues = sorted(set(groups.values()))
    if len(issues) < 2:
        raise ValueError(f"cross-validation needs pages of at least 2 issues, got {len(issues)}")
    k = min(k, len(issues))
    members = {g: sorted(p for p, h in groups.items() if h == g) for g in issues}
    order = [issues[i] for i in np.random.default_rng(seed).permutation(len(issues))]
    order.sort(key=lambda g: -len(members[g]))   # stable: the largest issues first, ties in shuffled order
    folds: list[list[str]] = [[] for _ in range(k)]
    for g in order:   # each issue into the smallest fold so far (the first of equals)
        min(folds, key=len).extend(members[g])
    return [sorted(f) for f in folds]


@dataclass(frozen=True)
class Interval:
    mean: float   # the mean over pages
    low: float    # 2.5th percentile of the bootstrap means
    high: float   # 97.5th percentile


def bootstrap_interval(values: np.ndarray, groups: list[str], seed: int, n: int = 2000) -> Interval:
    """The mean of per-page `values` and its bootstrap 95 % interval, resampling whole issues
    (pages of one issue are not independent draws).

    Args:
        values: (P,) per-page values (held-out gains); groups: (P,) each page's issue.
    """
    values = np.asarray(values, float)
    if not len(values):
        return Interval(float("nan"), float("nan"), float("nan"))
    names = sorted(set(groups))
    code = np.array([names.index(g) for g in groups])
    sums, counts = np.bincount(code, values, len(names)), np.bincount(code, minlength=len(names))
    draws = np.random.default_rng(seed).integers(0, len(names), size=(n, len(names)))
    means = sums[draws].sum(1) / counts[draws].sum(1)
    low, high = np.percentile(means, [2.5, 97.5])
    return Interval(float(values.mean()), float(low), float(high))


@dataclass(frozen=True)
class Decision:
    adopt: bool
    reason: str   # one line


def decide(gain: Interval, pixel_change: float, n_pages: int, guard: float = PIXEL_GUARD) -> Decision:
    """Adopt the tuned fusion only when the interval of its held-out text IoU-F1 gain lies above 0
    and its held-out pixel F1 falls by at most `guard`; the reason says which held.

    Args:
        gain: held-out IoU-F1 gain over the current recommendation (`bootstrap_interval`).
        pixel_change: held-out mean pixel F1, tuned minus current.
    """
    evidence = f"held-out gain {gain.mean:+.3f} (95% CI {gain.low:+.3f}..{gain.high:+.3f})"
    if not gain.low > 0:
        return Decision(False, f"kept the current recommendation: on {n_pages} pages the {evidence} "
                               "does not lie above 0")
    if pixel_change < -guard:
        return Decision(False, f"kept the current recommendation: pixel F1 falls {-pixel_change:.3f} on held-out "
                               f"pages (more than {guard}) although the {evidence}")
    return Decision(True, f"tuned on {n_pages} pages: {evidence}")
