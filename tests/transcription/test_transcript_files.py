"""A transcript folder stays whole: a page's .txt and the variant's transcripts.jsonl are part of what is current."""

import json

import pytest

from newsbag import rundir
from newsbag.status import collect_status
from newsbag.transcription.stage import _Transcription, run_transcription
from stage_kit import write_run

pytest.importorskip("onnxruntime")
pytest.importorskip("rapidocr_onnxruntime")


def _transcripts(run) -> dict:
    (outputs,) = collect_status(run)["builtin"]["transcription"]
    return outputs


def test_a_deleted_txt_and_a_cut_index_are_stale_and_made_again_without_reading_a_page(tmp_path, monkeypatch):
    # A deleted .txt and a transcripts.jsonl cut in half (an interrupted copy) were never made
    # again, and status said done until `transcribe --force` read every page again.
    run = write_run(tmp_path, pids=("p1", "p2"))
    assert run_transcription(run, ["p1", "p2"], {})["ok"] == 2
    out = rundir.transcript_dir(run, "C")
    text = (out / "p1.txt").read_bytes()
    index = (out / "transcripts.jsonl").read_bytes()
    assert text == (json.loads((out / "p1.json").read_text())["text"] + "\n").encode()
    (out / "p1.txt").unlink()
    (out / "transcripts.jsonl").write_bytes(index[: len(index) // 2])
    outputs = _transcripts(run)
    assert (outputs["done"], outputs["stale"], outputs["whole"]) == (1, 1, False)
    assert outputs["reasons"] == {"its .txt is missing or cut short": 1}
    assert outputs["note"] == "transcripts.jsonl out of date (rerun newsbag transcribe)"

    def no_recogniser(self, todo):
        raise AssertionError(f"read again: {[p.page_id for p in todo]}")

    monkeypatch.setattr(_Transcription, "recognise", no_recogniser)
    again = run_transcription(run, ["p1", "p2"], {})
    assert (again["ok"], again["skipped"], again["failed"]) == (0, 2, 0)
    assert (out / "p1.txt").read_bytes() == text
    assert (out / "transcripts.jsonl").read_bytes() == index
    outputs = _transcripts(run)
    assert (outputs["done"], outputs["stale"], outputs["whole"], outputs["note"]) == (2, 0, True, "")


def test_a_txt_cut_short_is_written_again_from_its_json(tmp_path):
    run = write_run(tmp_path)
    assert run_transcription(run, ["p1"], {})["ok"] == 1
    path = rundir.transcript_dir(run, "C") / "p1.txt"
    text = path.read_bytes()
    path.write_bytes(text[: len(text) // 2])
    assert _transcripts(run)["stale"] == 1
    assert run_transcription(run, ["p1"], {})["skipped"] == 1
    assert path.read_bytes() == text and _transcripts(run)["done"] == 1
