"""`newsbag run` / `fuse` / `status` over a run whose stages fail: every failure reaches exit 4, the report, the ledger and status."""

import dataclasses
import json
import os
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from nbtest import run_cli, write_fake_config, write_image

FUSION = {"name": "fusion", "kind": "fusion", "variants": {
    "S": {"sources": ["fake/*"], "method": "best_single"},
    "C": {"sources": ["*"], "method": "consensus", "params": {"vote": 1}}}}
REVIEW = {"name": "review", "kind": "review", "top_n": 3}


def _run(tmp_path, page_dir, capsys, *extra):
    cfg = write_fake_config(tmp_path / "c.json", {"v": {}, "w": {}}, extra_stages=[FUSION, REVIEW])
    run = tmp_path / "run"
    code, out, err = run_cli(capsys, "run", "--input-dir", page_dir, "--recursive", "--run-dir", run,
                             "--config", cfg, *extra)
    return run, cfg, code, err


def _redo_with_other_boxes(path: Path) -> None:
    """A source page as its model redone with other settings leaves it: other boxes (the same
    bytes under a new mtime are the same page)."""
    page = json.loads(path.read_text())
    page["regions"] = [dict(page["regions"][0], bbox_xyxy=[1, 1, 20, 15])]
    path.write_text(json.dumps(page))


def _pid(run, needle):
    return next(json.loads(line)["page_id"] for line in (run / "manifests/pages.jsonl").read_text().splitlines()
                if needle in line)


def test_a_fusion_failure_reaches_exit_code_report_ledger_and_status(tmp_path, page_dir, capsys):
    run, cfg, code, err = _run(tmp_path, page_dir, capsys)
    assert code == 0, err
    bad = _pid(run, "issue2/p3")
    for source in ("v", "w"):
        (run / f"outputs/sources/fake/{source}/{bad}.json").write_text("{not json")
    code, _, err = run_cli(capsys, "run", "--run-dir", run, "--config", cfg, "--stages", "fusion")
    assert code == 4 and "1 page run(s) failed" in err
    report = json.loads((run / "reports/run_fusion.json").read_text())
    assert report["builtin"]["fusion"]["failed"] == 1
    assert report["builtin"]["fusion"]["failures"][0]["page_id"] == bad
    rows = [json.loads(line) for line in (run / "logs/failures.jsonl").read_text().splitlines()]
    assert [(r["stage"], r["page_id"]) for r in rows] == [("fusion", bad)]
    code, out, _ = run_cli(capsys, "status", "--run-dir", run, "--json")
    fused = {f["name"]: f for f in json.loads(out)["builtin"]["fusion"]}
    assert {v: (f["done"], f["failed"]) for v, f in fused.items()} == {"C": (4, 1), "S": (4, 1)}
    # `newsbag fuse` says so too
    code, _, err = run_cli(capsys, "fuse", "--run-dir", run)
    assert code == 4 and "fusion: 1 page(s) failed" in err
    # leaderboards still cover the other four pages of the manifest
    header, *rows = (run / "outputs/fusion/variant_leaderboard.tsv").read_text().splitlines()
    assert rows and {r.split("\t")[header.split("\t").index("n_pages")] for r in rows} == {"4"}


def test_status_does_not_count_stale_fused_pages_as_done(tmp_path, page_dir, capsys):
    run, cfg, code, err = _run(tmp_path, page_dir, capsys)
    assert code == 0, err
    _redo_with_other_boxes(run / f"outputs/sources/fake/v/{_pid(run, 'issue1/p1')}.json")  # since it was fused
    assert _fusion_counts(capsys, run) == {"C": (4, 1), "S": (4, 1)}


def _fusion_counts(capsys, run):
    _, out, _ = run_cli(capsys, "status", "--run-dir", run, "--json")
    return {f["name"]: (f["done"], f["stale"]) for f in json.loads(out)["builtin"]["fusion"]}


def test_status_counts_the_pages_fusion_has_not_reached_pending(tmp_path, page_dir, capsys):
    """A call for one shard fuses its own pages only: the others are neither done, failed
    nor stale, and status says they are pending (in --json and in the text)."""
    run, cfg, code, err = _run(tmp_path, page_dir, capsys, "--stages", "fake,fusion", "--shard", "0/2")
    assert code == 0, err
    _, out, _ = run_cli(capsys, "status", "--run-dir", run, "--json")
    assert {f["name"]: (f["done"], f["failed"], f["stale"], f["pending"])
            for f in json.loads(out)["builtin"]["fusion"]} == {"C": (3, 0, 0, 2), "S": (3, 0, 0, 2)}
    _, out, _ = run_cli(capsys, "status", "--run-dir", run)
    assert [line.split()[-2:] for line in out.splitlines() if "fusion/" in line] == [["pending", "2"]] * 2


def test_status_counts_a_fused_page_stale_when_a_source_page_it_lacked_appears(tmp_path, page_dir, capsys):
    """Source w failed on one page, so that page was fused from v alone; once w's page is
    there, fusion redoes the page, and status must not call it done meanwhile."""
    cfg = write_fake_config(tmp_path / "c.json", {"v": {}, "w": {"mode": "raise", "on": ["issue1__p1"]}},
                            extra_stages=[FUSION])
    run = tmp_path / "run"
    code, _, err = run_cli(capsys, "run", "--input-dir", page_dir, "--recursive", "--run-dir", run, "--config", cfg)
    assert code == 4, err
    fixed = write_fake_config(tmp_path / "ok.json", {"v": {}, "w": {}}, extra_stages=[FUSION])
    code, _, err = run_cli(capsys, "run", "--run-dir", run, "--config", fixed, "--stages", "fake")
    assert code == 0, err
    assert _fusion_counts(capsys, run) == {"C": (4, 1), "S": (4, 1)}
    code, out, err = run_cli(capsys, "fuse", "--run-dir", run, "--json")
    assert code == 0 and json.loads(out)["ok"] == 1, err
    assert _fusion_counts(capsys, run) == {"C": (5, 0), "S": (5, 0)}


def test_status_counts_the_fused_pages_of_a_changed_variant_stale(tmp_path, page_dir, capsys):
    """A run with a changed variant recipe (here without the fusion stage) records the new
    config; until fusion redoes that variant, its pages are stale and the others stay done."""
    run, cfg, code, err = _run(tmp_path, page_dir, capsys)
    assert code == 0, err
    changed = json.loads(cfg.read_text())
    changed["stages"][1]["variants"]["C"]["params"]["vote"] = 2
    cfg.write_text(json.dumps(changed))
    code, _, err = run_cli(capsys, "run", "--run-dir", run, "--config", cfg, "--stages", "fake")
    assert code == 0, err
    assert _fusion_counts(capsys, run) == {"C": (0, 5), "S": (5, 0)}
    code, out, err = run_cli(capsys, "fuse", "--run-dir", run, "--json")
    assert code == 0, err
    assert _fusion_counts(capsys, run) == {"C": (5, 0), "S": (5, 0)}


def test_a_review_failure_reaches_exit_code_and_status(tmp_path, page_dir, capsys):
    run, cfg, code, err = _run(tmp_path, page_dir, capsys)
    assert code == 0, err
    (page_dir / "issue1/p2.png").unlink()   # a current board stays without its scan: redrawing it fails
    code, _, err = run_cli(capsys, "review", "--run-dir", run, "--force")
    assert code == 4 and "review: 1 page(s) failed" in err
    _, out, _ = run_cli(capsys, "status", "--run-dir", run, "--json")
    info = json.loads(out)
    assert _boards(info) == {"done": 4, "stale": 0, "failed": 1, "pending": 0, "reasons": {}}


def _boards(info: dict) -> dict:
    """The counts and reasons of the review boards in a status."""
    (boards,) = info["builtin"]["review"]
    return {k: boards[k] for k in ("done", "stale", "failed", "pending", "reasons")}


def _review_counts(capsys, run):
    _, out, _ = run_cli(capsys, "status", "--run-dir", run, "--json")
    return _boards(json.loads(out))


def test_status_counts_a_board_stale_once_what_it_shows_changes(tmp_path, page_dir, capsys):
    """A board is done only while `newsbag review` would skip it: fusion redone with other
    parameters (every fused page rewritten), or one source page rewritten and fused again,
    makes the boards drawn from them stale until review redraws exactly those."""
    run, cfg, code, err = _run(tmp_path, page_dir, capsys)
    assert code == 0, err
    assert _review_counts(capsys, run) == {"done": 5, "stale": 0, "failed": 0, "pending": 0, "reasons": {}}
    changed = json.loads(cfg.read_text())
    changed["stages"][1]["variants"]["C"]["params"]["vote"] = 2
    cfg.write_text(json.dumps(changed))
    code, _, err = run_cli(capsys, "run", "--run-dir", run, "--config", cfg, "--stages", "fusion")
    assert code == 0, err
    assert _review_counts(capsys, run) == {"done": 0, "stale": 5, "failed": 0, "pending": 0,
                                           "reasons": {"its input fusion/C changed": 5}}
    code, out, err = run_cli(capsys, "review", "--run-dir", run, "--json")
    assert code == 0 and json.loads(out)["ok"] == 5, err
    assert _review_counts(capsys, run) == {"done": 5, "stale": 0, "failed": 0, "pending": 0, "reasons": {}}

    _redo_with_other_boxes(run / f"outputs/sources/fake/v/{_pid(run, 'issue1/p1')}.json")
    code, _, err = run_cli(capsys, "fuse", "--run-dir", run)
    assert code == 0, err
    # every fused variant reads every source it was fused with: each one's page changed
    fused = ", ".join(f"fusion/{v}" for v in sorted(changed["stages"][1]["variants"]))
    assert _review_counts(capsys, run) == {"done": 4, "stale": 1, "failed": 0, "pending": 0,
                                           "reasons": {f"its inputs {fused}, fake/v changed": 1}}
    code, out, err = run_cli(capsys, "review", "--run-dir", run, "--json")
    assert code == 0 and (json.loads(out)["ok"], json.loads(out)["skipped"]) == (1, 4), err

    import shutil

    shutil.rmtree(run / "review/pages" / _pid(run, "issue2/p3"))  # never drawn, as far as status can tell
    assert _review_counts(capsys, run) == {"done": 4, "stale": 0, "failed": 0, "pending": 1, "reasons": {}}
    code, out, _ = run_cli(capsys, "status", "--run-dir", run)
    line = next(line for line in out.splitlines() if "review/boards" in line)
    assert "done      4  failed     0  pending      1  (gallery yes)" in line, out


def test_status_checks_boards_without_opening_an_image_or_drawing(tmp_path, page_dir, capsys, monkeypatch):
    """status decides from file identities and info.json, as review's own skip check does."""

    from newsbag.status import collect_status

    run, cfg, code, err = _run(tmp_path, page_dir, capsys)
    assert code == 0, err
    before = {p: p.stat().st_mtime_ns for p in (run / "review").rglob("*") if p.is_file()}

    def refuse(*args, **kwargs):
        raise AssertionError("status opened or wrote an image")

    monkeypatch.setattr(Image, "open", refuse)
    monkeypatch.setattr(Image.Image, "save", refuse)
    assert _boards(collect_status(run)) == {"done": 5, "stale": 0, "failed": 0, "pending": 0, "reasons": {}}
    assert {p: p.stat().st_mtime_ns for p in (run / "review").rglob("*") if p.is_file()} == before


def test_status_checks_by_what_fuse_and_review_ran_with_their_own_config(tmp_path, page_dir, capsys):
    """`newsbag fuse --config X` records X's fusion section as the run's: status counts the pages
    it just fused done, and a plain `newsbag fuse` skips them. The run's other stages keep
    what they last ran with; `newsbag review --config Y` likewise for boards."""
    run, cfg, code, err = _run(tmp_path, page_dir, capsys)
    assert code == 0, err
    other = json.loads(cfg.read_text())
    other["stages"][1]["variants"]["C"]["params"]["vote"] = 2
    other["stages"][2]["max_board_width"] = 1200
    other_path = tmp_path / "other.json"
    other_path.write_text(json.dumps(other))
    code, out, err = run_cli(capsys, "fuse", "--run-dir", run, "--config", other_path, "--json")
    assert code == 0 and json.loads(out)["ok"] == 5, err
    assert _fusion_counts(capsys, run) == {"C": (5, 0), "S": (5, 0)}
    recorded = {s["name"]: s for s in json.loads((run / "config.resolved.json").read_text())["stages"]}
    assert recorded["fusion"]["variants"]["C"]["params"]["vote"] == 2
    assert recorded["review"] == REVIEW  # fuse ran no review: its entry is what review last ran with
    code, out, err = run_cli(capsys, "fuse", "--run-dir", run, "--json")
    assert code == 0 and (json.loads(out)["ok"], json.loads(out)["skipped"]) == (0, 5), err

    code, out, err = run_cli(capsys, "review", "--run-dir", run, "--config", other_path, "--json")
    assert code == 0 and json.loads(out)["ok"] == 5, err
    assert _review_counts(capsys, run) == {"done": 5, "stale": 0, "failed": 0, "pending": 0, "reasons": {}}
    code, out, err = run_cli(capsys, "review", "--run-dir", run, "--json")
    assert code == 0 and (json.loads(out)["ok"], json.loads(out)["skipped"]) == (0, 5), err


@pytest.mark.parametrize("waiting", [["fuse"], ["run", "--stages", "fusion"]])
def test_the_config_record_names_the_config_of_the_fusion_that_ran_last(tmp_path, page_dir, capsys, waiting):
    """Two calls fuse one run dir with different configs at once: A (config X) waits for the
    fusion lock while B (config Y) fuses. A fuses last, so the record must name X, or status
    calls A's pages stale and the next plain `newsbag fuse` redoes them with Y."""
    import subprocess
    import sys

    from newsbag import locks

    run, x, code, err = _run(tmp_path, page_dir, capsys, "--stages", "fake,fusion")
    assert code == 0, err
    y = tmp_path / "y.json"
    raw = json.loads(x.read_text())
    raw["stages"][1]["variants"]["C"]["params"]["vote"] = 2
    y.write_text(json.dumps(raw))
    with locks.stage_lock(run, "fusion"):
        a = subprocess.Popen([sys.executable, "-m", "newsbag", *waiting, "--run-dir", str(run), "--config", str(x)],
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        seen = []
        while not any("waiting for another call's fusion" in line for line in seen[-1:]):
            seen.append(a.stderr.readline())
            assert seen[-1], "".join(seen)  # A ended without waiting for the lock
        # fcntl record locks belong to the process: B, run here, takes the lock this test holds,
        # and closing it hands the lock to A. So B fuses first and A after, deterministically.
        code, out, err = run_cli(capsys, "fuse", "--run-dir", run, "--config", y, "--json")
        assert code == 0 and json.loads(out)["ok"] == 5, err
    _, a_err = a.communicate(timeout=120)
    assert a.returncode == 0, a_err
    recorded = {s["name"]: s for s in json.loads((run / "config.resolved.json").read_text())["stages"]}
    assert recorded["fusion"]["variants"]["C"]["params"]["vote"] == 1
    assert _fusion_counts(capsys, run) == {"C": (5, 0), "S": (5, 0)}
    code, out, err = run_cli(capsys, "fuse", "--run-dir", run, "--json")
    assert code == 0 and (json.loads(out)["ok"], json.loads(out)["skipped"]) == (0, 5), err


def test_a_run_without_config_resumes_with_the_config_its_run_dir_recorded(tmp_path, page_dir, capsys, caplog,
                                                                          monkeypatch):
    """`newsbag run --run-dir R` without --config, on R made with --config F, resumes with F (as a
    plain `newsbag fuse` does): the embedded bag runs nothing into R and leaves its record alone.
    --stages and --device apply on top; a new run dir still gets the embedded bag."""
    import logging

    import newsbag.config
    from newsbag.rundir import discover_sources
    from nbtest import FAKE_RUNNERS

    # caplog's handler stays: the CLI replaces the root handlers when it first sets up logging
    monkeypatch.setattr(logging.getLogger(), "_newsbag_configured", True, raising=False)
    embedded = tmp_path / "embedded.json"   # stands in for the embedded bag: another family, cheap
    embedded.write_text(json.dumps({"version": 1, "runners_dir": str(FAKE_RUNNERS), "envs": {"fake": {"python": ""}},
                                    "stages": [{"name": "liar", "family": "liar", "env": "fake", "variants": {"ok": {}}}]}))
    monkeypatch.setattr(newsbag.config, "default_config_path", lambda: embedded)
    run, cfg, code, err = _run(tmp_path, page_dir, capsys, "--stages", "fake,fusion")
    assert code == 0, err
    record = (run / "config.resolved.json").read_bytes()
    (run / f"outputs/sources/fake/v/{_pid(run, 'issue1/p1')}.json").unlink()   # one page left to redo

    code, out, err = run_cli(capsys, "run", "--run-dir", run, "--dry-run", "--json")
    assert code == 0, err
    assert [(r["source"], r["todo"]) for r in json.loads(out)["plan"]] == [
        ("fake/v", 1), ("fake/w", 0), ("fusion/C", 1), ("fusion/S", 1), ("review/boards", 5)]   # p1's sources changed
    code, out, err = run_cli(capsys, "run", "--run-dir", run, "--stages", "fake", "--device", "cpu", "--json")
    assert code == 0, err
    assert json.loads(out)["config"] == str(run / "config.resolved.json")
    assert json.loads((run / "reports/run_fake.json").read_text())["config"] == str(run / "config.resolved.json")
    assert [(s["source"], s["device_requested"], s["counts"]["ok"]) for s in json.loads(out)["sources"]] == [
        ("fake/v", "cpu", 1), ("fake/w", "cpu", 0)]
    code, out, err = run_cli(capsys, "run", "--run-dir", run)
    assert code == 0, err
    assert discover_sources(run) == ["fake/v", "fake/w"]
    assert (run / "config.resolved.json").read_bytes() == record
    assert (run / "review/index.html").is_file()   # the recorded config's review stage ran

    caplog.clear()
    fresh = tmp_path / "fresh"
    code, _, err = run_cli(capsys, "run", "--input-dir", page_dir, "--recursive", "--run-dir", fresh)
    assert code == 0, err
    assert discover_sources(fresh) == ["liar/ok"] and "using the config recorded" not in caplog.text


def _bad_top_n(text):
    raw = json.loads(text)
    next(s for s in raw["stages"] if s.get("kind") == "review")["top_n"] = 0
    return json.dumps(raw)


@pytest.mark.parametrize("breaking,reason", [
    (lambda _: "{broken", "invalid JSON at line 1 column 2"),  # a write cut short by hand, a merge conflict
    (lambda _: "[1]", "not a newsbag config record"),          # valid JSON of the wrong shape
    (_bad_top_n, "stage 'review': review stage: top_n must be a whole number >= 1, got 0"),  # an option refused now
])
def test_status_and_a_plain_builtin_command_name_a_broken_config_record_in_one_line(tmp_path, page_dir, capsys,
                                                                                   breaking, reason):
    run, cfg, code, err = _run(tmp_path, page_dir, capsys, "--stages", "fake")
    assert code == 0, err
    record = run / "config.resolved.json"
    record.write_text(breaking(record.read_text()))
    for args in (["status", "--run-dir", run], ["status", "--run-dir", run, "--json"], ["fuse", "--run-dir", run]):
        code, out, err = run_cli(capsys, *args)
        assert (code, out) == (2, ""), (args, err)
        assert err.count("\n") == 1 and str(record) in err and "Traceback" not in err, (args, err)
    code, _, err = run_cli(capsys, "status", "--run-dir", run)
    assert reason in err, err


def test_a_subset_call_rebuilds_nothing_from_the_subset_only(tmp_path, page_dir, capsys):
    run, cfg, code, err = _run(tmp_path, page_dir, capsys)
    assert code == 0, err
    fusion = run / "outputs/fusion"
    before = {name: (fusion / name).read_text() for name in ("variant_leaderboard.tsv", "source_leaderboard.tsv")}
    scores = (run / "review/scores.tsv").read_text()
    top = sorted(p.name for p in (run / "review/top3_informative/pages").iterdir())
    for extra in (["--pages", _pid(run, "issue1/p1")], ["--shard", "1/4"], ["--max-pages", "1"]):
        code, _, err = run_cli(capsys, "run", "--run-dir", run, "--config", cfg, "--force", *extra)
        assert code == 0, err
        assert {name: (fusion / name).read_text() for name in before} == before, extra
        summary = json.loads((fusion / "summary.json").read_text())
        assert (summary["pages"], summary["n_pages"]) == (5, 5)
        assert (run / "review/scores.tsv").read_text().count("\tok\t") == scores.count("\tok\t") == 5
        assert sorted(p.name for p in (run / "review/top3_informative/pages").iterdir()) == top


def test_two_calls_reviewing_different_pages_at_once_leave_a_gallery_of_every_page(tmp_path, page_dir, capsys):
    """Two calls (say --shard 0/2 and 1/2) review one run dir at the same time: whichever
    writes the gallery last must have seen the other's boards, or its pages drop out."""
    import subprocess
    import sys
    import time

    run, cfg, code, err = _run(tmp_path, page_dir, capsys, "--stages", "fake,fusion")
    assert code == 0, err
    ids = [json.loads(line)["page_id"] for line in (run / "manifests/pages.jsonl").read_text().splitlines()]
    drawing = tmp_path / "drawing"
    # The slow call draws the last two pages of the manifest (after checking the others) at 1.5 s each.
    slow = subprocess.Popen([sys.executable, "-c", (
        "import sys, time\n"
        "from pathlib import Path\n"
        "import newsbag.review.stage as stage\n"
        "from newsbag.cli import main\n"
        "draw = stage._review_page\n"
        "def slow_draw(run_dir, record, *args):\n"
        "    if record.page_id in sys.argv[-1]:  # drawn by this call, not only checked\n"
        "        Path(sys.argv[1]).touch()\n"
        "        time.sleep(1.5)\n"
        "    return draw(run_dir, record, *args)\n"
        "stage._review_page = slow_draw\n"
        "main(sys.argv[2:])\n"),
        str(drawing), "run", "--run-dir", str(run), "--config", str(cfg), "--stages", "review",
        "--pages", ",".join(ids[-2:])], stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while not drawing.exists() and slow.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        code, _, err = run_cli(capsys, "run", "--run-dir", run, "--config", cfg, "--stages", "review",
                               "--pages", ",".join(ids[:-2]))
        assert code == 0, err
    finally:
        _, slow_err = slow.communicate(timeout=120)
    assert slow.returncode == 0, slow_err
    rows = (run / "review/scores.tsv").read_text().splitlines()[1:]
    assert sorted(r.split("\t")[1] for r in rows if r.split("\t")[2] == "ok") == sorted(ids)


def test_kill_and_rerun_gives_the_fused_pages_and_leaderboards_of_an_uninterrupted_run(tmp_path, page_dir, capsys):
    import os
    import signal
    import subprocess
    import sys
    import time

    hang = write_fake_config(tmp_path / "hang.json", {"v": {"mode": "hang", "on": ["issue2__p3"]}, "w": {}},
                             extra_stages=[FUSION])
    ok = write_fake_config(tmp_path / "ok.json", {"v": {}, "w": {}}, extra_stages=[FUSION])
    killed = tmp_path / "killed"
    cmd = [sys.executable, "-m", "newsbag", "run", "--input-dir", str(page_dir), "--recursive", "--run-dir", str(killed)]
    proc = subprocess.Popen([*cmd, "--config", str(hang)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    folder = killed / "outputs/sources/fake/v"
    deadline = time.monotonic() + 60
    while len(list(folder.glob("*.json"))) < 4 and time.monotonic() < deadline:
        time.sleep(0.2)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    assert subprocess.run([*cmd, "--config", str(ok)], capture_output=True).returncode == 0
    clean = tmp_path / "clean"
    code, _, err = run_cli(capsys, "run", "--input-dir", page_dir, "--recursive", "--run-dir", clean, "--config", ok)
    assert code == 0, err

    def fused(run):
        return {p.relative_to(run).as_posix(): json.loads(p.read_text())["regions"]
                for p in (run / "outputs/fusion").glob("[!_]*/*.json")}

    assert fused(killed) == fused(clean) and len(fused(clean)) == 10
    for name in ("variant_leaderboard.tsv", "source_leaderboard.tsv", "per_page_variant_metrics.tsv"):
        assert (killed / "outputs/fusion" / name).read_text() == (clean / "outputs/fusion" / name).read_text()


def test_shared_passes_do_not_outlive_their_stage(tmp_path, capsys):
    """Rerun after one variant's threshold changed: only that variant is redone, and its pass
    has no sibling left to read it. The stage ends with no shared entries on disk (a runner keeps
    an entry while its sibling's page is older, so the pipeline drops what is left)."""
    pytest.importorskip("onnxruntime")
    from nbtest import write_image

    write_image(tmp_path / "scans" / "a.png", size=(300, 400), mode="RGB")
    run = tmp_path / "run"

    def config(t07: float) -> Path:
        path = tmp_path / "c.json"
        path.write_text(json.dumps({"version": 1, "envs": {"default": {"python": ""}}, "device": "cpu", "stages": [
            {"name": "paddle_layout", "family": "paddle_layout",
             "variants": {"t05": {}, "t07": {"threshold": t07}}}]}))
        return path

    for t07 in (0.7, 0.8):
        code, _, err = run_cli(capsys, "run", "--input-dir", tmp_path / "scans", "--run-dir", run, "--config", config(t07))
        assert code == 0, err
        assert not list((run / "outputs" / "sources" / "paddle_layout" / "_shared").rglob("*.json"))
    report = json.loads((run / "outputs" / "sources" / "paddle_layout" / "t07" / "run_report.json").read_text())
    assert report["params"]["threshold"] == 0.8


def test_dropping_shared_passes_keeps_other_pages_entries(tmp_path):
    """Slurm array tasks run one stage on disjoint pages at once: a task drops only its own pages' entries."""
    from newsbag import rundir

    for key in ("k1", "k2"):
        for page in ("p1", "p2"):
            path = tmp_path / "outputs" / "sources" / "text_lines" / "_shared" / key / f"{page}.json"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text("{}")
    assert rundir.drop_shared_passes(tmp_path, "text_lines", ["p1", "p3"]) == 2
    left = sorted(str(p.relative_to(tmp_path / "outputs" / "sources" / "text_lines" / "_shared"))
                  for p in (tmp_path / "outputs").rglob("*.json"))
    assert left == ["k1/p2.json", "k2/p2.json"]
    assert rundir.drop_shared_passes(tmp_path, "tesseract", ["p1"]) == 0  # no _shared folder at all


def test_a_scratch_folder_is_removed_with_its_call_and_one_a_killed_call_left_by_the_next(tmp_path):
    """RUN/cache/scratch/<prefix>...: locked while its call runs; a folder whose lock nobody
    holds any more (its process was killed) goes at the next call, a live call's stays."""
    import subprocess
    import sys
    import time

    from newsbag import scratch

    with pytest.raises(RuntimeError):
        with scratch.scratch_folder(tmp_path, "x-") as folder:
            (folder / "a.pkl").write_bytes(b"1")
            raise RuntimeError
    assert not folder.exists()
    root = tmp_path / "cache" / "scratch"
    holder = subprocess.Popen([sys.executable, "-c", (
        "import sys, time; from pathlib import Path; from newsbag import scratch\n"
        "with scratch.scratch_folder(Path(sys.argv[1]), 'x-') as f:\n"
        "    (f / 'a.pkl').write_bytes(b'1'); print(f, flush=True); time.sleep(60)"), str(tmp_path)],
        stdout=subprocess.PIPE, text=True)
    try:
        live = Path(holder.stdout.readline().strip())
        abandoned = root / "x-otherhost-123-abc"          # a killed call's: its lock is free
        abandoned.mkdir()
        (abandoned / ".lock").touch()
        (abandoned / "b.pkl").write_bytes(b"2")
        other_prefix = root / "y-otherhost-123-abc"
        other_prefix.mkdir()
        with scratch.scratch_folder(tmp_path, "x-") as folder:
            assert folder.is_dir() and not abandoned.exists()
            assert (live / "a.pkl").is_file() and other_prefix.is_dir()
        assert sorted(p.name for p in root.iterdir()) == sorted([live.name, other_prefix.name])
    finally:
        holder.kill()
        holder.wait()
    time.sleep(0.1)
    with scratch.scratch_folder(tmp_path, "x-"):
        assert not live.exists()                            # killed: its lock went with it


def test_a_rerun_with_nothing_changed_rewrites_nothing(tmp_path, page_dir, capsys):
    """A second `newsbag run` over a finished run leaves every file as the first wrote it (same
    mtime and inode): config.resolved.json, the fusion summary, leaderboards and per-page tables,
    review/scores.tsv and the gallery, the exports. Only the call's own report (reports/run_*.json:
    when it finished, what it did) is new. summary.json describes the run, not one call, so a
    call's counts and failures are in the report, not there."""
    cfg = write_fake_config(tmp_path / "c.json", {"v": {}, "w": {}},
                            extra_stages=[FUSION, REVIEW, {"name": "export", "kind": "export"}])
    run = tmp_path / "run"
    args = ("run", "--input-dir", page_dir, "--recursive", "--run-dir", run, "--config", cfg)
    code, _, err = run_cli(capsys, *args)
    assert code == 0, err

    def files() -> dict:
        return {p.relative_to(run).as_posix(): (p.stat().st_mtime_ns, p.stat().st_ino)
                for p in run.rglob("*") if p.is_file() and not p.relative_to(run).as_posix().startswith("reports/")}

    before = files()
    assert {"config.resolved.json", "outputs/fusion/summary.json", "outputs/fusion/variant_leaderboard.tsv",
            "review/index.html", "review/scores.tsv", "exports/coco/fusion/C.json"} <= set(before)
    code, out, err = run_cli(capsys, *args, "--json")
    assert code == 0, err
    after = files()
    assert sorted(k for k in after if before.get(k) != after[k]) == []
    summary = json.loads((run / "outputs/fusion/summary.json").read_text())
    assert (summary["pages"], summary["n_pages"]) == (5, 5) and "counts" not in summary
    report = json.loads(out)
    assert (report["builtin"]["fusion"]["ok"], report["builtin"]["fusion"]["skipped"]) == (0, 5)


def _mixed_run(tmp_path, page_dir, capsys):
    """A finished run, then one page of each kind a collection ends up with (by manifest path):
    issue1/p1 a source page redone with other settings (stale), issue1/p2 a failed source page,
    issue2/p1 a page source v answered empty, issue2/p2 a source page, a fused page and a board
    gone (pending), issue2/p3 a failed fused page and a failed board."""
    import shutil

    run, cfg, code, err = _run(tmp_path, page_dir, capsys)
    assert code == 0, err
    pid = {name: _pid(run, name) for name in ("issue1/p1", "issue1/p2", "issue2/p1", "issue2/p2", "issue2/p3")}
    src = run / "outputs/sources/fake"
    page = json.loads((src / "v" / f"{pid['issue1/p1']}.json").read_text())
    page["source"]["fingerprint"] = "made-with-other-settings"
    (src / "v" / f"{pid['issue1/p1']}.json").write_text(json.dumps(page))
    (src / "w" / f"{pid['issue1/p2']}.json").unlink()
    (src / "w/_failed").mkdir(exist_ok=True)
    (src / "w/_failed" / f"{pid['issue1/p2']}.json").write_text(json.dumps({"page_id": pid["issue1/p2"], "error": "boom"}))
    report = json.loads((src / "v/run_report.json").read_text())
    report["pages"][pid["issue2/p1"]].update(status="empty", reason="blank page")
    (src / "v/run_report.json").write_text(json.dumps(report))
    (src / "w" / f"{pid['issue2/p2']}.json").unlink()
    (run / "outputs/fusion/C" / f"{pid['issue2/p2']}.json").unlink()
    shutil.rmtree(run / "review/pages" / pid["issue2/p2"])
    (run / "outputs/fusion/C" / f"{pid['issue2/p3']}.json").unlink()
    (run / "outputs/fusion/C/_failed").mkdir(exist_ok=True)
    (run / "outputs/fusion/C/_failed" / f"{pid['issue2/p3']}.json").write_text(json.dumps({"page_id": pid["issue2/p3"],
                                                                                           "error": "fusion broke"}))
    (run / "review/pages" / pid["issue2/p3"] / "data.js").unlink()
    (run / "review/pages" / pid["issue2/p3"] / "failed.json").write_text(json.dumps({"page_id": pid["issue2/p3"],
                                                                                    "error": "unreadable image"}))
    return run, pid


def test_status_of_a_run_with_stale_failed_empty_and_pending_pages(tmp_path, page_dir, capsys):
    """Every count status gives, on a run with a page of each kind (`_mixed_run`): pins what it
    reports while the way it reads the run dir changes."""
    from newsbag.status import collect_status

    run, pid = _mixed_run(tmp_path, page_dir, capsys)
    status = collect_status(run)
    assert status["sources"] == [
        {"source": "fake/v", "done": 4, "stale": 1, "failed": 0, "pending": 0, "errors": {},
         "empty": 1, "empty_share": 0.25, "flagged": True, "empty_reasons": {pid["issue2/p1"]: "blank page"},
         "devices": {"cpu": 4}, "runners": [], "not_started": None, "degenerate": 0,
         "degenerate_example": None},
        {"source": "fake/w", "done": 3, "stale": 0, "failed": 1, "pending": 1, "errors": {pid["issue1/p2"]: "boom"},
         "empty": 0, "empty_share": 0.0, "flagged": False, "empty_reasons": {}, "devices": {"cpu": 3},
         "runners": [], "not_started": None, "degenerate": 0,
         "degenerate_example": None}]
    # S (fake/*) and C (every source) read the sources of issue1/p1 (fake/v's redone), issue1/p2 and
    # issue2/p2 (fake/w's gone) as they were when fused: stale, saying which; C's page of issue2/p2
    # is gone and issue2/p3's failed.
    fusion = [{k: o[k] for k in ("name", "done", "stale", "failed", "pending", "reasons")}
              for o in status["builtin"]["fusion"]]
    changed, gone = "its input fake/v changed", "its input fake/w is gone"
    assert fusion == [{"name": "C", "done": 1, "stale": 2, "failed": 1, "pending": 1,
                                 "reasons": {changed: 1, gone: 1}},
                      {"name": "S", "done": 2, "stale": 3, "failed": 0, "pending": 0,
                                 "reasons": {gone: 2, changed: 1}}]
    # the boards of issue1/p1 and issue1/p2 show the sources: fake/w's page of issue1/p2 failed since
    assert _boards(status) == {"done": 1, "stale": 2, "failed": 1, "pending": 1,
                                "reasons": {changed: 1, f"{gone}; its input fake/w (its failure record) is new": 1}}
    assert (status["pages"], status["builtin"]["review"][0]["note"], status["rejected"]) == (5, "gallery yes", [])


@pytest.mark.parametrize("stages", [["--stages", "fake"], []])
def test_status_reads_run_level_records_once_and_at_most_one_record_a_page_and_stage(tmp_path, page_dir, capsys,
                                                                                      monkeypatch, stages):
    """At 100k pages every per-page read counts: status reads each run report once, opens no
    source or fused page that a report or fusion's record accounts for, at most fusion's record
    and the board's info.json of each page, and nothing per page of a stage that has not run."""
    import builtins
    from collections import Counter

    from newsbag.status import collect_status

    run, cfg, code, err = _run(tmp_path, page_dir, capsys, *stages)
    assert code == 0, err
    real_open = builtins.open
    opened = Counter()

    def counting_open(file, *args, **kwargs):
        if isinstance(file, (str, Path)) and Path(file).resolve().is_relative_to(run.resolve()):
            opened[Path(file).resolve().relative_to(run.resolve()).as_posix()] += 1
        return real_open(file, *args, **kwargs)

    monkeypatch.setattr(builtins, "open", counting_open)
    status = collect_status(run)
    assert [s["done"] for s in status["sources"]] == [5, 5]
    per_page = Counter()
    for path, n in opened.items():
        parts = path.split("/")
        if path.startswith("outputs/sources/"):
            # no source page: the run reports and the not-started record, once each
            assert parts[-1].startswith("run_report") or parts[-1] == "not_started.json", path
            assert n == 1, (path, n)
        elif path.startswith("outputs/fusion/_metrics/") or (path.startswith("review/pages/")
                                                             and parts[-1] == "info.json"):
            per_page[parts[-1] if parts[-1] == "info.json" else "_metrics"] += n
        else:
            # no fused page or member table, nothing else of a board (run-level records are not counted)
            assert not (path.startswith("outputs/fusion/") and len(parts) > 3 or path.startswith("review/pages/")), path
    assert per_page == ({"_metrics": 5, "info.json": 5} if not stages else {})


def _finished_run(tmp_path, page_dir, capsys):
    cfg = write_fake_config(tmp_path / "c.json", {"v": {}, "w": {}},
                            extra_stages=[FUSION, REVIEW, {"name": "export", "kind": "export"}])
    run = tmp_path / "run"
    code, _, err = run_cli(capsys, "run", "--input-dir", page_dir, "--recursive", "--run-dir", run, "--config", cfg)
    assert code == 0, err
    return run, cfg


def _identities(run, under: str) -> dict:
    return {p.relative_to(run).as_posix(): (p.stat().st_mtime_ns, p.stat().st_ino)
            for p in (run / under).rglob("*") if p.is_file()}


def test_fuse_force_that_changes_no_region_redraws_no_board_and_reexports_nothing(tmp_path, page_dir, capsys):
    """`newsbag fuse --force` redoes the fusion; a fused page whose content comes out the same
    (only its `seconds` differ) is left as it was, so review and export downstream find every
    board and export current: at 100k pages a redraw of every board is hours for nothing."""
    run, cfg = _finished_run(tmp_path, page_dir, capsys)
    fused, boards, exports = (_identities(run, d) for d in ("outputs/fusion", "review/pages", "exports"))
    code, out, err = run_cli(capsys, "fuse", "--run-dir", run, "--force", "--json")
    assert code == 0, err
    assert json.loads(out)["ok"] == 5                        # the fusion was redone ...
    assert _identities(run, "outputs/fusion") == fused      # ... and every file it made came out the same
    for command in ("review", "export"):
        code, out, err = run_cli(capsys, command, "--run-dir", run, "--json")
        assert code == 0, err
        assert (json.loads(out)["ok"], json.loads(out)["skipped"]) == (0, 5), command
    assert _identities(run, "review/pages") == boards and _identities(run, "exports") == exports


def test_fuse_force_rewrites_a_fused_page_whose_regions_change_and_its_board_only(tmp_path, page_dir, capsys):
    """The other side: a source page rewritten with other boxes makes its fused pages differ,
    so they are rewritten and that page's board is redrawn, and no other page's."""
    run, cfg = _finished_run(tmp_path, page_dir, capsys)
    pid = _pid(run, "issue2/p3")
    for source in ("v", "w"):
        src = run / f"outputs/sources/fake/{source}/{pid}.json"
        page = json.loads(src.read_text())
        page["regions"] = [dict(page["regions"][0], bbox_xyxy=[1, 1, 20, 15])]
        src.write_text(json.dumps(page))
    boards = _identities(run, "review/pages")
    code, _, err = run_cli(capsys, "fuse", "--run-dir", run, "--force")
    assert code == 0, err
    for variant in ("S", "C"):
        regions = json.loads((run / f"outputs/fusion/{variant}/{pid}.json").read_text())["regions"]
        assert [r["bbox_xyxy"] for r in regions] == [[1, 1, 20, 15]], variant
    code, _, err = run_cli(capsys, "review", "--run-dir", run)
    assert code == 0, err
    after = _identities(run, "review/pages")
    assert sorted({k.split("/")[2] for k in after if boards.get(k) != after[k]}) == [pid]


def test_a_model_stage_force_that_changes_no_box_refuses_nothing_downstream(tmp_path, page_dir, capsys):
    """`newsbag run --force --stages fake` runs the model again; source pages that come out the
    same but for their `seconds` are left as they were, so fusion, review and export redo nothing."""
    run, cfg = _finished_run(tmp_path, page_dir, capsys)
    before = {d: _identities(run, d) for d in ("outputs", "review/pages", "exports")}
    code, _, err = run_cli(capsys, "run", "--run-dir", run, "--force", "--stages", "fake")
    assert code == 0, err
    report = json.loads((run / "reports/run_fake.json").read_text())
    assert [s["counts"]["ok"] for s in report["sources"]] == [5, 5]    # the model ran again
    code, out, err = run_cli(capsys, "run", "--run-dir", run, "--json")
    assert code == 0, err
    report = json.loads(out)
    assert [report["builtin"][k]["ok"] for k in ("fusion", "review", "export")] == [0, 0, 0], report["builtin"]
    after = {d: {k: v for k, v in _identities(run, d).items() if not k.endswith("run_report.json")} for d in before}
    assert after == {d: {k: v for k, v in ids.items() if not k.endswith("run_report.json")} for d, ids in before.items()}


@pytest.mark.parametrize("mode", ["raise", "crash"])
def test_a_page_that_fails_when_forced_keeps_no_source_page_that_passes_for_current(tmp_path, page_dir, capsys, mode):
    """`--force` keeps a current source page while the model runs again; one that fails then
    (the runner's own failure, or the runner killed on it) loses the page, as if it had been
    removed first: a failed page has no output that fusion or export would take for it."""
    run, _ = _finished_run(tmp_path, page_dir, capsys)
    pid = _pid(run, "issue2/p3")
    cfg = write_fake_config(tmp_path / "c2.json", {"v": {"mode": mode, "on": ["issue2__p3"]}, "w": {}},
                            extra_stages=[FUSION, REVIEW, {"name": "export", "kind": "export"}])
    code, _, err = run_cli(capsys, "run", "--run-dir", run, "--config", cfg, "--force", "--stages", "fake")
    assert code == 4, err
    assert not (run / f"outputs/sources/fake/v/{pid}.json").exists()
    assert (run / f"outputs/sources/fake/v/_failed/{pid}.json").exists()
    assert (run / f"outputs/sources/fake/w/{pid}.json").exists()
    others = [p.name for p in (run / "outputs/sources/fake/v").glob("*.json") if p.name != "run_report.json"]
    assert len(others) == 4 and f"{pid}.json" not in others


def _counts(out: str) -> dict:
    """Pages each stage computed in the call whose `--json` summary is `out`."""
    summary = json.loads(out)
    counts = {s["source"]: s["counts"]["ok"] for s in summary["sources"]}
    return counts | {k: v["ok"] for k, v in summary["builtin"].items()}


@pytest.mark.parametrize("names_inputs", [True, False])
def test_a_touched_scan_redoes_nothing_and_a_replaced_one_redoes_its_page_only(tmp_path, page_dir, capsys, names_inputs):
    """A scan whose mtime changed but not its bytes (touch, a copy without -p) is the same page:
    no stage redoes it, its review board included (drawn from the image). One whose bytes were
    replaced under the same name is redone by every stage, and no other page is."""
    run, _ = _finished_run(tmp_path, page_dir, capsys)
    args = ["run", "--run-dir", run, *(["--input-dir", page_dir, "--recursive"] if names_inputs else [])]
    image = page_dir / "issue1/p2.png"
    boards = _identities(run, "review/pages")
    os.utime(image, ns=(image.stat().st_atime_ns, image.stat().st_mtime_ns + 10**10))
    code, out, err = run_cli(capsys, *args, "--json")
    assert code == 0, err
    assert _counts(out) == {"fake/v": 0, "fake/w": 0, "fusion": 0, "review": 0, "export": 0}
    assert _identities(run, "review/pages") == boards
    write_image(image, size=(40, 30), mode="RGB")   # other pixels, same size and name
    code, out, err = run_cli(capsys, *args, "--json")
    assert code == 0, err
    assert _counts(out) == {"fake/v": 1, "fake/w": 1, "fusion": 1, "review": 1, "export": 1}
    after = _identities(run, "review/pages")
    assert sorted({k.split("/")[2] for k in after if boards.get(k) != after[k]}) == [_pid(run, "issue1/p2")]


def _converted_run(tmp_path, capsys):
    """A run over three pages: an 8-bit PNG passed to the runners as it is, and two that get an
    8-bit copy (12-bit data in a 16-bit TIFF, a CMYK TIFF); the args of its `newsbag run`."""

    from nbtest import write_image

    root = tmp_path / "pages"
    write_image(root / "plain.png")
    write_image(root / "cmyk.tif", mode="CMYK")
    Image.fromarray(np.tile(np.linspace(0, 4095, 64).astype(np.uint16), (48, 1))).save(root / "deep.tif")
    cfg = write_fake_config(tmp_path / "c.json", {"v": {}, "w": {}}, extra_stages=[FUSION, REVIEW])
    return tmp_path / "run", ("run", "--input-dir", root, "--run-dir", tmp_path / "run", "--config", cfg)


def _page_files(run) -> dict:
    """Identity of every file of the run but the calls' reports."""
    return {p.relative_to(run).as_posix(): (p.stat().st_mtime_ns, p.stat().st_ino)
            for p in run.rglob("*") if p.is_file() and not p.relative_to(run).as_posix().startswith("reports/")}


def _pages_changed(run, before: dict, ids: dict) -> dict:
    """name -> the files of that page (copy, source pages, fused pages, board) that changed since `before`."""
    after = _page_files(run)
    changed = [k for k in after.keys() | before.keys() if before.get(k) != after.get(k)]
    return {name: sorted(k for k in changed if pid in k) for name, pid in ids.items()
            if any(pid in k for k in changed)}


def test_a_changed_conversion_rule_remakes_the_copies_it_changes_and_their_outputs_only(tmp_path, capsys, monkeypatch):
    """Source fingerprints held the scan's hash, not the 8-bit copy's: a run made before 12-bit data
    was scaled by 4095 kept its nearly black copy, and the pages made from it stayed current after
    an upgrade. The manifest now records the conversion revision that made a copy and the copy's
    pixel hash: a rerun remakes the copies an older revision made, and only a page whose copy
    changed gets its sources, fused pages and board redone."""
    from newsbag import image_depth, images

    run, args = _converted_run(tmp_path, capsys)
    with monkeypatch.context() as m:   # the rule before: 16-bit samples always scaled by 65535
        m.setattr(image_depth, "_white_point", lambda peak, declared: (65535, ""))
        m.setattr(images, "CONVERSION_REVISION", images.CONVERSION_REVISION - 1)
        code, _, err = run_cli(capsys, *args)
    assert code == 0, err
    ids = {name: _pid(run, name) for name in ("plain.png", "cmyk.tif", "deep.tif")}
    copy = run / "cache/images" / f"{ids['deep.tif']}.png"
    assert np.asarray(Image.open(copy)).max() == 4095 * 255 // 65535   # nearly black
    before = _page_files(run)
    code, _, err = run_cli(capsys, *args)
    assert code == 0, err
    assert np.asarray(Image.open(copy)).max() == 255
    changed = _pages_changed(run, before, ids)
    assert list(changed) == ["deep.tif"], changed
    deep = ids["deep.tif"]
    assert {f"cache/images/{deep}.png", f"outputs/sources/fake/v/{deep}.json", f"outputs/sources/fake/w/{deep}.json",
            f"outputs/fusion/C/{deep}.json", f"outputs/fusion/S/{deep}.json",
            f"review/pages/{deep}/data.js"} <= set(changed["deep.tif"])


def test_a_page_passed_as_is_under_an_older_rule_is_converted_again(tmp_path, capsys, monkeypatch):
    """A 16-bit colour PNG was passed to the runners as it was (read nearly black) until its rule
    changed; a page passed as is records no copy, so nothing made it be looked at again. Every
    page now records the revision that converted it: one an older revision passed as is is read
    again (its header, no hash), and gets its copy and new outputs only if the rule now makes one."""
    from newsbag import images

    from nbtest import write_png16

    run, args = _converted_run(tmp_path, capsys)
    ramp = np.tile(np.linspace(0, 4095, 64).astype(np.uint16), (48, 1))
    write_png16(tmp_path / "pages" / "rgb16.png", np.stack([ramp] * 3, -1))
    with monkeypatch.context() as m:   # the rule before: 16-bit colour PNGs passed as they are
        m.setattr(images, "_deep_colour_bits", lambda im: 0)
        m.setattr(images, "CONVERSION_REVISION", images.CONVERSION_REVISION - 1)
        code, _, err = run_cli(capsys, *args)
    assert code == 0, err
    ids = {name: _pid(run, name) for name in ("plain.png", "cmyk.tif", "deep.tif", "rgb16.png")}
    assert not (run / "cache/images" / f"{ids['rgb16.png']}.png").exists()
    before = _page_files(run)
    code, _, err = run_cli(capsys, *args)
    assert code == 0, err
    changed = _pages_changed(run, before, ids)
    assert list(changed) == ["rgb16.png"], changed
    rgb16 = ids["rgb16.png"]
    assert {f"cache/images/{rgb16}.png", f"outputs/sources/fake/v/{rgb16}.json",
            f"review/pages/{rgb16}/data.js"} <= set(changed["rgb16.png"])
    assert np.asarray(Image.open(run / "cache/images" / f"{rgb16}.png")).max() == 255


def test_status_counts_the_pages_an_older_conversion_rule_converted(tmp_path, capsys, monkeypatch):
    """After an upgrade that changed how pages are converted, status (and so a Slurm resubmit's
    reader) said every source page done, though the next run redoes the pages whose copy changes:
    it now counts the pages an older rule converted, with what the next call does about them."""
    from newsbag import images

    run, args = _converted_run(tmp_path, capsys)
    with monkeypatch.context() as m:
        m.setattr(images, "CONVERSION_REVISION", images.CONVERSION_REVISION - 1)
        code, _, err = run_cli(capsys, *args)
    assert code == 0, err
    code, out, _ = run_cli(capsys, "status", "--run-dir", run, "--json")
    assert json.loads(out).get("judged_by_older_rule") == 3
    code, out, _ = run_cli(capsys, "status", "--run-dir", run)
    assert "3 page(s) judged by an older conversion rule" in out
    code, _, err = run_cli(capsys, *args)
    assert code == 0, err
    code, out, _ = run_cli(capsys, "status", "--run-dir", run, "--json")
    assert json.loads(out)["judged_by_older_rule"] == 0
    assert "older conversion rule" not in run_cli(capsys, "status", "--run-dir", run)[1]


def _copied_without_mtimes(run: Path) -> Path:
    """The run as `cp -r` / `scp -r` / zip leave it: the same bytes, every file a new mtime."""
    import shutil

    copy = run.with_name("copy")
    shutil.copytree(run, copy, copy_function=shutil.copyfile)
    for path in copy.rglob("*"):
        if path.is_file():
            os.utime(path, ns=(path.stat().st_atime_ns, path.stat().st_mtime_ns + 7 * 10**9))
    return copy


def _contents(run: Path, under: str) -> dict:
    """Bytes of each file under `under` but the stages' own records (fusion's _metrics, a board's
    info.json), which may take a copy's new mtimes."""
    return {p.relative_to(run).as_posix(): p.read_bytes() for p in (run / under).rglob("*")
            if p.is_file() and p.name != "info.json" and p.parent.name != "_metrics"}


def test_a_run_copied_without_its_mtimes_redoes_nothing_and_status_says_done(tmp_path, page_dir, capsys, monkeypatch):
    """A run copied with `cp -r` (new mtimes, same bytes) is the same run: a rerun skips every page
    of every stage and leaves fused pages, boards and exports as they are, and status counts them
    done. Each stage's own records may take the new mtimes, so the next rerun stats, not reads."""
    from newsbag import freshness
    from newsbag.status import collect_status

    run, _ = _finished_run(tmp_path, page_dir, capsys)
    copy = _copied_without_mtimes(run)
    kept = ("outputs/fusion", "review/pages", "exports")
    before = {d: _contents(copy, d) for d in kept}
    status = collect_status(copy)
    assert [s["done"] for s in status["builtin"]["fusion"]] == [5, 5] and _boards(status)["done"] == 5, status
    code, out, err = run_cli(capsys, "run", "--run-dir", copy, "--json")
    assert code == 0, err
    assert _counts(out) == {"fake/v": 0, "fake/w": 0, "fusion": 0, "review": 0, "export": 0}
    outputs = {d: _identities(copy, d) for d in kept}
    assert {d: _contents(copy, d) for d in kept} == before
    hashed = []
    real = freshness.file_digest
    monkeypatch.setattr(freshness, "file_digest", lambda path: hashed.append(path) or real(path))
    code, out, err = run_cli(capsys, "run", "--run-dir", copy, "--json")
    assert code == 0, err
    assert _counts(out) == {"fake/v": 0, "fake/w": 0, "fusion": 0, "review": 0, "export": 0}
    assert {d: _identities(copy, d) for d in kept} == outputs and hashed == []


def test_a_copied_run_whose_source_page_changed_redoes_that_page_only(tmp_path, page_dir, capsys):
    """The other side: in a copy, a source page with other boxes (same page id, a new mtime as
    every file) is redone by fusion, review and export, and no other page is."""
    run, _ = _finished_run(tmp_path, page_dir, capsys)
    copy = _copied_without_mtimes(run)
    pid = _pid(copy, "issue2/p3")
    _redo_with_other_boxes(copy / f"outputs/sources/fake/v/{pid}.json")
    boards = _contents(copy, "review/pages")
    code, out, err = run_cli(capsys, "run", "--run-dir", copy, "--json")
    assert code == 0, err
    assert _counts(out) == {"fake/v": 0, "fake/w": 0, "fusion": 1, "review": 1, "export": 1}
    after = _contents(copy, "review/pages")
    assert sorted({k.split("/")[2] for k in after if boards.get(k) != after[k]}) == [pid]


def test_a_moved_run_dir_still_reads_the_8_bit_copies_it_made(tmp_path, capsys):
    """A 16-bit scan is read through its 8-bit copy in RUN/cache/images. A run moved (or copied
    and the original purged from scratch) still finds that copy: the manifest named it by the
    old run's absolute path, and the board of that page failed as an unreadable image."""
    pages = tmp_path / "pages"
    write_image(pages / "deep.tif", size=(40, 30), mode="I;16")
    write_image(pages / "flat.png", size=(40, 30))
    cfg = write_fake_config(tmp_path / "c.json", {"v": {}}, extra_stages=[FUSION, REVIEW])
    run = tmp_path / "run"
    code, _, err = run_cli(capsys, "run", "--input-dir", pages, "--run-dir", run, "--config", cfg)
    assert code == 0, err
    moved = tmp_path / "moved"
    os.rename(run, moved)
    code, out, err = run_cli(capsys, "review", "--run-dir", moved, "--force", "--json")
    assert code == 0, err
    assert (json.loads(out)["ok"], json.loads(out)["failed"]) == (2, 0)


def test_status_counts_the_scans_replaced_on_disk_since_they_were_inspected(tmp_path, page_dir, capsys):
    """A scan replaced in place after `newsbag run` recorded it: status said its sources were done,
    though the next run hashes it again and redoes the page. Status now counts it from one stat a
    page (no hashing), and the count clears once a run has inspected it again."""
    run, cfg, code, err = _run(tmp_path, page_dir, capsys)
    assert code == 0, err
    scan = page_dir / "issue1/p2.png"
    write_image(scan, size=(40, 30), mode="RGB")   # a rescan under the same name
    code, out, _ = run_cli(capsys, "status", "--run-dir", run, "--json")
    assert code == 0 and json.loads(out)["scans_changed"] == 1
    code, out, _ = run_cli(capsys, "status", "--run-dir", run)
    assert "scans changed since inspected: 1 (rerun newsbag run / newsbag pages)" in out
    code, _, err = run_cli(capsys, "run", "--run-dir", run, "--config", cfg)
    assert code == 0, err
    code, out, _ = run_cli(capsys, "status", "--run-dir", run, "--json")
    assert json.loads(out)["scans_changed"] == 0
    assert "scans changed" not in run_cli(capsys, "status", "--run-dir", run)[1]


def test_status_counts_the_scans_gone_since_they_were_inspected(tmp_path, page_dir, capsys):
    """A run moved or copied without its scans (or scans deleted after the run): status said every
    stage done, though a review board, a transcript or a model run of those pages can no longer be
    made and an export's image links point nowhere. Status now counts them from the same one stat a
    page, and the count clears once they are back."""
    run, cfg, code, err = _run(tmp_path, page_dir, capsys)
    assert code == 0, err
    away = tmp_path / "away"
    os.rename(page_dir / "issue2", away)
    code, out, _ = run_cli(capsys, "status", "--run-dir", run, "--json")
    info = json.loads(out)
    assert code == 0 and (info["scans_missing"], info["scans_changed"]) == (3, 0)
    code, out, _ = run_cli(capsys, "status", "--run-dir", run)
    assert "scans missing since inspected: 3" in out and "scans changed" not in out
    os.rename(away, page_dir / "issue2")
    code, out, _ = run_cli(capsys, "status", "--run-dir", run, "--json")
    assert json.loads(out)["scans_missing"] == 0
    assert "scans missing" not in run_cli(capsys, "status", "--run-dir", run)[1]


def test_status_says_how_many_pages_of_the_run_the_gallery_holds(tmp_path, page_dir, capsys):
    """A gallery written by a review of some pages (`run --pages`, or a shard's review before the
    others drew their boards) leaves pages out, and its header says so; status said "gallery yes",
    and a resubmit planned no review to complete it once every board was drawn. Status now counts
    the pages the gallery holds, and a gallery short of the run leaves review pending."""
    from newsbag.config import load_config
    from newsbag.slurm.plan import pending_stages

    run, cfg, code, err = _run(tmp_path, page_dir, capsys, "--stages", "fake,fusion")
    assert code == 0, err
    two = [_pid(run, "issue1/p1"), _pid(run, "issue1/p2")]
    code, _, err = run_cli(capsys, "run", "--run-dir", run, "--stages", "review", "--pages", ",".join(two))
    assert code == 0, err
    short = (run / "review/index.html").read_text()
    assert "3 not in this gallery" in short
    code, out, _ = run_cli(capsys, "status", "--run-dir", run, "--json")
    (boards,) = json.loads(out)["builtin"]["review"]
    assert (boards["note"], boards["whole"]) == ("gallery 2 of 5 pages (rerun newsbag review)", False)
    code, out, _ = run_cli(capsys, "status", "--run-dir", run)
    assert "gallery 2 of 5 pages" in out and "gallery yes" not in out
    code, _, err = run_cli(capsys, "review", "--run-dir", run)
    assert code == 0, err
    assert json.loads(run_cli(capsys, "status", "--run-dir", run, "--json")[1])["builtin"]["review"][0]["whole"]
    assert "gallery yes" in run_cli(capsys, "status", "--run-dir", run)[1]
    assert pending_stages(load_config(cfg), ["review"], run) == []
    # every board drawn, but the gallery is the short one (a shard's, written before the others drew
    # theirs): review has work left, so a resubmit completes it
    (run / "review/index.html").write_text(short)
    assert pending_stages(load_config(cfg), ["review"], run) == ["review"]


# fuse: the "auto" order's pre-pass checks every page's sources before the fusion pass does
@pytest.mark.parametrize("command, stats", [("fuse", 2), ("review", 1)])
def test_a_rerun_with_nothing_changed_stats_each_input_no_more_than_it_checks_it(
        tmp_path, page_dir, capsys, monkeypatch, command, stats):
    """A skipped page is checked by one stat of each input: the check that its input record
    still holds (a run copied without its mtimes) must not stat them all again (1.7M stats more
    per rerun of 100k pages, each a round trip on Lustre or NFS)."""
    from collections import Counter

    from newsbag import freshness

    run, _ = _finished_run(tmp_path, page_dir, capsys)
    real, seen = freshness.file_identity, Counter()

    def counted(path):
        seen[os.fspath(path)] += 1
        return real(path)

    monkeypatch.setattr(freshness, "file_identity", counted)
    code, out, err = run_cli(capsys, command, "--run-dir", run, "--json")
    assert code == 0, err
    assert json.loads(out)["skipped"] == 5
    sources = {p: n for p, n in seen.items() if f"{os.sep}outputs{os.sep}sources{os.sep}" in p}
    assert len(sources) == 10 and set(sources.values()) == {stats}, sources


def test_a_new_fusion_method_revision_reruns_its_variants_and_the_boards_drawn_from_them(tmp_path, page_dir, capsys,
                                                                                        monkeypatch):
    """The upgrade experiment of issue 34 through `newsbag run` on a finished run: new consensus
    code (its revision bumped) redoes the consensus variant's fused pages and, downstream, the
    boards that show them; the best_single variant and the model outputs are left as they are."""
    from newsbag import revisions

    run, cfg = _finished_run(tmp_path, page_dir, capsys)
    sources, fused_s, fused_c = (_identities(run, d) for d in ("outputs/sources", "outputs/fusion/S",
                                                               "outputs/fusion/C"))
    boards = _identities(run, "review/pages")
    now = revisions.REVISIONS["fusion/consensus"]
    monkeypatch.setitem(revisions.REVISIONS, "fusion/consensus", dataclasses.replace(now, number=now.number + 1))
    code, out, _ = run_cli(capsys, "status", "--run-dir", run, "--json")
    fusion = {o["name"]: (o["done"], o["stale"], o["reasons"]) for o in json.loads(out)["builtin"]["fusion"]}
    assert fusion == {"C": (0, 5, {f"made by fusion/consensus code revision {now.number}, now {now.number + 1}": 5}),
                      "S": (5, 0, {})}
    code, _, err = run_cli(capsys, "run", "--run-dir", run)
    assert code == 0, err
    assert _identities(run, "outputs/sources") == sources and _identities(run, "outputs/fusion/S") == fused_s
    redone = _identities(run, "outputs/fusion/C")
    assert all(redone[k] != fused_c[k] for k in fused_c)
    after = _identities(run, "review/pages")
    assert all(after[k] != boards[k] for k in boards if k.endswith("info.json"))
    code, out, _ = run_cli(capsys, "status", "--run-dir", run, "--json")
    assert all(o["stale"] == 0 for outputs in json.loads(out)["builtin"].values() for o in outputs)
