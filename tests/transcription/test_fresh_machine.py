"""`newsbag transcribe` on a machine set up with pip alone (no Tesseract traineddata), and the
resolution check: a page whose lines are too low for its recogniser is said so, once."""

import json
import unicodedata

import numpy as np
import pytest
from PIL import Image

from newsbag import rundir
from newsbag.tool_spec import load_tool_spec
from newsbag.resources import runners_dir
from newsbag.transcription.stage import run_transcription
from nbtest import REPO, run_cli, write_manifest
from stage_kit import as_made_by, record_lines, write_run

pytest.importorskip("onnxruntime")
pytest.importorskip("rapidocr")   # PP-OCRv6 rec: the ONNX inside the rapidocr 3.10 wheel


def _outside_latin(text: str) -> list[str]:
    """The letters, digits and marks of `text` that are not of the Latin script (ASCII digits are)."""
    return [c for c in text if unicodedata.category(c)[0] in "LMN" and not c.isascii()
            and "LATIN" not in unicodedata.name(c, "")]


def _config(tmp_path, **transcription) -> str:
    """The embedded bag's config with its transcription entry changed (one recogniser: no bag)."""
    config = json.loads((REPO / "configs" / "pipeline.local.json").read_text())
    entry = next(s for s in config["stages"] if s.get("kind") == "transcription")
    for key in ("recognizers", "vote", "cascade") if "recognizer_family" in transcription else ():
        entry.pop(key, None)
    entry.update(transcription)
    path = tmp_path / "pipeline.json"
    path.write_text(json.dumps(config))
    return str(path)


@pytest.fixture
def no_traineddata(tmp_path, monkeypatch):
    """Tesseract's runner looks in $TESSDATA_PREFIX first: an empty folder hides the system's traineddata."""
    empty = tmp_path / "tessdata"
    empty.mkdir()
    monkeypatch.setenv("TESSDATA_PREFIX", str(empty))
    return empty


def test_the_embedded_config_transcribes_without_traineddata(tmp_path, capsys, no_traineddata):
    run = write_run(tmp_path)
    code, out, err = run_cli(capsys, "transcribe", "--run-dir", run, "--config", REPO / "configs" / "pipeline.local.json")
    assert code == 0, err
    record = json.loads((rundir.transcript_dir(run, "C") / "p1.json").read_text())
    assert "harbour" in record["text"].lower()
    assert _outside_latin(record["text"]) == []
    # the default cascade's Tesseract member is left out, said in one line: PP-OCRv6 reads alone
    notes = [line for line in err.splitlines() if "traineddata" in line]
    assert len(notes) == 1 and "Fraktur.traineddata not found" in notes[0]
    assert notes[0].endswith("reading with recognize (PP-OCRv6) instead")
    lines = record_lines(record)
    assert lines and not any("readings" in line for line in lines)   # one recogniser: no bag's readings


def test_a_config_naming_tesseract_reads_with_ppocr_and_says_so_in_one_line(tmp_path, capsys, no_traineddata,
                                                                             monkeypatch):
    run = write_run(tmp_path)
    config = _config(tmp_path, recognizer_family="recognize_tesseract", recognizer={"models": ["Fraktur"]})
    as_made_by(run, config)   # its text lines current: status asks only about the transcripts
    code, out, err = run_cli(capsys, "transcribe", "--run-dir", run, "--config", config, "--json")
    assert code == 0, err
    notes = [line for line in err.splitlines() if "Fraktur.traineddata not found" in line]
    assert len(notes) == 1
    assert str(no_traineddata) in notes[0] and notes[0].endswith("reading with recognize (PP-OCRv6) instead")
    summary = json.loads(out)["builtin"]["transcription"]
    assert summary["ok"] == 1 and summary["recognizer_note"] in notes[0]
    record = json.loads((rundir.transcript_dir(run, "C") / "p1.json").read_text())
    assert "harbour" in record["text"].lower() and _outside_latin(record["text"]) == []
    # status checks by the recogniser the call read with: the transcript is current
    # status runs no interpreter of the config's to learn which recogniser a call would read with
    from newsbag import runner_probe
    monkeypatch.setattr(runner_probe, "_probe", lambda *a, **k: pytest.fail("status probed a stage env"))
    code, out, err = run_cli(capsys, "status", "--run-dir", run, "--json")   # by the config transcribe recorded
    (outputs,) = json.loads(out)["builtin"]["transcription"]
    assert (outputs["done"], outputs["stale"]) == (1, 0), outputs["reasons"]


def _shrink(run, pid: str, scale: float) -> None:
    """The run's page as if scanned at `scale` times its resolution: image, fused and line boxes, manifest."""
    image_path = run / "img" / f"{pid}.png"
    with Image.open(image_path) as im:
        size = (round(im.width * scale), round(im.height * scale))
        im.resize(size, Image.LANCZOS).save(image_path)
    for path in (rundir.fused_dir(run, "C") / f"{pid}.json", rundir.source_dir(run, "text_lines", "lines") / f"{pid}.json"):
        page = json.loads(path.read_text())
        page["image"].update(width=size[0], height=size[1])
        for region in page["regions"]:
            region["bbox_xyxy"] = [v * scale for v in region["bbox_xyxy"]]
        path.write_text(json.dumps(page))
    write_manifest(run, [{"page_id": pid, "path": f"img/{pid}.png", "image_path": str(image_path),
                          "width": size[0], "height": size[1], "sha256": "0"}])


def test_a_page_too_small_for_its_recogniser_is_warned_once_with_both_heights(tmp_path, caplog):
    needs = load_tool_spec("recognize", runners_dir())["needs_line_height_px"]
    run = write_run(tmp_path)
    result = run_transcription(run, ["p1"], {})
    assert "low_resolution" not in result   # lines about 40 px high
    scale = 0.25
    _shrink(run, "p1", scale)
    caplog.set_level("WARNING")
    result = run_transcription(run, ["p1"], {})
    plan = json.loads((rundir.transcript_dir(run, "C") / "_plan" / "p1.json").read_text())
    crops = np.array(plan["crops"], dtype=float)
    height = float(np.median(crops[:, 3] - crops[:, 1]))
    assert height < needs
    assert result["low_resolution"] == {"pages": 1, "line_height_px": round(height, 1), "needs_px": needs,
                                        "page_ids": ["p1"]}
    warnings = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert len(warnings) == 1   # once per page, not per line
    assert warnings[0].startswith(f"page p1: its text lines are {height:.0f} px high")
    assert f"recognize needs {needs:.0f} px" in warnings[0]


def test_doctor_notes_the_missing_traineddata_of_the_default_cascade_and_passes(capsys, no_traineddata):
    # the stage reads with PP-OCRv6 alone there: a pip-only machine is ready, told what it lacks
    code, out, err = run_cli(capsys, "doctor", "--config", REPO / "configs" / "pipeline.local.json", "--no-page")
    assert code == 0, err
    notes = [line for line in out.splitlines() if line.strip().startswith("transcription/tesseract: weights: ")]
    assert len(notes) == 1 and "Fraktur.traineddata not found" in notes[0]
    assert notes[0].endswith("; transcription reads without it")
    code, out, err = run_cli(capsys, "doctor", "--config", REPO / "configs" / "pipeline.local.json", "--no-page",
                             "--json")
    (row,) = [r for r in json.loads(out) if r["variant"] == "tesseract"]
    assert (row["ready"], row["weights_ok"], row["problems"]) == (True, False, [])
