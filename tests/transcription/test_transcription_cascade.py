"""A recogniser bag read as a cascade (which lines the later recognisers read), and noise lines left out."""

import doctest
import json

import pytest

from newsbag import rundir
from newsbag.transcription import cascade as transcription_cascade
from newsbag.manifest import read_pages
from newsbag.transcription.recognizer_choice import fallback, usable_recognizer
from newsbag.transcription.stage import run_transcription, transcript_status
from newsbag.transcription.bag import recognizer_record, bag_stages
from newsbag.transcription.cascade import NOISE, cascade_plan, noise_lines, unsure_lines
from newsbag.transcription.options import Cascade, parse_transcription_options
from stage_kit import empty_tessdata, needs_traineddata, record_lines, write_run


def test_doctests():
    assert doctest.testmod(transcription_cascade).failed == 0


def _line(order, text, score, width=300, height=30):
    return {"bbox_xyxy": [0, 40 * order, width, 40 * order + height], "order": order, "text": text, "score": score}


LINES = [_line(0, "Zürich, den 3. März", 0.97), _line(1, "", 0.0), _line(2, "Bern1", 0.62),
         _line(3, "Nr. 6", 0.95, width=150), _line(4, "behandeltgegen", 0.88), _line(5, "und die Stadt", 0.99)]


@pytest.mark.parametrize("rule, sent", [
    # under the score, or read as nothing
    (Cascade(score_below=0.9), [1, 2, 4]),
    (Cascade(score_below=0.7), [1, 2]),
    # only lines read as nothing
    (Cascade(score_below=0.0), [1]),
    # or narrower than 20 heights: 300 / 30 = 10 < 20, 150 / 30 = 5
    (Cascade(score_below=0.0, aspect_below=6), [1, 3]),
    (Cascade(score_below=0.0, aspect_below=20), [0, 1, 2, 3, 4, 5]),
])
def test_the_lines_sent_are_those_the_first_read_unsure(rule, sent):
    assert unsure_lines(LINES, rule) == sent


@pytest.mark.parametrize("share, sent", [
    # floor(share × 6 lines), the least confident first: the empty line, then 0.62, then 0.88
    (1.0, [1, 2, 4]), (0.5, [1, 2, 4]), (2 / 6, [1, 2]), (0.2, [1]), (0.1, []),
])
def test_the_share_of_lines_sent_is_bounded_least_confident_first(share, sent):
    assert unsure_lines(LINES, Cascade(score_below=0.9, max_share=share)) == sent
    assert len(unsure_lines(LINES, Cascade(score_below=1.0, max_share=share))) == int(share * len(LINES) + 1e-9)


def test_a_later_member_reads_a_plan_of_only_the_lines_sent():
    plan = {"crops": [[0, 0, 9, 9], [0, 10, 9, 19], [0, 20, 9, 29]], "units": ["line"] * 3, "size_wh": [100, 50],
            "sample": [], "crop_lines": [[], [], []], "transcript": {"page_id": "p1"}}
    sub = cascade_plan(plan, [0, 2])
    assert sub == {"crops": [plan["crops"][0], plan["crops"][2]], "units": ["line", "line"], "size_wh": [100, 50],
                   "sample": [], "crop_lines": [[], []], "orders": [0, 2]}
    assert cascade_plan(plan, [])["crops"] == []


def test_noise_lines_keep_their_reading_and_a_bag_line_needs_every_reading_low():
    single = [{"text": "98mm67k2", "score": 0.31}, {"text": "Zeitung", "score": 0.5}, {"text": "", "score": 0.0}]
    assert noise_lines(single, 0.5) == [{"text": "", "score": 0.31, NOISE: "98mm67k2"}, single[1], single[2]]
    assert noise_lines(single, 0.0) == single
    voted = {"text": "Bern", "score": 0.4, "readings": [{"recognizer": "ppocr", "text": "Bern", "score": 0.4},
                                                        {"recognizer": "tess", "text": "Bern", "score": 0.8}]}
    assert noise_lines([voted], 0.5) == [voted]
    assert noise_lines([voted], 0.9)[0][NOISE] == "Bern"


def _cascade(**rule):
    return {"recognizers": [{"family": "recognize", "name": "ppocr"},
                            {"family": "recognize_tesseract", "name": "tess", "recognizer": {"models": ["eng"]}}],
            "cascade": rule}


@pytest.mark.parametrize("options, message", [
    ({"cascade": {"score_below": 0.9}}, "cascade without a recogniser bag"),
    (_cascade(score_below=2), "cascade: score_below must be a number in [0, 1], got 2"),
    (_cascade(share=0.5), "cascade: unknown key 'share'"),
    ({"drop_below": -1}, "drop_below must be a number in [0, 1], got -1"),
])
def test_bad_cascade_options_are_refused_in_one_line(options, message):
    with pytest.raises(ValueError) as exc:
        parse_transcription_options(options)
    assert str(exc.value).startswith("transcription stage: ") and message in str(exc.value)


def test_the_cascade_rule_is_in_the_fingerprint_and_later_members_read_their_own_plans(tmp_path):
    params = parse_transcription_options(_cascade(score_below=0.8))
    stages = bag_stages(params, tmp_path)
    assert [s.stage.variants[s.variant]["plan_dir"] for s in stages] == [str(tmp_path.resolve()),
                                                                         str((tmp_path / "_cascade").resolve())]
    assert recognizer_record(params, stages)["cascade"] == {"score_below": 0.8, "aspect_below": 0.0, "max_share": 1.0}
    assert "cascade" not in recognizer_record(parse_transcription_options({**_cascade(), "cascade": {}}), stages)


def _lines_of(run):
    record = json.loads((rundir.transcript_dir(run, "C") / "p1.json").read_text())
    return record_lines(record)


@pytest.mark.slow
@needs_traineddata("eng")
def test_tesseract_reads_only_the_lines_sent_and_the_others_keep_the_first_reading(tmp_path):
    pytest.importorskip("rapidocr_onnxruntime")
    run = write_run(tmp_path)
    # every line read with a score under 1 is sent, at most half of the page's 7 lines: 3
    result = run_transcription(run, ["p1"], _cascade(score_below=1.0, max_share=0.5))
    assert (result["ok"], "notes" in result) == (1, False)
    lines = _lines_of(run)
    both = [line for line in lines if len(line["readings"]) == 2]
    assert len(both) == int(0.5 * len(lines))
    assert all([r["recognizer"] for r in line["readings"]] == ["ppocr", "tess"] for line in both)
    ppocr_scores = sorted(line["readings"][0]["score"] for line in lines)
    assert sorted(line["readings"][0]["score"] for line in both) == ppocr_scores[:len(both)]
    for line in (line for line in lines if len(line["readings"]) == 1):
        assert (line["won"], line["text"]) == ("ppocr", line["readings"][0]["text"])
    plan = json.loads((rundir.transcript_dir(run, "C") / "_plan" / "_cascade" / "p1.json").read_text())
    assert len(plan["crops"]) == len(both)


@pytest.mark.slow
def test_a_cascade_without_tesseract_traineddata_reads_with_ppocr_alone_and_says_so(tmp_path):
    pytest.importorskip("rapidocr_onnxruntime")
    run = write_run(tmp_path)
    empty = empty_tessdata(tmp_path)
    options = {**_cascade(score_below=1.0), "drop_below": 0.5}
    options["recognizers"][0]["recognizer"] = {"threads": 1}
    options["recognizers"][1]["recognizer"]["tessdata"] = str(empty)
    result = run_transcription(run, ["p1"], options)
    assert (result["ok"], result["failed"]) == (1, 0)
    assert result["recognizer_note"].startswith("transcription: recognize_tesseract: eng.traineddata not found in ")
    assert result["recognizer_note"].endswith("; reading with recognize (PP-OCRv6) instead")
    lines = _lines_of(run)
    assert lines and not any("readings" in line for line in lines)
    # what PP-OCRv6 reads with is the bag member's: a rerun finds the transcript current, and so does status
    params, _ = usable_recognizer(options)
    assert (params.recognizer_family, dict(params.recognizer), params.drop_below) == ("recognize", {"threads": 1}, 0.5)
    assert run_transcription(run, ["p1"], options)["skipped"] == 1
    (outputs,) = transcript_status(run, read_pages(run), options)
    assert (outputs.done, outputs.stale) == (1, 0)


@pytest.mark.parametrize("members, kept", [
    # the bag's members whose weights pip brings; one alone is the stage's recogniser
    ([("recognize", "a"), ("recognize_tesseract", "t")], ("recognize", ())),
    ([("recognize", "a"), ("recognize", "b"), ("recognize_tesseract", "t")], ("recognize", ("a", "b"))),
    ([("recognize_tesseract", "t")], ("recognize", ())),
])
def test_the_fallback_of_a_bag_keeps_the_members_pip_brings(members, kept):
    options = {"recognizers": [{"family": f, "name": n} for f, n in members],
               **({"cascade": {"score_below": 0.9}} if len(members) > 1 else {})}
    params = fallback(parse_transcription_options(options))
    assert (params.recognizer_family, tuple(r["name"] for r in params.recognizers)) == kept
    assert params.cascade == ({"score_below": 0.9} if len(kept[1]) > 1 else {})
    assert fallback(parse_transcription_options({"recognizers": [{"family": "recognize", "name": "a"},
                                                                 {"family": "recognize", "name": "b"}]})) is None


@pytest.mark.slow
@pytest.mark.parametrize("needs_px, dropped", [(None, True), (1000.0, False)])
def test_the_noise_rule_leaves_the_lines_of_a_page_too_small_for_the_recogniser(tmp_path, monkeypatch, needs_px,
                                                                                dropped):
    # On a page whose lines are lower than PP-OCRv6 needs, every line is blurred up and scored low:
    # its score does not tell text from specks there, so no line is left out as noise.
    pytest.importorskip("rapidocr_onnxruntime")
    from newsbag.transcription import resolution

    monkeypatch.setattr(resolution.ResolutionCheck, "for_family",
                        classmethod(lambda cls, family: cls(family, needs_px)))
    run = write_run(tmp_path)
    result = run_transcription(run, ["p1"], {"variant": "C", "drop_below": 1.0})
    assert result["ok"] == 1
    lines = _lines_of(run)
    assert lines and all((NOISE in line) == dropped for line in lines)
    assert all(line["text"] == "" for line in lines) if dropped else all(line["text"] for line in lines)
