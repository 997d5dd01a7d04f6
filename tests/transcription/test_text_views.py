"""After `newsbag transcribe`, what shows the text (PAGE-XML and ALTO exports, the gallery's transcript
links) is either current, or `status` and the call's summary say it is stale and which command
brings it up to date."""

import json

import pytest

from newsbag import rundir
from newsbag.export.stage import run_export
from newsbag.review.stage import run_review
from nbtest import FAKE_RUNNERS, run_cli
from stage_kit import as_made_by, write_run

pytest.importorskip("onnxruntime")
pytest.importorskip("rapidocr_onnxruntime")

EXPORT = {"name": "export", "kind": "export", "formats": ["page-xml", "alto"]}


def _config(tmp_path):
    """The run's stages: its text lines (made by hand), review, transcription (PP-OCR) and export."""
    path = tmp_path / "c.json"
    path.write_text(json.dumps({
        "version": 1, "runners_dir": str(FAKE_RUNNERS), "envs": {"fake": {"python": "", "env": {}}},
        "stages": [{"name": "text_lines", "family": "fake", "env": "fake", "variants": {"lines": {}}},
                   {"name": "review", "kind": "review"}, {"name": "transcription", "kind": "transcription"}, EXPORT]}))
    return path


def test_after_transcribe_status_and_the_summary_name_the_stale_text_and_the_command(tmp_path, capsys):
    run = write_run(tmp_path, pids=("p1", "p2"))
    ids, config = ["p1", "p2"], _config(tmp_path)
    as_made_by(run, config)
    assert run_review(run, ids, {})["failed"] == 0
    assert run_export(run, ids, {"formats": EXPORT["formats"]})["failed"] == 0
    code, out, err = run_cli(capsys, "transcribe", "--run-dir", run, "--config", config)
    assert code == 0, err
    assert f"stale: export/fusion/C shows older text on 2 page(s): run newsbag export --run-dir {run}" in err
    assert f"stale: the gallery links older transcripts: run newsbag review --run-dir {run}" in err
    code, out, err = run_cli(capsys, "transcribe", "--run-dir", run, "--json")
    assert json.loads(out)["stale"] == [
        {"output": "export/fusion/C", "pages": 2, "command": f"newsbag export --run-dir {run}"},
        {"output": "review/gallery", "pages": None, "command": f"newsbag review --run-dir {run}"}]

    code, out, err = run_cli(capsys, "status", "--run-dir", run)
    assert "      stale: its transcript changed (2 pages)" in out
    assert f"      run newsbag export --run-dir {run} to bring them up to date" in out
    assert "gallery yes; transcript links out of date" in out
    assert f"      run newsbag review --run-dir {run} to bring them up to date" in out

    assert run_cli(capsys, "export", "--run-dir", run)[0] == 0
    assert run_cli(capsys, "review", "--run-dir", run)[0] == 0
    code, out, err = run_cli(capsys, "status", "--run-dir", run)
    for kind in ("export", "review"):
        assert f"run newsbag {kind} " not in out
    xml = (rundir.exports_dir(run) / "page-xml" / "fusion" / "C" / "p1.xml").read_text()
    text = json.loads((rundir.transcript_dir(run, "C") / "p1.json").read_text())["regions"][1]["lines"][0]["text"]
    assert text and text in xml
    code, out, err = run_cli(capsys, "transcribe", "--run-dir", run, "--json")
    assert json.loads(out)["stale"] == []
