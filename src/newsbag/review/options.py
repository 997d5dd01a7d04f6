"""The review stage's declared options (stdlib only: the config checks them without importing the stage)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from ..config_fields import STAGE_KEYS
from ..options import option, parse

__all__ = ["ReviewParams", "parse_review_cfg", "PANEL_MIN", "BOARD_MIN"]

# Keys of a stage entry that are not options.
# A board panel is never narrower than this: a box and its label must be checkable one by one.
PANEL_MIN = 760
# The narrowest board: one panel and its margins.
BOARD_MIN = 960


@dataclass(frozen=True)
class ReviewParams:
    """Review options: pages in the gallery, board width cap, fused variants shown (None = auto)."""

    top_n: int = option("integer", 5, "pages most worth a look that get a full board", minimum=1)
    max_board_width: int = option("integer", 2400, "widest a board is drawn", unit="px", minimum=BOARD_MIN)
    variants: tuple[str, ...] | None = option("strings", None, "fused variants shown on boards; null: the "
                                              "recommended one, else all", nullable=True)


def parse_review_cfg(cfg: Mapping[str, Any]) -> ReviewParams:
    """Validated review options; raises a one-line ValueError on unknown keys or bad values."""
    return parse(ReviewParams, cfg, "review stage", STAGE_KEYS)
