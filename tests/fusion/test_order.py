import json
from pathlib import Path

import numpy as np
import pytest

from newsbag.fusion.grid import column_bounds
from newsbag.fusion.order import reading_order, reading_order_parts
from newsbag.fusion.segments import column_segments


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


def test_column_xycut_equals_the_recursive_xycut():
    # Inside one column the plain XY-cut still orders the boxes: the iterative one equals
    # the recursive one it replaced.
    from newsbag.fusion.xycut import xycutter
    from reference.recursive_order import reading_order_recursive

    rng = np.random.default_rng(2)
    for _ in range(300):
        boxes = _random_boxes(rng, int(rng.integers(0, 300)))
        rank = np.empty(len(boxes), np.int64)
        rank[np.asarray(xycutter(boxes, 5.0, 5.0)(list(range(len(boxes)))), np.intp)] = np.arange(len(boxes))
        np.testing.assert_array_equal(rank, reading_order_recursive(boxes, 1000, 1000))


def test_reading_order_is_a_deterministic_permutation():
    rng = np.random.default_rng(3)
    for _ in range(200):
        boxes = _random_boxes(rng, int(rng.integers(0, 300)))
        lines = _random_boxes(rng, int(rng.integers(0, 50))) if rng.random() < 0.5 else None
        before = boxes.copy()
        rank = reading_order(boxes, 1000, 1000, lines=lines)
        assert sorted(rank.tolist()) == list(range(len(boxes)))
        np.testing.assert_array_equal(rank, reading_order(boxes, 1000, 1000, lines=lines))
        np.testing.assert_array_equal(boxes, before)


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


def _column_lines(x0, x1, y0, y1, step=12, grow=3):
    """Text lines of one column: 10 px tall every `step` px, grown by `grow` px like DB boxes."""
    return [[x0 - grow, y, x1 + grow, y + 10] for y in range(y0, y1 - 10, step)]


def _four_column_page():
    """A 1000 x 1000 page: masthead; a headline over columns 0-1 with its two columns, a second
    headline over columns 0-1 lower down with two more; columns 2 and 3 run from the top.
    Column 0's regions overlap the 10 px gutter into column 1 (6 px), column 1's first region
    leans 3 px into column 0, and column 3 is skewed by 5 px: the exact XY-cut finds no gutter.
    """
    boxes = np.array([
        [100, 10, 900, 60],    # 0 masthead
        [20, 80, 490, 120],    # 1 headline over columns 0-1
        [18, 130, 266, 400],   # 2 column 0, top
        [20, 395, 262, 700],   # 3 column 0, below (overlaps 2 by 5 px)
        [257, 130, 490, 420],  # 4 column 1, top
        [262, 416, 491, 700],  # 5 column 1, below
        [20, 712, 490, 750],   # 6 second headline over columns 0-1
        [20, 760, 256, 990],   # 7 column 0 under it
        [258, 760, 490, 990],  # 8 column 1 under it
        [497, 80, 736, 500],   # 9 column 2, top
        [500, 497, 730, 990],  # 10 column 2, below
        [745, 80, 975, 500],   # 11 column 3, top (skewed right)
        [738, 498, 968, 990],  # 12 column 3, below
    ], float)
    lines = []
    for x0, x1, y0, y1 in [(20, 250, 130, 700), (260, 490, 130, 700), (20, 250, 760, 990), (260, 490, 760, 990),
                           (500, 730, 80, 990), (742, 972, 80, 990)]:
        lines += _column_lines(x0, x1, y0, y1)
    lines += [[20, y, 490, y + 10] for y in (140, 300, 500)]     # the detector ran 3 lines over the gutter
    lines += [[100, 15, 900, 55], [20, 82, 490, 118], [20, 714, 490, 748]]   # masthead, headlines: tall
    return boxes, np.array(lines, float)


@pytest.mark.parametrize("use_lines", [True, False])
def test_columns_of_a_page_with_spanning_headlines_overlapping_regions_and_skew(use_lines):
    boxes, lines = _four_column_page()
    rank = reading_order(boxes, 1000, 1000, lines=lines if use_lines else None)
    assert np.argsort(rank).tolist() == [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12]


def test_column_bounds_finds_gutters_crossed_by_a_few_lines():
    _, lines = _four_column_page()
    from newsbag.fusion.grid import line_evidence

    ev, line_h = line_evidence(lines)
    bounds = column_bounds(ev, 1000, 0.5 * line_h)
    assert len(bounds) == 3
    assert 250 <= bounds[0] <= 260 and 490 <= bounds[1] <= 500 and 730 <= bounds[2] <= 742


def test_a_strip_of_column_ends_below_a_gap_is_read_with_its_columns():
    # Two columns under a masthead; a clean gap across the page at y 500 leaves each column's
    # last line below it: read each with its column, not both after all the columns.
    boxes = np.array([[0, 0, 200, 30], [0, 40, 95, 500], [105, 40, 200, 500],
                      [0, 506, 60, 516], [105, 506, 170, 516]], float)
    lines = np.array(_column_lines(0, 95, 40, 520) + _column_lines(105, 200, 40, 520), float)
    assert np.argsort(reading_order(boxes, 200, 520, lines=lines)).tolist() == [0, 1, 3, 2, 4]


def test_a_tall_band_under_the_columns_is_read_after_them():
    # The feuilleton under the rule: its own columns, read after the main ones.
    boxes = np.array([[0, 0, 95, 500], [105, 0, 200, 500], [0, 520, 95, 900], [105, 520, 200, 900]], float)
    lines = np.array(_column_lines(0, 95, 0, 500) + _column_lines(105, 200, 0, 500)
                     + _column_lines(0, 95, 520, 900) + _column_lines(105, 200, 520, 900), float)
    # columns first across the gap (no spanning box, a tall band): the plain column order
    assert np.argsort(reading_order(boxes, 200, 900, lines=lines)).tolist() == [0, 2, 1, 3]


@pytest.mark.parametrize("edge_x", [None, 0, 195])
def test_the_scan_edge_along_the_page_does_not_stop_the_band_under_the_columns(edge_x):
    # Masthead, two columns, the feuilleton under them; the scanner's dark edge, found as an
    # image as tall as the page, stood beside every band: the page was read column by column
    # from the masthead down to the feuilleton's foot.
    boxes = [[10, 0, 190, 40], [10, 60, 95, 500], [105, 60, 190, 500], [10, 520, 95, 900], [105, 520, 190, 900]]
    text = [False, True, True, True, True]
    lines = np.array(_column_lines(10, 95, 60, 500) + _column_lines(105, 190, 60, 500)
                     + _column_lines(10, 95, 520, 900) + _column_lines(105, 190, 520, 900), float)
    if edge_x is not None:
        boxes.append([edge_x, 0, edge_x + 5, 900])
        text.append(False)
    rank = reading_order(np.array(boxes, float), 200, 900, lines=lines, text=np.array(text))
    assert np.argsort(rank).tolist()[:5] == [0, 1, 2, 3, 4]
    assert edge_x is None or rank[5] == 5


@pytest.mark.parametrize("variant", ["ranked", "paragraphs"])
def test_us_sample_page_reads_column_by_column(variant):
    # Fused regions of the US sample (7 columns, headlines, ads; 175 fragmented regions that
    # overlap the narrow gutters; `paragraphs` has one fused across the gutter of columns 3
    # and 4) with its text lines, stored from a run. Gutters of the four news columns read
    # off the scan: x 173, 315, 458, 600; the ads start at 737.
    data = json.loads((Path(__file__).parent / "data" / f"port_gibson_{variant}.json").read_text())
    xyxy = np.array([r[1:] for r in data["regions"]], float)
    rank = reading_order(xyxy, data["width"], data["height"], lines=np.array(data["lines"], float))
    edges = [20, 173, 315, 458, 600, 737]
    body = (xyxy[:, 1] > 215) & (xyxy[:, 3] < 1150)   # under the dateline, above the bank's ad
    ranks_of = []
    for c in range(4):
        centre = (xyxy[:, 0] + xyxy[:, 2]) / 2
        inside = body & (xyxy[:, 0] >= edges[c] - 12) & (xyxy[:, 2] <= edges[c + 1] + 12) \
            & (centre > edges[c]) & (centre < edges[c + 1])
        assert inside.sum() >= 10
        by_y = np.argsort(xyxy[inside, 1], kind="stable")
        # top to bottom (two overlapping fragments of a paragraph may swap)
        assert (np.diff(rank[inside][by_y]) > 0).mean() >= 0.9, f"column {c} is not read top to bottom"
        ranks_of.append(rank[inside])
    for c in range(3):
        assert ranks_of[c].max() < ranks_of[c + 1].min(), f"column {c + 1} starts before column {c} ends"
    masthead = xyxy[:, 3] < 170
    assert rank[masthead].max() < rank[body].min()


def test_a_tall_region_fused_across_a_gutter_goes_back_to_one_column():
    # Region 2 runs over the gutter (fusion merged text of both columns) while column 1's
    # region 1 runs past its top: not a headline over both columns but column 0's text.
    # As a band it would cut both columns in two ([0, 1, 2, 3, 4]).
    boxes = np.array([[0, 0, 95, 300], [105, 0, 200, 500], [0, 290, 190, 600],
                      [0, 610, 95, 900], [105, 510, 200, 900]], float)
    lines = np.array(_column_lines(0, 95, 0, 900) + _column_lines(105, 200, 0, 900), float)
    assert np.argsort(reading_order(boxes, 200, 900, lines=lines)).tolist() == [0, 2, 3, 1, 4]


def _port_gibson(variant):
    """The stored US sample: region boxes, page size, its text lines and which regions are text."""
    data = json.loads((Path(__file__).parent / "data" / f"port_gibson_{variant}.json").read_text())
    return (np.array([r[1:] for r in data["regions"]], float), data["width"], data["height"],
            np.array(data["lines"], float), np.array([r[0] == "text" for r in data["regions"]]))


def _at(xyxy, box):
    """The region that holds most of `box` (a piece of the page read off the scan)."""
    box = np.asarray(box, float)
    w = np.clip(np.minimum(xyxy[:, 2], box[2]) - np.maximum(xyxy[:, 0], box[0]), 0, None)
    h = np.clip(np.minimum(xyxy[:, 3], box[3]) - np.maximum(xyxy[:, 1], box[1]), 0, None)
    return int(np.argmax(w * h))


# The US sample's rightmost news column (x 600-737), its headlines top to bottom as printed.
_CONDENSED_NEWS = [
    [601, 216, 704, 231],   # CONDENSED NEWS TOPICS
    [640, 231, 736, 245],   # OF GENERAL INTEREST
    [598, 254, 735, 285],   # The Senate passed the agricultural bill ...
    [603, 405, 729, 417],   # RED CROSS SOCIAL WORKER.
    [615, 535, 716, 558],   # ST. JAMES CHURCH.
    [599, 653, 734, 670],   # SCHOOLS CLOSE APRIL 8.
    [624, 769, 708, 783],   # FOSTER-PERKINS.
    [617, 874, 719, 889],   # HODGES BOUND OVER
    [633, 1019, 704, 1033],  # BOOK REVIEWS.
    [640, 1264, 702, 1278],  # HOW'S THIS?
]
# The top rows: masthead, then the dateline left to right, then column 1's first headline.
_TOP_ROWS = [
    [200, 121, 573, 161],   # PORT GIBSON
    [602, 129, 859, 158],   # REVEILLE
    [36, 189, 165, 205],    # Re-Established Feb.
    [177, 189, 220, 205],   # 2, 1876
    [330, 190, 451, 204],   # PORT GIBSON, CLAIBORNE
    [458, 190, 727, 204],   # COUNTY, MISS., THURSDAY, MARCH 3, 1921
    [863, 190, 1026, 204],  # New Series-VOL. XLV., NO. 6
    [32, 216, 146, 236],    # COMMISSION GRANTS
]


@pytest.mark.parametrize("variant", ["ranked", "paragraphs"])
def test_us_sample_rightmost_news_column_is_not_interleaved_with_the_ads(variant):
    # Fused regions run across the gutter at x 737 between the news column and the ads
    # ("Further notice ..." with "small, accessible timber tracts"; "FOSTER-PERKINS" with
    # "If you have never bought from me"; in ranked also a two-line region of the latter
    # two, which touches the cut one): the column is still read top to bottom, and
    # no advertisement (from x 735 on) is read between its first and last region.
    xyxy, width, height, lines, text = _port_gibson(variant)
    rank = reading_order(xyxy, width, height, lines=lines, text=text)
    heads = [_at(xyxy, b) for b in _CONDENSED_NEWS]
    assert (np.diff(rank[heads]) > 0).all(), f"column read as {np.argsort(np.argsort(rank[heads])).tolist()}"
    column = (xyxy[:, 0] >= 588) & (xyxy[:, 0] < 700) & (xyxy[:, 1] > 210) & (xyxy[:, 3] < 1430)
    ads = (xyxy[:, 0] >= 730) & (xyxy[:, 1] > 210)
    first, last = rank[column].min(), rank[column].max()
    between = ads & (rank > first) & (rank < last)
    assert not between.any(), f"ads read inside the news column: {xyxy[between].astype(int).tolist()}"
    news = (xyxy[:, 2] <= 612) & (xyxy[:, 1] > 210) & (xyxy[:, 3] < 1150)   # columns 1-4 above the bank's ad
    assert rank[news].max() < first


@pytest.mark.parametrize("variant", ["ranked", "paragraphs"])
def test_us_sample_reads_masthead_then_dateline_left_to_right(variant):
    xyxy, width, height, lines, text = _port_gibson(variant)
    rank = reading_order(xyxy, width, height, lines=lines, text=text)
    top = list(dict.fromkeys(_at(xyxy, b) for b in _TOP_ROWS))   # pieces one region holds count once
    assert len(top) >= 6
    assert (np.diff(rank[top]) > 0).all(), f"top rows read as {np.argsort(np.argsort(rank[top])).tolist()}"


def test_text_fused_across_a_gutter_is_read_as_its_column_parts():
    # Region 2 holds the end of column 0 and the start of column 1 (its lines stop at the
    # gutter); boxes run on beside it in both columns. Column 0 is read whole, then column 1:
    # region 2 stands where its first part (column 0's) is read.
    boxes = np.array([[0, 0, 95, 300], [105, 0, 200, 280], [0, 300, 200, 400],
                      [0, 400, 95, 900], [105, 390, 200, 900]], float)
    lines = np.array(_column_lines(0, 95, 0, 900) + _column_lines(105, 200, 0, 900), float)
    text = np.ones(len(boxes), bool)
    parts, box, rank = reading_order_parts(boxes, 200, 900, lines=lines, text=text)
    assert box.tolist() == [0, 1, 2, 2, 3, 4]
    assert parts[2, 2] <= 100 <= parts[3, 0]                   # cut at the gutter
    assert np.argsort(rank).tolist() == [0, 2, 4, 1, 3, 5]     # column 0, then column 1
    assert np.argsort(reading_order(boxes, 200, 900, lines=lines, text=text)).tolist() == [0, 2, 3, 1, 4]
    # not text (a table, an advertisement): never cut
    assert len(reading_order_parts(boxes, 200, 900, lines=lines, text=np.zeros(5, bool))[0]) == 5


@pytest.mark.parametrize("case, rows", [
    # a headline over both columns: its one line runs over the gutter
    ("headline", [(0, 300, 200, 312)]),
    # a row of two lines with a piece on each side and no column running on beside it: a header row
    ("short", [(0, 300, 90, 310), (110, 300, 200, 310), (0, 315, 90, 325), (110, 315, 200, 325)]),
])
def test_a_box_over_the_gutter_that_is_no_fused_text_is_not_cut(case, rows):
    boxes = np.array([[0, 0, 95, 290], [105, 0, 200, 290], [0, 296, 200, 330 if case == "short" else 314],
                      [0, 340, 95, 900], [105, 340, 200, 900]], float)
    lines = np.array(_column_lines(0, 95, 0, 290) + _column_lines(105, 200, 0, 290) + list(map(list, rows))
                     + _column_lines(0, 95, 340, 900) + _column_lines(105, 200, 340, 900), float)
    parts, _, _ = reading_order_parts(boxes, 200, 900, lines=lines, text=np.ones(5, bool))
    assert len(parts) == 5


def test_a_piece_left_of_a_spanning_row_is_read_before_it():
    # A dateline in three pieces; the middle one crosses a gutter (a spanning row). Read left
    # to right, not the spanning piece first.
    boxes = np.array([[0, 0, 200, 30], [2, 40, 60, 50], [70, 40, 160, 50], [170, 40, 198, 50],
                      [0, 60, 95, 500], [105, 60, 200, 500]], float)
    lines = np.array(_column_lines(0, 95, 60, 500) + _column_lines(105, 200, 60, 500), float)
    assert np.argsort(reading_order(boxes, 200, 500, lines=lines)).tolist() == [0, 1, 2, 3, 4, 5]


def test_a_short_box_touching_text_cut_at_the_same_gutter_is_cut_too():
    # Region 2 holds the first two lines of both columns' text and region 3 the rest of it
    # (cut: tall, column 1 runs on beside it). Region 2 alone is too short to tell from a
    # header row, but it touches region 3, cut at the same gutter: it is cut too.
    boxes = np.array([[0, 0, 95, 290], [105, 0, 200, 290], [0, 300, 200, 322], [0, 322, 200, 500],
                      [0, 510, 95, 900], [105, 480, 200, 900]], float)
    lines = np.array(_column_lines(0, 95, 0, 900) + _column_lines(105, 200, 0, 900), float)
    parts, box, rank = reading_order_parts(boxes, 200, 900, lines=lines, text=np.ones(6, bool))
    assert box.tolist() == [0, 1, 2, 2, 3, 3, 4, 5]
    assert np.argsort(reading_order(boxes, 200, 900, lines=lines, text=np.ones(6, bool))).tolist() == [0, 2, 3, 4, 1, 5]


def test_xycut_on_python_floats_cuts_as_the_numpy_reference_does():
    # `xycutter` cuts on Python floats: the same order as the numpy XY-cut it replaced, on
    # ties, touching edges, infinite and NaN coordinates too.
    from newsbag.fusion.xycut import xycutter
    from reference.recursive_order import reading_order_recursive

    rng = np.random.default_rng(7)
    for _ in range(400):
        boxes = _random_boxes(rng, int(rng.integers(0, 60)))
        if len(boxes) and rng.random() < 0.3:
            boxes[rng.integers(0, len(boxes), 3), rng.integers(0, 4, 3)] = rng.choice([np.nan, np.inf, -np.inf, -0.0])
        rank = np.empty(len(boxes), np.int64)
        rank[np.asarray(xycutter(boxes, 5.0, 5.0)(list(range(len(boxes)))), np.intp)] = np.arange(len(boxes))
        np.testing.assert_array_equal(rank, reading_order_recursive(boxes, 1000, 1000))


def _feuilleton_page(fused_across=True):
    """A 300 x 1000 page of three columns, a rule across them at y 611 and the feuilleton's
    three columns under it; column 1's body box runs over the rule into the feuilleton (its
    lines on both sides), as a fused region does where the detector merged the two."""
    cols = [(0, 90), (105, 195), (210, 300)]
    lines = [ln for x0, x1 in cols for ln in _column_lines(x0, x1, 60, 600) + _column_lines(x0, x1, 625, 1000)]
    boxes = [[0, 60, 90, 598], [105, 60, 195, 760] if fused_across else [105, 60, 195, 598], [210, 60, 300, 598],
             [0, 625, 90, 1000], [105, 770, 195, 1000], [210, 625, 300, 1000]]
    if not fused_across:
        boxes.append([105, 625, 195, 760])
    return np.array(boxes, float), np.array(lines, float)


def test_rules_across_need_three_columns_breaking_together():
    from newsbag.fusion.rules import rules_across
    _, lines = _feuilleton_page()
    bounds = np.array([98.0, 203.0])
    assert rules_across(lines, bounds, 20, 10).tolist() == [pytest.approx(611, abs=2)]
    # two columns breaking together are paragraphs that happen to end on one line
    assert rules_across(lines[lines[:, 0] < 200], bounds, 20, 10).size == 0
    # a column that runs on through the break: no rule
    running = np.array([ln for ln in _column_lines(210, 300, 60, 1000)], float)
    assert rules_across(np.concatenate([lines[lines[:, 0] < 200], running]), bounds, 20, 10).size == 0


def test_the_us_sample_has_no_rule_across_its_columns():
    # six columns of short items whose headline gaps meet near y 597 within a few pixels:
    # no rule there (the scan shows running text), so no region is cut at it
    from newsbag.fusion.grid import line_grid
    from newsbag.fusion.rules import rules_across
    xyxy, width, height, lines, text = _port_gibson("paragraphs")
    grid = line_grid(lines, width)
    assert len(grid.bounds) == 5 and rules_across(grid.ev, grid.bounds, grid.poke, grid.line_h).size == 0

def test_a_box_fused_over_the_feuilleton_rule_is_read_in_its_two_parts():
    # The body's three columns are read before the feuilleton under the rule; the box fused
    # over the rule is cut there, and its lower part is read in the feuilleton's column 1.
    boxes, lines = _feuilleton_page()
    text = np.ones(len(boxes), bool)
    parts, box, rank = reading_order_parts(boxes, 300, 1000, lines=lines, text=text)
    assert box.tolist() == [0, 1, 1, 2, 3, 4, 5]
    assert parts[1, 3] <= 611 <= parts[2, 1]
    assert box[np.argsort(rank)].tolist() == [0, 1, 2, 3, 1, 4, 5]
    # the same page without the fused box reads the same way
    whole, lines = _feuilleton_page(fused_across=False)
    assert np.argsort(reading_order(whole, 300, 1000, lines=lines, text=np.ones(len(whole), bool))).tolist() == [
        0, 1, 2, 3, 6, 4, 5]


def test_the_rule_is_cut_when_each_column_s_last_line_holds_it():
    # The line detector boxes each column's last line together with the rule under it (a box
    # taller than a line, reaching past the rule), cut at the gutters: one such box per column.
    # It is no single line running over the rule, so the box fused over the rule is still cut.
    boxes, lines = _feuilleton_page()
    held = np.array([[x0 - 3, 588, x1 + 3, 616] for x0, x1 in [(0, 90), (105, 195), (210, 300)]], float)
    text = np.ones(len(boxes), bool)
    parts, box, rank = reading_order_parts(boxes, 300, 1000, lines=np.concatenate([lines, held]), text=text)
    assert box.tolist() == [0, 1, 1, 2, 3, 4, 5]
    assert parts[1, 3] <= 616 and parts[2, 1] >= 611
    assert box[np.argsort(rank)].tolist() == [0, 1, 2, 3, 1, 4, 5]


def test_a_scan_edge_over_the_rule_does_not_hide_it():
    # a picture along the page's edge (the scan's margin, half the page tall) crosses the rule:
    # only text stops the cut, so the feuilleton is still read after the body
    boxes, lines = _feuilleton_page()
    boxes = np.concatenate([boxes, [[0, 300, 4, 900]]])
    text = np.r_[np.ones(len(boxes) - 1, bool), False]
    parts, box, rank = reading_order_parts(boxes, 300, 1000, lines=lines, text=text)
    read = [b for b in box[np.argsort(rank)].tolist() if b != 6]
    assert read == [0, 1, 2, 3, 1, 4, 5]


def test_columns_whose_paragraphs_end_on_one_line_are_read_column_by_column():
    # Under a notice over both columns, the paragraphs of both columns end at y 390 and the
    # next ones start on the next line: one body, read column by column, not in two bands.
    boxes = np.array([[0, 0, 200, 40], [0, 50, 95, 390], [105, 50, 200, 390], [0, 395, 95, 900],
                      [105, 395, 200, 900]], float)
    lines = np.array([[0, 5, 200, 15], [0, 20, 200, 30]] + _column_lines(0, 95, 50, 390)
                     + _column_lines(105, 200, 50, 390) + _column_lines(0, 95, 395, 900)
                     + _column_lines(105, 200, 395, 900), float)
    rank = reading_order(boxes, 200, 900, lines=lines, text=np.ones(len(boxes), bool))
    assert np.argsort(rank).tolist() == [0, 1, 3, 2, 4]
