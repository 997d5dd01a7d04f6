"""The pick of pages to correct: disagreement first, spread over issues, years and layouts; issue and layout keys."""

from __future__ import annotations

import random

import numpy as np
import pytest

from newsbag.suggest import SPREAD_PENALTY, PageFacts, issue_of, layout_signature, pick_pages


def _pages(issue: str, k: int, disagreement: float, year: str | None = "1900", layout: str = "4 col, 30-99 regions",
           start: int = 0) -> list[PageFacts]:
    return [PageFacts(f"{issue}__p{start + j:03d}", disagreement, issue, year, layout) for j in range(k)]


def _ids(picks) -> list[str]:
    return [p.facts.page_id for p in picks]


def test_one_loud_issue_does_not_take_every_pick():
    # 30 pages of one issue that disagree most, 5 of other issues (other years) that disagree less:
    # after the first page of the loud issue, the others come first, one each.
    loud = _pages("a", 30, 0.9, year="1900")
    quiet = [p for k in range(5) for p in _pages(f"q{k}", 1, 0.5, year=str(1901 + k))]
    picks = pick_pages(loud + quiet, 6)
    assert _ids(picks) == ["a__p000", "q0__p000", "q1__p000", "q2__p000", "q3__p000", "q4__p000"]
    # the second pick's gain: its disagreement less the shared layout of the one page picked
    assert picks[1].gain == pytest.approx(0.5 - SPREAD_PENALTY["layout"])


def test_back_to_the_loud_issue_once_the_others_are_used():
    loud = _pages("a", 30, 0.9)
    quiet = [p for k in range(5) for p in _pages(f"q{k}", 1, 0.5, year=str(1901 + k))]
    picks = pick_pages(loud + quiet, 8)
    assert [p.facts.issue for p in picks] == ["a", "q0", "q1", "q2", "q3", "q4", "a", "a"]
    # the 7th: 0.9 less one shared issue, one shared year, six shared layouts
    assert picks[6].gain == pytest.approx(0.9 - SPREAD_PENALTY["issue"] - SPREAD_PENALTY["year"]
                                          - 6 * SPREAD_PENALTY["layout"])


@pytest.mark.parametrize("quiet, expected", [
    # a page of a new issue, year and layout loses to one more of the picked issue when it
    # disagrees less by more than the issue, year and layout penalties together (0.9 - 0.8 = 0.1)
    (0.05, ["a__p000", "a__p001"]),
    (0.15, ["a__p000", "b__p000"]),   # 0.15 > 0.1: the new issue
])
def test_penalty_is_weighed_against_disagreement(quiet, expected):
    pages = _pages("a", 3, 0.9) + _pages("b", 1, quiet, year="1950", layout="2 col, <10 regions")
    assert _ids(pick_pages(pages, 2)) == expected


def test_layout_and_year_spread_within_one_issue():
    # one issue: a page of another layout beats one more of the picked layout
    same = _pages("a", 3, 0.8, layout="4 col, 30-99 regions")
    other = _pages("a", 1, 0.75, layout="2 col, 10-29 regions", start=10)
    assert _ids(pick_pages(same + other, 2)) == ["a__p000", "a__p010"]


def test_unknown_year_is_no_shared_year():
    pages = [PageFacts("x", 0.9, "i1", None, "L1"), PageFacts("y", 0.7, "i2", None, "L2"),
             PageFacts("z", 0.75, "i3", "1900", "L3")]
    picks = pick_pages(pages, 2)
    assert _ids(picks) == ["x", "z"]
    assert picks[1].gain == 0.75   # nothing shared with x


@pytest.mark.parametrize("pages, n, expected", [
    ([], 5, []),                                                          # nothing to pick
    (_pages("a", 2, 0.5), 0, []),                                         # none asked
    (_pages("a", 2, 0.5), 5, ["a__p000", "a__p001"]),                     # fewer pages than asked
    ([PageFacts("b", 0.5, "i", None, "L"), PageFacts("a", 0.5, "j", None, "M")], 1, ["a"]),   # tie: smaller id
])
def test_edge_cases(pages, n, expected):
    assert _ids(pick_pages(pages, n)) == expected


def test_pick_is_deterministic_whatever_the_input_order():
    pages = [p for k in range(6) for p in _pages(f"i{k}", 4, 0.1 * k, year=str(1900 + k % 2))]
    first = _ids(pick_pages(pages, 10))
    shuffled = pages[:]
    random.Random(7).shuffle(shuffled)
    assert _ids(pick_pages(shuffled, 10)) == first
    assert [p.rank for p in pick_pages(shuffled, 10)] == list(range(1, 11))


@pytest.mark.parametrize("page_id, issue, year", [
    ("nzz_17810901_0_0_a1_p1_1-0a1b2c3d", "1781-09-01", "1781"),                 # YYYYMMDD in the stem
    ("sn84026749__1908-03-12__ed-1__seq-1-0a1b2c3d", "1908-03-12", "1908"),      # date folder
    ("paper__1921_07_04__p3-0a1b2c3d", "1921-07-04", "1921"),                    # YYYY_MM_DD
    ("issue7__p1-0a1b2c3d", "issue7", None),                                     # folder, no year
    ("paper__1921__p3-0a1b2c3d", "paper/1921", "1921"),                          # a year, no date
    ("scan12-0a1b2c3d", "scan12", None),                                         # no folder: the page alone
    ("a__b__c-0a1b2c3d", "a/b", None),                                           # nested folders
    ("x__12345678901-0a1b2c3d", "x", None),                                      # digits that hold no date
    ("x__1921-13-04-0a1b2c3d", "x", "1921"),                                     # month 13: no date, a year
])
def test_issue_of(page_id, issue, year):
    assert issue_of(page_id) == (issue, year)


def _column(x0: float, x1: float, k: int = 6) -> list[list[float]]:
    return [[x0, 100 * j, x1, 100 * j + 80] for j in range(k)]


@pytest.mark.parametrize("boxes, n_regions, expected", [
    ([], 0, "1 col, <10 regions"),
    (_column(0, 900), 6, "1 col, <10 regions"),
    (_column(0, 280) + _column(320, 600) + _column(640, 1000), 18, "3 col, 10-29 regions"),
    ([b for k in range(10) for b in _column(100 * k, 100 * k + 90)], 60, "8+ col, 30-99 regions"),
    (_column(0, 450) + _column(550, 1000), 250, "2 col, 100+ regions"),
])
def test_layout_signature(boxes, n_regions, expected):
    assert layout_signature(np.asarray(boxes, float).reshape(-1, 4), n_regions, 1000) == expected
