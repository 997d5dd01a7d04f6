"""The reading order's work on a page's text lines is done once per page, not once per variant."""

from __future__ import annotations

import numpy as np
from synthetic_run import TORCH_SOURCES, write_synthetic_run
from test_pinned_output import _fusion_section

from newsbag.fusion import order
from newsbag.fusion.stage import run_fusion

PAGES = ["page-a", "page-b"]


def _columns(n_cols: int, rows: int, gap_at: int | None = None) -> np.ndarray:
    """Text lines of `n_cols` columns 100 px apart, `rows` lines each; a blank band across all
    of them after row `gap_at`."""
    out = []
    for c in range(n_cols):
        for r in range(rows):
            y = 10 + 12 * r + (40 if gap_at is not None and r > gap_at else 0)
            out.append([100 * c + 5, y, 100 * c + 85, y + 10])
    return np.array(out, float)


def test_a_page_fused_by_many_variants_measures_its_line_grid_once(tmp_path, monkeypatch):
    calls = []
    real = order.line_grid
    monkeypatch.setattr(order, "line_grid", lambda *a: calls.append(1) or real(*a))
    run = write_synthetic_run(tmp_path / "run", TORCH_SOURCES, PAGES, seed=17)
    summary = run_fusion(run, PAGES, _fusion_section("pipeline.torch.json"))
    assert summary["counts"]["ok"] == len(PAGES)
    assert len(summary["variants"]) - len(summary["skipped_variants"]) > 3
    assert len(calls) == len(PAGES)


def test_the_page_lines_read_as_the_lines_themselves():
    lines = _columns(4, 30, gap_at=14)
    page = order.page_lines(lines, 400)
    assert page.rules.size == 1 and len(page.grid.bounds) == 3
    rng = np.random.default_rng(3)
    for _ in range(20):
        x0 = rng.integers(0, 4, 12) * 100 + 5.0
        y0 = rng.uniform(0, 380, 12)
        boxes = np.stack([x0, y0, x0 + 80 + 100 * rng.integers(0, 2, 12), y0 + rng.uniform(20, 200, 12)], 1)
        text = rng.random(12) < 0.8
        for got, want in zip(order.reading_order_parts(boxes, 400, 420, lines=page, text=text),
                             order.reading_order_parts(boxes, 400, 420, lines=lines, text=text)):
            assert np.array_equal(got, want)


def test_page_lines_hold_only_the_lines_and_width_they_were_measured_on():
    lines = _columns(3, 20)
    page = order.page_lines(lines, 300)
    assert page.holds(lines.copy(), 300)
    assert not page.holds(lines[1:], 300)            # a variant that lost a line measures its own
    assert not page.holds(lines + [0, 1, 0, 1], 300)
    assert not page.holds(lines, 301)
    few = order.page_lines(lines[:7], 300)          # under 8 lines: no grid, no rules
    assert few.grid is None and few.rules.size == 0
