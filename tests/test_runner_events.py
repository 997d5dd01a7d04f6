"""Other people's runners: malformed events are logged garbage, lying boxes are repaired."""

import json

from nbtest import FAKE_RUNNERS, run_cli


def liar_config(path, mode, fusion=True):
    stages = [{"name": "liar", "family": "liar", "page_timeout_s": 60, "variants": {"v": {"mode": mode}}}]
    if fusion:
        stages.append({"name": "fusion", "kind": "fusion"})
    path.write_text(json.dumps({"version": 1, "runners_dir": str(FAKE_RUNNERS), "stages": stages}))
    return path


def _strict(text):
    def refuse(token):
        raise ValueError(f"non-strict JSON token {token}")
    return json.loads(text, parse_constant=refuse)


def test_malformed_events_are_garbage_not_a_crash(tmp_path, page_dir, capsys):
    run = tmp_path / "run"
    code, out, err = run_cli(capsys, "run", "--input-dir", page_dir, "--recursive", "--run-dir", run,
                             "--config", liar_config(tmp_path / "c.json", "events"))
    assert code == 0, err  # no crash: exit 1 and a traceback before
    summary = json.loads((run / "reports" / "run_all.json").read_text())
    assert summary["sources"][0]["counts"] == {"ok": 5, "empty": 0, "failed": 0, "skipped": 0}
    assert summary["builtin"]["fusion"]["ok"] == 5  # the later stages ran
    log = (run / "logs" / "liar.v.log").read_text()
    assert log.count("(malformed event ignored) @@newsbag [1,2]") == 5
    assert '(malformed event ignored) @@newsbag {"event": "done"}' in log


def test_an_event_after_library_output_without_a_newline_is_still_read(tmp_path, page_dir, capsys):
    """A model library's progress line on stdout without a newline glues the next event to it;
    the event is read and the text before it logged (main: every page's `done` was lost, the
    last page, written and valid, was failed as 'runner exited 0 while processing this page'
    and the runner restarted for the others, exit 4)."""
    run = tmp_path / "run"
    code, out, err = run_cli(capsys, "run", "--input-dir", page_dir, "--recursive", "--run-dir", run,
                             "--config", liar_config(tmp_path / "c.json", "chatty", fusion=False))
    assert code == 0, err
    summary = json.loads((run / "reports" / "run_all.json").read_text())
    assert summary["sources"][0]["counts"] == {"ok": 5, "empty": 0, "failed": 0, "skipped": 0}
    assert not (run / "logs" / "failures.jsonl").exists()
    assert (run / "logs" / "liar.v.log").read_bytes().count(b"[stdout] \rpredict: 100%\n") == 5


def test_a_page_claimed_skipped_without_output_is_failed(tmp_path, page_dir, capsys):
    """`skipped` passes a page off as done like `ok` does: its output is checked the same way
    (main: five pages with no output were counted skipped, exit 0, and fusion ran without them)."""
    run = tmp_path / "run"
    code, out, err = run_cli(capsys, "run", "--input-dir", page_dir, "--recursive", "--run-dir", run,
                             "--config", liar_config(tmp_path / "c.json", "skip", fusion=False),
                             "--max-failed-fraction", "1")
    assert code == 4, err
    source = json.loads((run / "reports" / "run_all.json").read_text())["sources"][0]
    assert source["counts"] == {"ok": 0, "empty": 0, "failed": 5, "skipped": 0}
    assert set(source["failures"].values()) == {"runner reported the page done but wrote no output"}
    assert len((run / "logs" / "failures.jsonl").read_text().splitlines()) == 5


def test_a_page_written_whose_done_event_was_cut_counts_as_done(tmp_path, page_dir, capsys):
    """A truncated `done` is garbage, but the page it announced is on disk and current: it is
    done, not failed (main: the last page was failed as 'runner exited 0 while processing this
    page', the runner restarted for the other four, which it then reported skipped; exit 4)."""
    run = tmp_path / "run"
    code, out, err = run_cli(capsys, "run", "--input-dir", page_dir, "--recursive", "--run-dir", run,
                             "--config", liar_config(tmp_path / "c.json", "truncate", fusion=False))
    assert code == 0, err
    source = json.loads((run / "reports" / "run_all.json").read_text())["sources"][0]
    assert source["counts"] == {"ok": 5, "empty": 0, "failed": 0, "skipped": 0} and source["launches"] == 1
    assert not (run / "logs" / "failures.jsonl").exists()
    assert (run / "logs" / "liar.v.log").read_text().count("(malformed event ignored)") == 5


def test_parse_event_accepts_only_well_formed_events():
    from newsbag.runner_events import parse_event

    assert parse_event('{"event": "done", "page_id": "p", "status": "ok", "seconds": 0.1}')["page_id"] == "p"
    assert parse_event('{"event": "done", "page_id": "p", "error": 5, "status": "failed"}')["error"] == "5"
    for bad in ("[1,2]", "null", '"done"', '{"event": "done"}', '{"event": "start"}',
                '{"event": "done", "page_id": "p", "status": "maybe"}', '{"event": "done", "page_id": "p", "seconds": true}'):
        assert parse_event(bad) is None, bad


def test_lying_boxes_are_repaired_counted_and_written_strictly(tmp_path, page_dir, capsys, caplog):
    run = tmp_path / "run"
    code, out, err = run_cli(capsys, "run", "--input-dir", page_dir, "--recursive", "--run-dir", run,
                             "--config", liar_config(tmp_path / "c.json", "lie"), "-l", "warning")
    assert code == 0, err
    assert "repaired boxes: clipped_box 1, inverted_box 1, non_finite_box 2, non_finite_score 1, outside_page_box 1" in caplog.text
    fused = sorted((run / "outputs" / "fusion").glob("*/*.json"))
    assert fused
    for path in fused + sorted((run / "outputs" / "fusion").glob("*.json")) + sorted((run / "reports").glob("*.json")):
        _strict(path.read_text())  # no NaN / Infinity token anywhere newsbag writes
    for path in (run / "outputs" / "fusion").glob("*/*.json"):
        page = _strict(path.read_text())
        if path.parent.name.startswith("_"):
            continue
        w, h = page["image"]["width"], page["image"]["height"]
        for region in page["regions"]:
            x0, y0, x1, y1 = region["bbox_xyxy"]
            assert 0 <= x0 <= x1 <= w and 0 <= y0 <= y1 <= h, (path, region)
