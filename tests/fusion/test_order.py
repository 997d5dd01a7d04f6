import numpy as np
import pytest

from newsbag.fusion.order import column_segments, reading_order


def test_three_column_page_with_masthead_and_headline():
    # masthead over the page, a headline over columns 1-2, column 3 runs from the top.
    boxes = np.array([
        [0, 0, 300, 40],       # 0 masthead
        [0, 50, 190, 80],      # 1 headline over columns 1 and 2
        [0, 90, 90, 200],      # 2 col 1 top
        [0, 210, 90, 300],     # 3 col 1 bottom
        [100, 90, 190, 300],   # 4 col 2
        [210, 50, 300, 150],   # 5 col 3 top
        [210, 160, 300, 300],  # 6 col 3 bottom
    ], float)
    rank = reading_order(boxes, 300, 300)
    assert np.argsort(rank).tolist() == [0, 1, 2, 3, 4, 5, 6]


def test_columns_before_rows_even_when_paragraph_breaks_align():
    # two columns whose paragraph breaks sit at the same height: read column by column.
    boxes = np.array([[0, 0, 90, 90], [100, 0, 190, 90], [0, 100, 90, 190], [100, 100, 190, 190]], float)
    assert np.argsort(reading_order(boxes, 200, 200)).tolist() == [0, 2, 1, 3]


def test_touching_columns_still_cut():
    boxes = np.array([[0, 0, 101, 100], [100, 0, 200, 100]], float)   # 1 px overlap < 0.5% of 1000
    assert reading_order(boxes, 1000, 1000).tolist() == [0, 1]


def test_column_segments_needs_lines_on_both_sides():
    box = np.array([[0, 0, 300, 100]], float)
    lines = np.array([[0, 0, 100, 10], [0, 20, 100, 30], [150, 0, 300, 10], [150, 20, 300, 30], [150, 40, 300, 50]], float)
    n_cols, parent, seg = column_segments(box, lines, np.zeros(5, int), np.arange(5), min_gap=20)
    assert n_cols.tolist() == [2] and parent.tolist() == [0, 0]
    np.testing.assert_allclose(seg, [[0, 0, 100, 30], [150, 0, 300, 50]])
    # only one line left of the gutter: no cut
    n_cols, parent, _ = column_segments(box, lines[1:], np.zeros(4, int), np.arange(4), min_gap=20)
    assert n_cols.tolist() == [1] and len(parent) == 0
    # gap narrower than min_gap: no cut
    n_cols, _, _ = column_segments(box, lines, np.zeros(5, int), np.arange(5), min_gap=60)
    assert n_cols.tolist() == [1]


def _two_columns(crossing=(), overlap=0):
    """Lines of two 10-line columns [0, 100] and [110 - overlap, 210] plus extra lines."""
    left = [[0, y, 100, y + 8] for y in range(0, 100, 10)]
    right = [[110 - overlap, y, 210, y + 8] for y in range(0, 100, 10)]
    return np.array(left + right + list(crossing), float)


def _cut(lines, box=(0, 0, 210, 100), **kw):
    n = len(lines)
    return column_segments(np.array([box], float), lines, np.zeros(n, int), np.arange(n), **kw)


@pytest.mark.parametrize("crossing, tol, n_cols", [
    ([], 0.1, 2),
    ([[0, 100, 210, 108]], 0.1, 2),                         # one line over the gutter: tolerated
    ([[0, 100, 210, 108]], 0.0, 1),                         # ... unless no crossing is allowed
    ([[0, 100 + 10 * k, 210, 108 + 10 * k] for k in range(3)], 0.1, 1),   # 3 of 23 cross: no gutter
])
def test_gutter_tolerates_a_few_crossing_lines(crossing, tol, n_cols):
    n, parent, seg = _cut(_two_columns(crossing), box=(0, 0, 210, 140), min_gap=5, tol=tol)
    assert n.tolist() == [n_cols]
    if n_cols == 2:
        assert parent.tolist() == [0, 0]
        assert seg[0, 2] <= 105 <= seg[1, 0]          # segments meet at the gutter, never overlap
        if crossing:                                  # the crossing line is cut and joins both sides
            assert seg[0, 3] == seg[1, 3] == 108


@pytest.mark.parametrize("slack, n_cols", [(0, 1), (10, 2)])
def test_slack_finds_gutter_between_overlapping_column_lines(slack, n_cols):
    lines = _two_columns(overlap=15)                  # right column's lines start 5 px left of 100
    n, _, seg = _cut(lines, min_gap=2, slack=slack)
    assert n.tolist() == [n_cols]
    if n_cols == 2:
        np.testing.assert_allclose(seg, [[0, 0, 97.5, 98], [97.5, 0, 210, 98]])


def _random_boxes(rng, n: int) -> np.ndarray:
    xy = rng.uniform(0, 1000, (n, 2))
    wh = rng.uniform(1, 200, (n, 2))
    if rng.random() < 0.3:  # a coarse grid: ties and touching edges
        xy, wh = np.round(xy / 50) * 50, np.round(wh / 50) * 50 + 1
    return np.hstack([xy, xy + wh])


def test_reading_order_equals_the_recursive_xycut():
    from reference.recursive_order import reading_order_recursive

    rng = np.random.default_rng(2)
    for _ in range(300):
        boxes = _random_boxes(rng, int(rng.integers(0, 300)))
        np.testing.assert_array_equal(reading_order(boxes, 1000, 1000), reading_order_recursive(boxes, 1000, 1000))


def test_reading_order_deep_cut_tree():
    # Each cut peels one box (left strip, then top strip, ...): 3,000 levels deep, past
    # Python's recursion limit, which the recursive XY-cut hit.
    boxes, x, y, side = [], 0.0, 0.0, 30100.0
    for k in range(3000):
        if k % 2 == 0:
            boxes.append([x, y, x + 5, side])
            x += 10
        else:
            boxes.append([x, y, side, y + 5])
            y += 10
    assert reading_order(np.array(boxes), 1e5, 1e5).tolist() == list(range(3000))
