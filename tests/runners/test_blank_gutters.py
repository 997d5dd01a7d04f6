"""Lines that DB ran across a narrow gutter are cut where the page's pixels leave the gutter blank
(or hold only a thin rule)."""

from __future__ import annotations

import numpy as np
import pytest
from PIL import Image, ImageDraw

import _columns  # noqa: E402  (runners/ is on sys.path via conftest)
import text_lines  # noqa: E402

LINE_H, PITCH, ROWS, TOP = 24, 30, 40, 60
COLUMNS = ((50, 480), (510, 950))          # a 30 px gutter: 1.25 line heights
MERGED = range(10, 26)                     # rows whose line DB ran over the gutter


def _page(columns=COLUMNS, seed=0, rule: bool = False) -> np.ndarray:
    """A grey page of words (black bars 16 px high, spaces 8-14 px) in `columns`; with `rule`, a
    vertical rule down the gutter that a word of one column or the other touches in one row of three."""
    rng = np.random.default_rng(seed)
    img = Image.new("L", (1000, TOP + ROWS * PITCH + 60), 255)
    draw = ImageDraw.Draw(img)
    if rule:
        mid = (columns[0][1] + columns[1][0]) // 2
        draw.rectangle([mid - 2, TOP, mid + 1, TOP + ROWS * PITCH], fill=0)
        for r in range(ROWS):
            y = TOP + r * PITCH + 4
            if r % 6 == 0:
                draw.rectangle([columns[0][1], y, mid - 2, y + 15], fill=0)
            elif r % 6 == 3:
                draw.rectangle([mid + 1, y, columns[1][0], y + 15], fill=0)
    for r in range(ROWS):
        y = TOP + r * PITCH + 4
        for x0, x1 in columns:
            x = x0
            while x < x1:
                w = min(int(rng.integers(30, 90)), x1 - x)
                draw.rectangle([x, y, x + w - 1, y + 15], fill=0)
                x += w + int(rng.integers(8, 15))
    return np.asarray(img)


def _lines(columns=COLUMNS, merged=MERGED) -> np.ndarray:
    out = []
    for r in range(ROWS):
        y = TOP + r * PITCH
        spans = [(columns[0][0], columns[-1][1])] if r in merged else columns
        out += [[x0, y, x1, y + LINE_H] for x0, x1 in spans]
    return np.array(out, float)


@pytest.mark.parametrize("rule", [False, True])
def test_lines_run_over_a_blank_gutter_are_cut_at_it(rule):
    lines = _lines()
    pieces, scores = text_lines.cut_at_blank_gutters(_page(rule=rule), lines, np.arange(len(lines), dtype=float))
    assert len(pieces) == len(lines) + len(MERGED)
    gutter_l, gutter_r = COLUMNS[0][1], COLUMNS[1][0]
    merged = np.flatnonzero(lines[:, 2] - lines[:, 0] > 600)
    for k in merged:
        mine = pieces[scores == k]   # each piece keeps its line's score
        assert len(mine) == 2
        (l0, _, l1, _), (r0, _, r1, _) = mine[np.argsort(mine[:, 0])]
        assert l0 == COLUMNS[0][0] and r1 == COLUMNS[1][1]
        assert gutter_l <= l1 <= r0 <= gutter_r        # the cut lies in the blank band
        np.testing.assert_array_equal(mine[:, [1, 3]], np.repeat(lines[k:k + 1, [1, 3]], 2, 0))
    single = np.setdiff1d(np.arange(len(lines)), merged)
    np.testing.assert_array_equal(np.sort(scores)[np.isin(np.sort(scores), single)], single)


def test_word_spaces_and_a_page_without_gutter_cut_nothing():
    one = ((50, 950),)
    lines = _lines(one, merged=())
    pieces, _ = text_lines.cut_at_blank_gutters(_page(one), lines, np.ones(len(lines)))
    np.testing.assert_array_equal(pieces, lines)


def test_the_blank_gutter_raster_marks_the_gutter_beside_the_merged_lines():
    lines = _lines()
    g = _columns.blank_gutters(_page(), lines, LINE_H)
    # the cells of the merged rows' centre line lying inside the gutter are gutter cells
    yc = (lines[:, 1] + lines[:, 3]) / 2
    merged = lines[:, 2] - lines[:, 0] > 600
    hit = _columns.gutter_cells_between(g, lines[:, 0], lines[:, 2], yc)
    assert (hit[merged] >= 0.4 * LINE_H / g.cell_w).all()
    assert hit[~merged].sum() == 0
