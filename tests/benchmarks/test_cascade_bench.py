"""benchmarks/cascade_bench.py scores a rule on a bag's readings as the transcription stage applies it."""

import pytest

from newsbag.transcription.options import Cascade
from nbtest import REPO


@pytest.fixture
def cascade_bench(monkeypatch):
    monkeypatch.syspath_prepend(str(REPO / "benchmarks"))
    import cascade_bench
    return cascade_bench


def _line(order, text, score, width=200):
    return {"bbox_xyxy": [0, 20 * order, width, 20 * order + 10], "order": order, "text": text, "score": score}


def _page():
    ppocr = [_line(0, "behandeltgegen", 0.95), _line(1, "Zeitung", 0.99, width=100), _line(2, "98mm67k2", 0.3)]
    tess = [_line(0, "behandelt gegen", 0.9), _line(1, "Zeitnng", 0.5, width=100), _line(2, "2a1", 0.4)]
    return {"half": "A", "lines": {"ppocr": ppocr, "tesseract": tess}}


def test_a_cascade_votes_only_the_lines_sent_and_counts_their_width(cascade_bench):
    lines, sent, width = cascade_bench.page_lines(_page(), Cascade(score_below=0.97), ("ppocr", "tesseract"), 0.0)
    # lines 0 and 2 go to Tesseract (under 0.97); line 1 keeps PP-OCRv6's reading alone
    assert (sent, width) == (2, 200 + 200)
    assert [len(line["readings"]) for line in lines] == [2, 1, 2]
    assert lines[1]["text"] == "Zeitung"


def test_the_noise_rule_leaves_out_a_line_every_reading_scored_low(cascade_bench):
    lines, _, _ = cascade_bench.page_lines(_page(), None, ("ppocr", "tesseract"), 0.5)
    assert [line["text"] == "" for line in lines] == [False, False, True]
    assert lines[2]["noise"]
    alone, sent, _ = cascade_bench.page_lines(_page(), None, ("ppocr",), 0.0)
    assert sent == 0 and [line["text"] for line in alone] == ["behandeltgegen", "Zeitung", "98mm67k2"]


def test_a_page_is_scored_by_its_transcript_read_with_the_rule_s_lines(cascade_bench):
    page = _page()
    boxes = [line["bbox_xyxy"] for line in page["lines"]["ppocr"]]
    # the transcript's layout: a line no recogniser read (its box matches none) counts as nothing
    page["record"] = {"regions": [{"lines": [{"bbox_xyxy": boxes[0], "text": "old"}]},
                                  {"lines": [{"bbox_xyxy": boxes[1], "text": "old"},
                                             {"bbox_xyxy": [0, 0, 1, 1], "text": "old"}]}]}
    page["ref"] = "behandelt gegen\n\nZeitung"
    scores = cascade_bench.score([page], None, ("ppocr",))
    chars = len("behandelt gegen Zeitung")
    assert (scores["A"], scores["B"], scores["all"]) == (1 / chars, 0.0, 1 / chars)   # the space PP-OCRv6 dropped
    assert all(line["text"] == "old" for region in page["record"]["regions"] for line in region["lines"])
