"""The recogniser bag of the transcription stage: options, line pairing and vote, members left out."""

import json

import pytest

from newsbag import rundir
from newsbag.manifest import read_pages
from newsbag.transcription.stage import run_transcription, transcript_status
from newsbag.transcription.bag import voted_lines
from newsbag.transcription.options import BagMember, crop_unit, parse_transcription_options
from stage_kit import LEFT, empty_tessdata, needs_traineddata, record_lines, write_run

TESS = BagMember("recognize_tesseract", "tess")
PPOCR = BagMember("recognize", "ppocr")


def _line(order, text, score, words=None):
    line = {"bbox_xyxy": [0, 10 * order, 100, 10 * order + 9], "label": "text_line", "order": order, "text": text,
            "score": score}
    return {**line, "words": words} if words is not None else line


def test_lines_are_paired_by_crop_and_voted_with_every_reading_recorded():
    words = [{"bbox_xyxy": [0, 0, 40, 9], "text": "behandelt", "score": 0.9},
             {"bbox_xyxy": [45, 0, 90, 9], "text": "gegen", "score": 0.8}]
    read = [(TESS, [_line(0, "behandelt gegen", 0.85, words), _line(2, "", 0.0, [])]),
            (PPOCR, [_line(0, "behandeltgegen", 0.8), _line(1, "Zürich", 0.7), _line(2, "Bern", 0.6)])]
    lines = voted_lines(read, "rover")
    assert [line["order"] for line in lines] == [0, 1, 2]
    # Tesseract is the pivot (0.85 > 0.8); its space (confidence (0.9 + 0.8) / 2) outweighs
    # PP-OCR's gap (its line score 0.8): Tesseract's line wins whole, with its word boxes
    assert (lines[0]["text"], lines[0]["won"], lines[0]["words"]) == ("behandelt gegen", "tess", words)
    assert lines[0]["readings"] == [{"recognizer": "tess", "text": "behandelt gegen", "score": 0.85},
                                    {"recognizer": "ppocr", "text": "behandeltgegen", "score": 0.8}]
    # a crop one member did not return (dropped as degenerate) is read by the other alone
    assert (lines[1]["text"], lines[1]["won"], len(lines[1]["readings"])) == ("Zürich", "ppocr", 1)
    # Tesseract found nothing: its empty reading does not vote, and no word boxes of it are kept
    assert (lines[2]["text"], lines[2]["won"], "words" in lines[2]) == ("Bern", "ppocr", False)
    assert lines[2]["bbox_xyxy"] == _line(2, "", 0)["bbox_xyxy"]


def test_the_confident_method_takes_a_whole_line():
    read = [(TESS, [_line(0, "Zeitung", 0.7)]), (BagMember("recognize", "ppocr", weight=0.5), [_line(0, "Zeituug", 0.9)])]
    # 0.7 × 1 > 0.9 × 0.5
    assert [(line["text"], line["won"]) for line in voted_lines(read, "confident")] == [("Zeitung", "tess")]


@pytest.mark.parametrize("options, message", [
    ({"recognizers": [{"family": "recognize"}, {"family": "recognize"}]},
     "recognizers: two members named 'recognize'; give each a name"),
    ({"recognizers": [{"family": "recognize", "colour": 1}]}, "recognizers[0]: unknown key 'colour' (known: family, min_score, name, recognizer, weight)"),
    ({"recognizers": [{"family": "kraken"}]},
     "recognizers[0]: family must be one of recognize, recognize_tesseract, got 'kraken'"),
    ({"recognizers": [{"family": "recognize", "weight": 0}]}, "recognizers[0]: weight must be a number > 0, got 0"),
    ({"recognizers": {"family": "recognize"}}, "recognizers must be a list of objects"),
    ({"vote": "best"}, "vote must be one of rover, confident, got 'best'"),
    ({"read": "regions", "recognizers": [{"family": "recognize_tesseract"}, {"family": "recognize"}]},
     "read 'regions' with a recogniser bag"),
])
def test_bad_bag_options_are_refused_in_one_line(options, message):
    with pytest.raises(ValueError) as exc:
        parse_transcription_options(options)
    assert str(exc.value).startswith("transcription stage: ") and message in str(exc.value)


def test_a_bag_reads_lines_even_where_its_members_could_read_regions():
    bag = parse_transcription_options({"recognizers": [{"family": "recognize_tesseract"}, {"family": "recognize"}]})
    assert crop_unit(bag) == "line"
    assert crop_unit(parse_transcription_options({"recognizer_family": "recognize_tesseract"})) == "region"


def _bag(tessdata):
    return {"recognizers": [{"family": "recognize", "name": "latin"},
                            {"family": "recognize", "name": "any", "recognizer": {"script": "any"}},
                            {"family": "recognize_tesseract", "name": "tess",
                             "recognizer": {"models": ["eng"], "tessdata": str(tessdata)}}]}


@pytest.mark.slow
def test_a_member_whose_model_is_missing_is_left_out_with_a_note_and_the_others_vote(tmp_path):
    pytest.importorskip("rapidocr_onnxruntime")
    run = write_run(tmp_path)
    empty = empty_tessdata(tmp_path)
    result = run_transcription(run, ["p1"], _bag(empty))
    assert (result["ok"], result["failed"], "notes" in result) == (1, 0, False)
    # asked before reading (`recognizer_choice`): the bag reads without it, said in one line
    assert result["recognizer_note"].startswith("transcription: recognize_tesseract: eng.traineddata not found in ")
    assert result["recognizer_note"].endswith("; reading with the other recognisers instead")
    record = json.loads((rundir.transcript_dir(run, "C") / "p1.json").read_text())
    lines = record_lines(record)
    assert len(lines) == 7   # the headline and 3 lines per column, each read by both PP-OCR members
    for line in lines:
        assert [r["recognizer"] for r in line["readings"]] == ["latin", "any"]
        assert line["won"] in ("latin", "any", "vote")
        assert line["text"] == (next(r["text"] for r in line["readings"] if r["recognizer"] == line["won"])
                                if line["won"] != "vote" else line["text"])
    assert record["regions"][1]["text"].splitlines()[0].lower().split()[:2] == LEFT[0].lower().split()[:2]
    # a rerun finds it current; another weight of a member makes it stale
    assert run_transcription(run, ["p1"], _bag(empty))["skipped"] == 1
    reweighed = _bag(empty)
    reweighed["recognizers"][1]["weight"] = 2.0
    (current,) = transcript_status(run, read_pages(run), _bag(empty))
    (stale,) = transcript_status(run, read_pages(run), reweighed)
    assert (current.done, current.stale, stale.done, stale.stale) == (1, 0, 0, 1)


@pytest.mark.slow
@needs_traineddata("eng")
def test_a_bag_with_tesseract_records_both_readings_of_each_line(tmp_path):
    pytest.importorskip("rapidocr_onnxruntime")
    run = write_run(tmp_path)
    options = {"recognizers": [{"family": "recognize", "name": "ppocr"},
                               {"family": "recognize_tesseract", "name": "tess", "recognizer": {"models": ["eng"]}}]}
    result = run_transcription(run, ["p1"], options)
    assert (result["ok"], "notes" in result) == (1, False)
    record = json.loads((rundir.transcript_dir(run, "C") / "p1.json").read_text())
    for line in record_lines(record):
        assert [r["recognizer"] for r in line["readings"]] == ["ppocr", "tess"]
