"""Several `newsbag run` calls on one run dir at once (Slurm array tasks, `--pages` subsets):
no call loses or hides another's pages, failures or reports."""

import json
import subprocess
import time
from pathlib import Path

import pytest

from nbtest import run_cli, start_newsbag, write_fake_config, write_image


def _ids(run: Path) -> dict[str, str]:
    """Page id by image stem (page00 -> page00-<hash>)."""
    lines = (run / "manifests" / "pages.jsonl").read_text().splitlines()
    return {json.loads(line)["page_id"].split("-")[0]: json.loads(line)["page_id"] for line in lines}


def test_calls_on_one_source_at_once_keep_each_others_pages_in_every_report(tmp_path, capsys):
    """Call B holds its runner mid-job while calls A1 (a page fails) and A2 (a page comes back
    empty) run the same source on other pages and finish; B then finishes last. The source's
    run_report.json, status, the ledger and the run summaries must still show A1's and A2's pages."""
    for i in range(6):
        write_image(tmp_path / "pages" / f"page{i:02d}.png", size=(40, 30))
    run, gate = tmp_path / "run", tmp_path / "gate"
    assert run_cli(capsys, "pages", "--input-dir", tmp_path / "pages", "--run-dir", run)[0] == 0
    ids = _ids(run)

    def call(name: str, mode: str, on: str) -> Path:
        return write_fake_config(tmp_path / f"{name}.json", {"v": {"mode": mode, "on": [on]}},
                                 env={"FAKE_GATE": str(gate)})

    held = start_newsbag("run", "--run-dir", run, "--config", call("b", "wait", "page04"),
                         "--pages", ",".join(ids[p] for p in ("page03", "page04", "page05")), stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 60
        while not Path(f"{gate}.reached").exists() and held.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        code, _, err = run_cli(capsys, "run", "--run-dir", run, "--config", call("a1", "raise", "page00"),
                               "--pages", ids["page00"])
        assert code == 4, err
        code, _, err = run_cli(capsys, "run", "--run-dir", run, "--config", call("a2", "empty", "page01"),
                               "--pages", f"{ids['page01']},{ids['page02']}")
        assert code == 0, err
    finally:
        gate.touch()
        _, held_err = held.communicate(timeout=60)
    assert held.returncode == 0, held_err

    report = json.loads((run / "outputs/sources/fake/v/run_report.json").read_text())
    assert {k: v["status"] for k, v in report["pages"].items()} == {
        ids["page00"]: "failed", ids["page01"]: "empty",
        **{ids[p]: "ok" for p in ("page02", "page03", "page04", "page05")}}
    assert report["pages"][ids["page00"]]["error"] == f"ValueError: bad page {ids['page00']}"
    assert report["page_totals"] == {"ok": 4, "empty": 1, "failed": 1}
    code, out, _ = run_cli(capsys, "status", "--run-dir", run, "--json")
    row = json.loads(out)["sources"][0]
    assert (row["done"], row["empty"], row["failed"], row["pending"]) == (5, 1, 1, 0)
    assert row["errors"] == {ids["page00"]: f"ValueError: bad page {ids['page00']}"}
    ledger = [json.loads(line) for line in (run / "logs" / "failures.jsonl").read_text().splitlines()]
    assert [r["page_id"] for r in ledger] == [ids["page00"]]
    # one run summary per call, none overwriting another: A1's failure is still in its own
    summaries = [json.loads(p.read_text())["sources"][0] for p in (run / "reports").glob("run_*.json")]
    assert sorted((s["counts"]["ok"], s["counts"]["empty"], s["counts"]["failed"]) for s in summaries) == [
        (0, 0, 1), (1, 1, 0), (3, 0, 0)]
    assert [s["failures"] for s in summaries if s["failures"]] == [
        {ids["page00"]: f"ValueError: bad page {ids['page00']}"}]


def test_status_takes_a_page_redone_after_its_shard_from_the_page_not_the_older_report(tmp_path, capsys):
    """Shard tasks found page00 empty; a later --pages call redid it and it is fine now. Its
    shard's report still says empty, and status must not count (and flag) it from there."""
    for i in range(4):
        write_image(tmp_path / "pages" / f"page{i:02d}.png", size=(40, 30))
    run = tmp_path / "run"
    assert run_cli(capsys, "pages", "--input-dir", tmp_path / "pages", "--run-dir", run)[0] == 0
    empty = write_fake_config(tmp_path / "e.json", {"v": {"mode": "empty", "on": ["page00"]}})
    for shard in ("0/2", "1/2"):
        assert run_cli(capsys, "run", "--run-dir", run, "--config", empty, "--shard", shard)[0] == 0
    code, out, _ = run_cli(capsys, "status", "--run-dir", run, "--json")
    assert json.loads(out)["sources"][0]["empty"] == 1
    ok = write_fake_config(tmp_path / "ok.json", {"v": {}})
    assert run_cli(capsys, "run", "--run-dir", run, "--config", ok, "--pages", _ids(run)["page00"], "--force")[0] == 0
    code, out, _ = run_cli(capsys, "status", "--run-dir", run, "--json")
    row = json.loads(out)["sources"][0]
    assert (row["done"], row["empty"], row["flagged"], row["empty_reasons"]) == (4, 0, False, {})



def _three_finished_shards(tmp_path, capsys) -> tuple[Path, Path]:
    """(run dir, config) of 9 pages the fake runner finished as three array tasks."""
    for i in range(9):
        write_image(tmp_path / "pages" / f"page{i:02d}.png", size=(40, 30))
    run = tmp_path / "run"
    assert run_cli(capsys, "pages", "--input-dir", tmp_path / "pages", "--run-dir", run)[0] == 0
    config = write_fake_config(tmp_path / "c.json", {"v": {}})
    for shard in ("0/3", "1/3", "2/3"):
        assert run_cli(capsys, "run", "--run-dir", run, "--config", config, "--stages", "fake", "--shard", shard)[0] == 0
    return run, config


def test_a_shard_task_parses_only_its_own_manifest_lines(tmp_path, capsys, monkeypatch):
    """Each task of an array over a 100k-line manifest parsed every line (0.6 s here, in each
    of hundreds of tasks); it needs its slice."""
    from newsbag import manifest

    run, config = _three_finished_shards(tmp_path, capsys)
    parsed = []

    class Counted(manifest.PageRecord):
        def __init__(self, *args, **kwargs):
            parsed.append(kwargs["page_id"])
            super().__init__(*args, **kwargs)

    monkeypatch.setattr(manifest, "PageRecord", Counted)
    code, _, err = run_cli(capsys, "run", "--run-dir", run, "--config", config, "--stages", "fake", "--shard", "1/3")
    assert code == 0, err
    ids = [json.loads(line)["page_id"] for line in (run / "manifests" / "pages.jsonl").read_text().splitlines()]
    assert parsed == ids[1::3]


def test_a_shard_task_with_nothing_to_do_reads_its_own_report_and_opens_no_page(tmp_path, capsys, monkeypatch):
    """A task checked its pages against every shard's run report (each task read all N of them: the
    whole run's index); its own report records its pages, so it reads that one and stats them."""
    from newsbag import freshness, reports as nb_reports

    run, config = _three_finished_shards(tmp_path, capsys)
    reports, opened = [], []
    real_read_json = nb_reports.read_json
    monkeypatch.setattr(nb_reports, "read_json", lambda path, *a, **k: (
        reports.append(Path(path).name) if Path(path).name.startswith("run_report") else None)
        or real_read_json(path, *a, **k))
    monkeypatch.setattr(freshness, "read_valid_page", lambda path, *a, **k: opened.append(path))
    code, _, err = run_cli(capsys, "run", "--run-dir", run, "--config", config, "--stages", "fake", "--shard", "1/3")
    assert code == 0, err
    assert reports == ["run_report.shard-1-of-3.json"]
    assert opened == []


def test_a_shard_task_with_nothing_to_do_lists_no_folder_of_pages(tmp_path, capsys, monkeypatch):
    """Its own report is found by its name: listing the variant folder (100k page files) to
    find the reports was most of what was left of a shard task's check (0.09 s at 100k pages)."""
    import os

    run, config = _three_finished_shards(tmp_path, capsys)
    listed = []
    real_scandir = os.scandir
    monkeypatch.setattr(os, "scandir", lambda path=".": listed.append(Path(path)) or real_scandir(path))
    code, _, err = run_cli(capsys, "run", "--run-dir", run, "--config", config, "--stages", "fake", "--shard", "1/3")
    assert code == 0, err
    assert run / "outputs" / "sources" / "fake" / "v" not in listed


@pytest.mark.parametrize("before", ["missing", "stale"])
def test_a_page_another_call_writes_after_this_call_checked_it_is_not_deleted_or_failed(tmp_path, capsys, monkeypatch,
                                                                                        before):
    """Calls A and B run one source on the same page. B checks it (not current: missing, or
    made with other parameters), then A's runner writes it; B's removal of stale pages must not delete A's fresh write, or A finds
    its page gone and fails it ("wrote no output") until the next rerun clears it."""
    import threading

    from newsbag import freshness, orchestrator
    from newsbag.config import load_config
    from newsbag.manifest import read_pages

    write_image(tmp_path / "pages" / "page00.png", size=(40, 30))
    run = tmp_path / "run"
    assert run_cli(capsys, "pages", "--input-dir", tmp_path / "pages", "--run-dir", run)[0] == 0
    if before == "stale":
        old = write_fake_config(tmp_path / "old.json", {"v": {"tag": "old"}})
        assert run_cli(capsys, "run", "--run-dir", run, "--config", old)[0] == 0
    cfg = load_config(write_fake_config(tmp_path / "c.json", {"v": {}}))
    stage, pages = cfg.stage("fake"), read_pages(run)
    a_wrote, b_planned = threading.Event(), threading.Event()
    outcomes = {}

    def call_a():
        outcomes["a"] = orchestrator.run_source(run, stage, "v", pages, runners=cfg.runners_dir)

    a = threading.Thread(target=call_a)
    real_check, real_current, real_launch = orchestrator.check_output, freshness.current_source_pages, orchestrator._launch

    def check(out_dir, page):  # A holds here: its runner has written the page and said so
        if threading.current_thread() is a:
            a_wrote.set()
            assert b_planned.wait(60)
        return real_check(out_dir, page)

    def current(*args, **kwargs):  # B has checked its pages: now A runs
        found = real_current(*args, **kwargs)
        if threading.current_thread() is not a:
            a.start()
            assert a_wrote.wait(60)
        return found

    def launch(*args, **kwargs):  # B is past its removal of stale pages: A checks its page
        if threading.current_thread() is not a:
            b_planned.set()
        return real_launch(*args, **kwargs)

    monkeypatch.setattr(orchestrator, "check_output", check)
    monkeypatch.setattr(freshness, "current_source_pages", current)
    monkeypatch.setattr(orchestrator, "_launch", launch)
    outcomes["b"] = orchestrator.run_source(run, stage, "v", pages, runners=cfg.runners_dir)
    a.join(60)
    page_id = pages[0].page_id
    assert outcomes["a"].pages[page_id].status == "ok", outcomes["a"].pages[page_id]
    assert outcomes["b"].pages[page_id].status in ("ok", "skipped")
    assert (run / "outputs/sources/fake/v" / f"{page_id}.json").is_file()
    assert not (run / "outputs/sources/fake/v/_failed" / f"{page_id}.json").exists()


def test_an_invalid_output_another_call_replaces_after_it_was_read_is_not_moved_aside(tmp_path, capsys, monkeypatch):
    """A runner wrote an invalid page; the check read it, then another call's runner replaced
    it with a valid page before the check moved the bad one aside. The move must not take the
    other call's fresh page (it would vanish into _failed and this page fail until a rerun)."""
    from newsbag import io, orchestrator, page_outcomes
    from newsbag.config import load_config
    from newsbag.manifest import read_pages

    write_image(tmp_path / "pages" / "page00.png", size=(40, 30))
    clean, run = tmp_path / "clean", tmp_path / "run"
    for folder in (clean, run):
        assert run_cli(capsys, "pages", "--input-dir", tmp_path / "pages", "--run-dir", folder)[0] == 0
    assert run_cli(capsys, "run", "--run-dir", clean, "--config", write_fake_config(tmp_path / "ok.json", {"v": {}}))[0] == 0
    page_id = read_pages(run)[0].page_id
    good = (clean / "outputs/sources/fake/v" / f"{page_id}.json").read_bytes()
    path = run / "outputs/sources/fake/v" / f"{page_id}.json"
    real_read = page_outcomes.read_page

    def read_page(where, *args, **kwargs):  # the other call writes right after this one read the bad page
        try:
            return real_read(where, *args, **kwargs)
        except ValueError:
            if Path(where) == path and path.read_bytes() != good:
                io.atomic_write_bytes(path, good)
            raise

    monkeypatch.setattr(page_outcomes, "read_page", read_page)
    cfg = load_config(write_fake_config(tmp_path / "c.json", {"v": {"mode": "garbage", "on": [page_id]}}))
    outcome = orchestrator.run_source(run, cfg.stage("fake"), "v", read_pages(run), runners=cfg.runners_dir)
    assert path.read_bytes() == good
    assert outcome.pages[page_id].status == "ok", outcome.pages[page_id]
    assert not (run / "outputs/sources/fake/v/_failed" / f"{page_id}.invalid.json").exists()
