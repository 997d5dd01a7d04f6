"""The transcription stage with the Tesseract recogniser (Debian traineddata) on a rendered two-column page."""

import json
import sys
from pathlib import Path

import pytest
from PIL import Image

from newsbag import rundir
from newsbag.resources import runners_dir
from newsbag.transcription.transcript import crop_plan
from newsbag.transcription.stage import run_transcription
from stage_kit import HEADLINE, LEFT, RIGHT, needs_traineddata, words, write_run

pytest.importorskip("tesserocr")
sys.path.insert(0, str(runners_dir()))
import recognize_tesseract  # noqa: E402  (runners/ is not a package)

needs = needs_traineddata("eng", "Fraktur")


@needs
@pytest.mark.parametrize(("read", "unit", "crops"), [("auto", "region", 3), ("regions", "region", 3),
                                                     ("lines", "line", 7)])
def test_tesseract_reads_the_lines_with_word_boxes_and_confidences(tmp_path, read, unit, crops):
    # Whole regions (Tesseract finds their lines; the default) or the line source's lines: the same lines come out.
    run = write_run(tmp_path)
    options = {"recognizer_family": "recognize_tesseract", "recognizer": {"models": ["eng"]}, "read": read}
    assert run_transcription(run, ["p1"], options)["ok"] == 1
    plan = json.loads((rundir.transcript_dir(run, "C") / "_plan" / "p1.json").read_text())
    assert plan["units"] == [unit] * crops
    record = json.loads((rundir.transcript_dir(run, "C") / "p1.json").read_text())
    assert record["models"] == ["eng"]
    assert len(words(record["regions"][0]["text"]) & words(HEADLINE)) >= 3
    for region, expected in ((record["regions"][1], LEFT), (record["regions"][2], RIGHT)):
        assert len(region["lines"]) == 3
        for line, want in zip(region["lines"], expected):   # clean print: Tesseract reads it nearly perfectly
            assert len(words(line["text"]) & words(want)) >= len(want.split()) - 1, (line, want)
            assert line["model"] == "eng" and 0 < line["score"] <= 1
            assert [w["text"] for w in line["words"]] == line["text"].split()
            x0, y0, x1, y1 = line["bbox_xyxy"]
            for word in line["words"]:   # page pixels, inside the line read
                wx0, wy0, wx1, wy1 = word["bbox_xyxy"]
                assert x0 - 1 <= wx0 < wx1 <= x1 + 1 and y0 - 1 <= wy0 < wy1 <= y1 + 1
                assert 0 <= word["score"] <= 1
            assert line["score"] == pytest.approx(sum(w["score"] for w in line["words"]) / len(line["words"]), abs=1e-4)


@needs
def test_with_two_models_each_page_is_read_by_the_more_confident_and_says_which(tmp_path):
    run = write_run(tmp_path)
    options = {"recognizer_family": "recognize_tesseract", "recognizer": {"models": ["Fraktur", "eng"]}}
    assert run_transcription(run, ["p1"], options)["ok"] == 1
    record = json.loads((rundir.transcript_dir(run, "C") / "p1.json").read_text())
    # an Antiqua page: the English model is the more confident, listed second or not
    assert record["models"] == ["eng"]
    assert {line["model"] for region in record["regions"] for line in region["lines"]} == {"eng"}


def test_a_missing_traineddata_is_one_line_naming_the_debian_package(tmp_path):
    """The page is still read (by PP-OCRv6, from pip alone), and the note says how to get Tesseract's model."""
    run = write_run(tmp_path)
    options = {"recognizer_family": "recognize_tesseract",
               "recognizer": {"models": ["Fraktur"], "tessdata": str(tmp_path / "empty")}}
    summary = run_transcription(run, ["p1"], options)
    message = summary["recognizer_note"]
    assert summary["ok"] == 1 and "\n" not in message
    assert "Fraktur.traineddata not found in" in message and "apt-get install tesseract-ocr-script-frak" in message
    assert message.endswith("reading with recognize (PP-OCRv6) instead")


@pytest.mark.parametrize("model, package", [
    ("Fraktur", "tesseract-ocr-script-frak"),   # Debian's script/Fraktur
    ("frk", "tesseract-ocr-frk"),
    ("deu", "tesseract-ocr-deu"),
    ("eng", "tesseract-ocr-eng"),
    ("script/Latin", "tesseract-ocr-script-latn"),
])
def test_package_for(model, package):
    assert recognize_tesseract.package_for(model) == package


def _doctor_config(recognizer):
    return {"version": 1, "stages": [{"name": "transcription", "kind": "transcription",
                                      "recognizer_family": "recognize_tesseract", "recognizer": recognizer}]}


def test_doctor_says_which_traineddata_it_found_or_which_package_is_missing(tmp_path):
    from newsbag.doctor import format_doctor_table, run_doctor

    (tmp_path / "tessdata").mkdir()
    (tmp_path / "tessdata" / "frk.traineddata").write_bytes(b"not empty")
    (row,) = run_doctor(_doctor_config({"models": ["frk"], "tessdata": str(tmp_path / "tessdata")}), run_page=None)
    assert (row["stage"], row["family"], row["ready"]) == ("transcription", "recognize_tesseract", True)
    assert f"transcription/lines: found {tmp_path / 'tessdata' / 'frk.traineddata'}" in format_doctor_table([row])
    (row,) = run_doctor(_doctor_config({"models": ["frk", "deu"], "tessdata": str(tmp_path / "tessdata")}),
                        run_page=None)
    assert not row["ready"]
    assert row["problems"] == [f"weights: recognize_tesseract: deu.traineddata not found in {tmp_path / 'tessdata'}; "
                               "apt-get install tesseract-ocr-deu, or set params.tessdata to a folder holding "
                               "deu.traineddata"]


SAMPLE = Path(__file__).resolve().parents[3] / "shared" / "samples" / "port_gibson_reveille_1921-03-03_p1.png"


@needs
@pytest.mark.skipif(not SAMPLE.is_file(), reason="the US sample page is in ../shared/samples")
def test_a_word_tesseract_finds_but_reads_no_text_in_is_left_out_not_a_failed_page(tmp_path):
    # a 37 x 12 px crop of the US sample's masthead where Tesseract's word iterator has a
    # word without text (tesserocr raised "No text returned" and the page failed)
    box = [39.44, 284.9, 76.93, 296.55]
    with Image.open(SAMPLE) as im:
        size = list(im.size)
    (tmp_path / "p.json").write_text(json.dumps(crop_plan([box], ["line"], size)))
    reader = recognize_tesseract.TesseractRecognizer(
        {"models": ["eng"], "tessdata": "", "sample_lines": 24, "recheck_below": 0.6, "plan_dir": str(tmp_path)}, "cpu", True)
    (line,) = reader.detect(str(SAMPLE), {"page_id": "p"})
    reader.close()
    assert (line["bbox_xyxy"], line["order"]) == (box, 0)
    assert line["text"] == " ".join(w["text"] for w in line["words"])


def test_the_model_choice_samples_crops_spread_over_the_page():
    assert recognize_tesseract.spread_order(7) == [3, 1, 5, 0, 2, 4, 6]
    assert sorted(recognize_tesseract.spread_order(100)) == list(range(100))
    assert sorted(recognize_tesseract.spread_order(100)[:4]) == [12, 25, 50, 75]
    assert recognize_tesseract.spread_order(0) == []


class _FakeApi:
    def SetImage(self, image):
        pass


def test_the_model_choice_weighs_words_not_lines():
    # Fraktur reads the sample's text lines well but finds no word in two crops that hold no
    # text (a rule, a speck); eng reads every crop poorly. As line means the empty crops count
    # as two lines at 0 and eng would win; words are what the page's text is made of.
    def line(*scores):
        return [{"text": "w " * len(scores), "score": sum(scores) / len(scores) if scores else 0.0,
                 "words": [{"text": "w", "score": s} for s in scores]}]

    readings = {"Fraktur": [line(0.9, 0.9), line(), line(0.85, 0.9, 0.9), line()],
                "eng": [line(0.7, 0.7), line(0.6), line(0.7, 0.7, 0.7), line(0.6)]}
    reader = recognize_tesseract.TesseractRecognizer.__new__(recognize_tesseract.TesseractRecognizer)
    reader.apis = {"Fraktur": _FakeApi(), "eng": _FakeApi()}
    reader.sample_lines = 4
    seen = {id(api): model for model, api in reader.apis.items()}
    reader._read = lambda api, box, unit: readings[seen[id(api)]][box]
    chosen, read = reader._choose(None, [], [], [0, 1, 2, 3])
    assert chosen == "Fraktur"
    assert read[0] == readings["Fraktur"][0]
