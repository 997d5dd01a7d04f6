"""The vote of one line's readings (newsbag.transcription.vote): alignment, weights, ties, empty readings."""

import doctest

import pytest

from newsbag.transcription import vote as text_vote
from newsbag.transcription.vote import NOBODY, VOTED, Reading, more_confident_line, rover_line, vote_line


def test_doctests():
    assert doctest.testmod(text_vote).failed == 0


@pytest.mark.parametrize("readings, text, won", [
    # two readings: a space the pivot dropped is inserted where the other reads it more confidently
    ([Reading("ppocr", "behandeltgegen", 0.6), Reading("tess", "behandelt gegen", 0.55, (0.9,) * 15)],
     "behandelt gegen", "tess"),
    # ... and not where the other's confidence there is lower than the pivot's line score
    ([Reading("ppocr", "behandeltgegen", 0.6), Reading("tess", "behandelt gegen", 0.55)],
     "behandeltgegen", "ppocr"),
    # three readings, each wrong in one place, the majority right everywhere: a text none of them has
    ([Reading("a", "Zeitnng", 0.9), Reading("b", "Zcitung", 0.8), Reading("c", "Zeitunq", 0.7)],
     "Zeitung", VOTED),
    # a deletion: two readings lack the pivot's stray character
    ([Reading("a", "Bern,.", 0.9), Reading("b", "Bern.", 0.6), Reading("c", "Bern.", 0.5)], "Bern.", "b"),
    # an insertion at the start and at the end
    ([Reading("a", "ürich", 0.9), Reading("b", "Zürich:", 0.6), Reading("c", "Zürich:", 0.5)], "Zürich:", "b"),
    # the pivot's reading of a place beats the others' when its weight is larger
    ([Reading("a", "Haus", 0.9, weight=3.0), Reading("b", "Hans", 0.8), Reading("c", "Hans", 0.8)], "Haus", "a"),
])
def test_rover_aligns_and_weighs(readings, text, won):
    vote = rover_line(readings)
    assert (vote.text, vote.won) == (text, won)


def test_rover_tie_goes_to_the_pivot_then_the_order_listed():
    # Equal weight × score: the first listed is the pivot; at the one differing place each
    # candidate has weight 0.8, and the pivot's wins.
    assert rover_line([Reading("a", "Kopf", 0.8), Reading("b", "Kops", 0.8)]) == rover_line(
        [Reading("a", "Kopf", 0.8), Reading("b", "Kops", 0.8)])
    assert rover_line([Reading("a", "Kopf", 0.8), Reading("b", "Kops", 0.8)]).text == "Kopf"
    assert rover_line([Reading("b", "Kops", 0.8), Reading("a", "Kopf", 0.8)]).text == "Kops"
    # the higher weighted score is the pivot whatever the order listed
    assert rover_line([Reading("b", "Kops", 0.7), Reading("a", "Kopf", 0.8)]).text == "Kopf"


@pytest.mark.parametrize("method", text_vote.METHODS)
def test_an_empty_reading_does_not_vote(method):
    # Tesseract returns nothing for the line: the other reading stands, its own score kept.
    vote = vote_line([Reading("tess", "", 0.0), Reading("ppocr", "Inserate", 0.7)], method)
    assert vote == text_vote.Vote("Inserate", 0.7, "ppocr")


@pytest.mark.parametrize("method", text_vote.METHODS)
def test_all_empty_is_an_empty_line_nobody_won(method):
    assert vote_line([Reading("tess", "", 0.0), Reading("ppocr", "", 0.0)], method) == text_vote.Vote("", 0.0, NOBODY)
    assert vote_line([], method) == text_vote.Vote("", 0.0, NOBODY)


def test_a_reading_under_its_min_score_does_not_vote():
    readings = [Reading("tess", "Zeitung", 0.8, min_score=0.85, weight=5.0), Reading("ppocr", "Zeituug", 0.9)]
    assert rover_line(readings).text == "Zeituug"
    assert rover_line([Reading("tess", "Zeitung", 0.9, min_score=0.85, weight=5.0),
                       readings[1]]).text == "Zeitung"


def test_more_confident_line_takes_the_best_weighted_score():
    readings = [Reading("tess", "Zeitung", 0.8, weight=1.2), Reading("ppocr", "Zeituug", 0.9)]
    # 0.8 × 1.2 = 0.96 > 0.9 × 1
    assert more_confident_line(readings) == text_vote.Vote("Zeitung", 0.8, "tess")


def test_rover_score_is_the_mean_best_confidence_of_the_characters_kept():
    vote = rover_line([Reading("a", "ab", 0.9, (0.9, 0.5)), Reading("b", "ab", 0.6, (0.6, 0.7))])
    assert vote.text == "ab" and vote.score == pytest.approx((0.9 + 0.7) / 2)


def test_bad_input_is_refused_in_one_line():
    with pytest.raises(ValueError, match="2 character scores for 3 characters"):
        Reading("a", "abc", 0.5, (0.5, 0.5))
    with pytest.raises(ValueError, match="unknown vote method 'best'; choose one of rover, confident"):
        vote_line([], "best")
