"""benchmarks/text_agreement.py: clean lines and agreement of a bag's readings, without ground truth."""

import doctest
import sys

import pytest

from nbtest import REPO

sys.path.insert(0, str(REPO / "benchmarks"))
import text_agreement  # noqa: E402


def test_doctests():
    assert doctest.testmod(text_agreement).failed == 0


@pytest.mark.parametrize("text, clean", [
    ("The ships came home,", True),
    ("PORT GIBSON", True),
    ("Mrs. J. S. Smith, $4.50", True),    # initials, a title and an amount
    ("tbe sh1ps", False),                 # a digit inside a word
    ("‘ordered thas the Com-", True),     # a misspelling is not noise: no dictionary
    ("» yeas Ka", False),                 # a stray mark
    ("It", False),                        # under 3 characters
])
def test_a_line_is_clean_when_each_word_is_plausible(text, clean):
    assert text_agreement.clean(text) is clean


def test_summary_counts_clean_lines_winners_and_agreement():
    lines = [{"text": "the town", "won": "a", "readings": [{"recognizer": "a", "text": "the town"},
                                                           {"recognizer": "b", "text": "tbe t0wn"}]},
             {"text": "met on", "won": "vote", "readings": [{"recognizer": "a", "text": "met on"},
                                                            {"recognizer": "b", "text": "met  on"}]}]
    result = text_agreement.summarise(lines)
    assert result["lines"] == 2
    assert result["clean"] == {"a": 1.0, "b": 0.5, "vote": 1.0}
    assert result["won"] == {"a": 0.5, "b": 0.0, "vote": 0.5}
    # identical after collapsing spaces: the second line; agreement (1 - 2/8) and (1 - 1/7)
    assert result["pairs"]["a~b"] == pytest.approx((0.5, ((1 - 2 / 8) + (1 - 1 / 7)) / 2))
