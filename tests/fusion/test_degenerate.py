import numpy as np
import pytest

from newsbag.fusion.degenerate import FEW_SHARE, PAGE_SIZED, PEER_MIN_TEXT, degenerate_reasons, largest_box_share

PAGE = "one page-sized box"


@pytest.mark.parametrize("n_regions, n_text, largest, peer, expected", [
    # the US page: cdla's one page-sized figure, the others find dozens
    ([1, 60, 45, 1400], [0, 58, 40, 1400], [0.97, 0.1, 0.1, 0.001], [True, True, True, False],
     [f"{PAGE} (97% of the page) where the other sources find 49 text regions (median)", "", "", ""]),
    # almost nothing: 2 text regions against a median of 40
    ([3, 40, 40], [2, 40, 40], [0.1, 0.05, 0.05], [True, True, True],
     ["2 text region(s) where the other sources find 40 text regions (median)", "", ""]),
    # at most FEW_SHARE of the peers' median: 5 of 50 is flagged, 6 is not
    ([5, 50, 50], [5, 50, 50], [0.1, 0.05, 0.05], [True, True, True],
     ["5 text region(s) where the other sources find 50 text regions (median)", "", ""]),
    ([6, 50, 50], [6, 50, 50], [0.1, 0.05, 0.05], [True, True, True], ["", "", ""]),
    # peers find few (a title page): no evidence against anyone
    ([1, 12, 10], [0, 12, 10], [0.97, 0.1, 0.1], [True, True, True], ["", "", ""]),
    # one page-sized box with many small ones beside it: a frame, not a degenerate answer
    ([30, 40, 40], [29, 40, 40], [0.9, 0.05, 0.05], [True, True, True], ["", "", ""]),
    # the line evidence is neither compared nor counted in the median: alone with it, nobody is flagged
    ([1, 1400], [0, 1400], [0.97, 0.001], [True, False], ["", ""]),
    # the line evidence with few lines is not compared
    ([60, 60, 0], [60, 60, 0], [0.1, 0.1, 0.0], [True, True, False], ["", "", ""]),
    # no sources (0,)
    ([], [], [], [], []),
])
def test_degenerate_reasons(n_regions, n_text, largest, peer, expected):
    args = [np.array(a) for a in (n_regions, n_text, largest, peer)]
    before = [a.copy() for a in args]
    assert degenerate_reasons(*args) == expected
    assert all(np.array_equal(a, b) for a, b in zip(args, before))   # inputs unchanged


def test_thresholds_are_the_documented_ones():
    assert (PEER_MIN_TEXT, PAGE_SIZED, FEW_SHARE) == (20, 0.5, 0.1)


@pytest.mark.parametrize("xyxy, expected", [
    ([], 0.0),                                          # no box
    ([[0, 0, 100, 50]], 0.5),                           # half the 100x100 page
    ([[0, 0, 10, 10], [0, 0, 100, 100]], 1.0),          # the largest counts
])
def test_largest_box_share(xyxy, expected):
    assert largest_box_share(np.array(xyxy, float), 100, 100) == pytest.approx(expected)
