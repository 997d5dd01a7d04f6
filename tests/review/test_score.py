"""Informativeness scores: matching rate, text-line coverage and the page score."""

from __future__ import annotations

import numpy as np
import pytest

from newsbag import labels
from newsbag.contract import Boxes, PageMeta
from newsbag.review.score import line_coverage, match_rate, score_page


def boxes(xyxy, label="text") -> Boxes:
    xyxy = np.asarray(xyxy, float).reshape(-1, 4)
    n = len(xyxy)
    names = label if isinstance(label, list) else [label] * n
    return Boxes(xyxy=xyxy, score=np.full(n, 0.9), label=[labels.label_code(x) for x in names],
                 meta=PageMeta("p", 100, 100))


@pytest.mark.parametrize("a, b, b_label, expected", [
    ([[0, 0, 10, 10]], [[0, 0, 10, 10]], "text", 1.0),            # identical
    ([], [], "text", 1.0),                                         # both empty agree
    ([[0, 0, 10, 10]], [], "text", 0.0),                           # one empty
    ([[0, 0, 10, 10]], [[0, 0, 10, 20]], "text", 1.0),             # IoU 100/200 = 0.5 counts
    ([[0, 0, 10, 10]], [[5, 0, 15, 10]], "text", 0.0),             # IoU 50/150 < 0.5
    ([[0, 0, 10, 10]], [[0, 0, 10, 10]], "image", 0.0),            # same box, other coarse class
    ([[0, 0, 10, 10]], [[0, 0, 10, 10]], "caption", 1.0),          # caption is coarse text too
    ([[0, 0, 10, 10], [50, 50, 60, 60]], [[0, 0, 10, 10]], "text", 2 / 3),  # 1 + 1 of 3 boxes
])
def test_match_rate(a, b, b_label, expected):
    assert match_rate(boxes(a), boxes(b, b_label)) == pytest.approx(expected)


@pytest.mark.parametrize("lines, regions, region_labels, expected", [
    ([[0, 0, 10, 2]], [[5, 0, 20, 10]], ["text"], 1.0),                   # exactly 50 % inside
    ([[0, 0, 10, 2]], [[6, 0, 20, 10]], ["text"], 0.0),                   # 40 % inside
    ([[0, 0, 10, 2]], [[0, 0, 20, 10]], ["image"], 0.0),                  # inside an image is not text
    ([[0, 0, 10, 2]], [[0, 0, 20, 10]], ["headline"], 1.0),               # titles hold text
    ([[0, 0, 10, 2], [50, 50, 60, 52]], [[0, 0, 20, 10]], ["text"], 0.5),  # one of two lines
    ([[0, 0, 10, 2]], [[0, 0, 4, 10], [4, 0, 8, 10]], ["text", "text"], 0.0),  # 40 % + 40 % in two boxes
    ([[0, 0, 10, 2]], [], [], 0.0),                                       # no regions at all
])
def test_line_coverage(lines, regions, region_labels, expected):
    assert line_coverage(boxes(lines, "text_line"), boxes(regions, region_labels)) == pytest.approx(expected)


def test_line_coverage_without_lines_is_none():
    assert line_coverage(boxes([], "text_line"), boxes([[0, 0, 10, 10]])) is None


BOX = [[0, 0, 50, 50]]
FAR = [[60, 60, 90, 90]]
LINE_IN = [[5, 5, 45, 10]]


def test_agreeing_page_scores_zero():
    s = score_page({"a/x": boxes(BOX), "b/y": boxes(BOX), "l/z": boxes(LINE_IN, "text_line")},
                   fused=boxes(BOX), failed_sources=[])
    assert (s.source_disagreement, s.fused_disagreement, s.line_coverage, s.failed_share) == (0.0, 0.0, 1.0, 0.0)
    assert s.review_priority == 0.0
    assert s.reasons == ["no threshold crossed; ranked by review priority"]


def test_disagreeing_page_sums_its_components():
    # a/x and b/y disjoint -> source disagreement 1; fused = a/x -> 1 - mean(1, 0) = 0.5;
    # the line lies in a/x's box, which the fused layout keeps -> coverage 1; c/w failed: 1/3.
    s = score_page({"a/x": boxes(BOX), "b/y": boxes(FAR)}, fused=boxes(BOX), failed_sources=["c/w"])
    assert s.source_disagreement == 1.0
    assert s.fused_disagreement == 0.5
    assert s.line_coverage is None
    assert s.failed_share == pytest.approx(round(1 / 3, 4))
    assert s.review_priority == pytest.approx(1.0 + 0.5 + round(1 / 3, 4), abs=1e-4)
    assert s.reasons[0] == "1/3 sources failed (c/w)"
    assert any(r.startswith("sources disagree: 100%") for r in s.reasons)
    assert any(r.startswith("fused layout differs from members: 50%") for r in s.reasons)


def test_line_only_source_is_not_a_block_source_and_coverage_uses_sources_without_fused():
    s = score_page({"a/x": boxes(BOX), "l/z": boxes(LINE_IN + [[70, 70, 90, 75]], "text_line")},
                   fused=None, failed_sources=[])
    assert s.source_disagreement is None      # only one block source
    assert s.fused_disagreement is None
    assert s.line_coverage == 0.5             # second line lies outside a/x's box
    assert s.review_priority == 0.5
    assert s.reasons == ["low text-line coverage: 50% of lines inside a text region"]
