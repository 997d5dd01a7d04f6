"""The resolution check: a page whose text lines are lower than its recogniser reads well is said
so, once per page, with the height measured and the height needed.

A recogniser's tool.json may declare ``needs_line_height_px``: the line box height (page pixels)
below which its error rate climbs, measured on ground truth (docs/transcription.md). PP-OCR scales
every line to 48 px, so a smaller line is only blurred up: a 7-column page scanned 1114 px wide
has lines about 11 px high, and no recogniser setting gets its letters back.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

import numpy as np

from ..tool_spec import load_tool_spec
from ..resources import runners_dir

__all__ = ["median_line_height", "ResolutionCheck"]

log = logging.getLogger(__name__)


def median_line_height(crops: np.ndarray, units: list[str], sample: np.ndarray) -> float | None:
    """Median height of a page's planned text lines: its line crops, else the sample lines a
    region plan carries; None without any line.

    >>> median_line_height(np.array([[0, 0, 9, 10], [0, 20, 9, 34], [0, 0, 50, 90]]), ["line", "line", "region"],
    ...                    np.zeros((0, 4)))
    12.0
    """
    crops = np.asarray(crops, dtype=np.float64).reshape(-1, 4)
    lines = crops[np.asarray(units) == "line"] if len(units) else crops[:0]
    if not len(lines):
        lines = np.asarray(sample, dtype=np.float64).reshape(-1, 4)
    return float(np.median(lines[:, 3] - lines[:, 1])) if len(lines) else None


@dataclass
class ResolutionCheck:
    """The pages of one transcription call whose lines are too low for its recogniser."""

    family: str
    needs_px: float | None                       # None: the recogniser declares no need
    low: dict[str, float] = field(default_factory=dict)   # page id -> its median line height

    @classmethod
    def for_family(cls, family: str) -> ResolutionCheck:
        return cls(family, load_tool_spec(family, runners_dir()).get("needs_line_height_px"))

    def check(self, page_id: str, crops: np.ndarray, units: list[str], sample: np.ndarray) -> None:
        """Warn once for a page whose median planned line is lower than the recogniser needs, and
        keep it in `low` (the stage then reads its lines without the noise rule)."""
        height = median_line_height(crops, units, sample)
        if self.needs_px is None or height is None or height >= self.needs_px:
            return
        self.low[page_id] = round(height, 1)
        log.warning("page %s: its text lines are %.0f px high (median planned line box), %s needs %.0f px to read "
                    "well: expect many errors; scan it at %.1fx the resolution", page_id, height, self.family,
                    self.needs_px, self.needs_px / max(height, 1.0))

    def summary(self) -> dict:
        """``low_resolution`` for the stage's summary: how many pages, their median line height, the need."""
        if not self.low:
            return {}
        return {"low_resolution": {"pages": len(self.low), "line_height_px": float(np.median(list(self.low.values()))),
                                   "needs_px": self.needs_px, "page_ids": sorted(self.low)}}
