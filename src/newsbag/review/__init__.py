"""Review stage: PNG boards per page and an HTML gallery of the most informative pages."""

from .render import CLASS_COLORS, render_board
from .stage import ReviewParams, parse_review_cfg, run_review

__all__ = ["CLASS_COLORS", "render_board", "ReviewParams", "parse_review_cfg", "run_review"]
