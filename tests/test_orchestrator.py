"""The orchestrator against fault-injecting fake runners: ledger, exit codes, resume."""

import json
import logging
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from newsbag.cli import main
from newsbag.manifest import read_pages

from nbtest import FAKE_RUNNERS, start_newsbag, write_fake_config, write_image


def run_cli(capsys, *args):
    with pytest.raises(SystemExit) as exc:
        main([str(a) for a in args])
    out, err = capsys.readouterr()
    return exc.value.code, out, err


def outputs(run: Path, variant="v"):
    folder = run / "outputs" / "sources" / "fake" / variant
    return {p.stem: json.loads(p.read_text()) for p in folder.glob("*.json") if not p.name.startswith("run_report")}


def failures(run: Path, variant="v"):
    folder = run / "outputs" / "sources" / "fake" / variant / "_failed"
    return {p.stem: json.loads(p.read_text()) for p in folder.glob("*.json") if not p.name.endswith(".invalid.json")}


def ids_with(run, needle):
    return {p.page_id for p in read_pages(run) if needle in p.page_id}


def test_clean_run_writes_contract_and_report(tmp_path, page_dir, capsys):
    cfg = write_fake_config(tmp_path / "c.json", {"v": {}})
    code, out, err = run_cli(capsys, "run", "--input-dir", page_dir, "--recursive", "--run-dir", tmp_path / "run", "--config", cfg)
    assert code == 0, err
    pages = outputs(tmp_path / "run")
    assert len(pages) == 5
    page = next(iter(pages.values()))
    assert page["source"] == {"stage": "fake", "variant": "v", "family": "fake", "model": "fake-1", "device": "cpu",
                              "fingerprint": page["source"]["fingerprint"]}
    assert len(page["source"]["fingerprint"]) == 16
    assert page["regions"][0]["bbox_xyxy"] == [1.0, 1.0, 20.0, 15.0]
    # fake.tool.json maps "text"; "mystery" is in no table: unknown, and counted once per page
    assert page["regions"][0]["class"] == "text"
    assert page["regions"][1]["class"] == "unknown" and page["warnings"] == {"unknown_label:mystery": 1}
    assert not Path(page["image"]["path"]).is_absolute()
    umask = os.umask(0)
    os.umask(umask)
    for written in (next((tmp_path / "run/outputs/sources/fake/v").glob("*.json")), tmp_path / "run/manifests/pages.jsonl"):
        assert written.stat().st_mode & 0o777 == 0o666 & ~umask  # not mkstemp's 0600
    report = json.loads((tmp_path / "run/outputs/sources/fake/v/run_report.json").read_text())
    assert report["counts"] == {"ok": 5, "empty": 0, "failed": 0, "skipped": 0} and report["device_used"] == "cpu"
    summary = json.loads((tmp_path / "run/reports/run_all.json").read_text())
    assert summary["sources"][0]["device_used"] == "cpu" and summary["sources"][0]["counts"]["ok"] == 5
    assert summary["sources"][0]["info"]["peak_rss_mb"] > 1 and report["mean_page_seconds"] >= 0


def test_rerun_skips_finished_pages_and_force_redoes(tmp_path, page_dir, capsys):
    cfg = write_fake_config(tmp_path / "c.json", {"v": {}})
    args = ["run", "--input-dir", page_dir, "--recursive", "--run-dir", tmp_path / "run", "--config", cfg]
    assert run_cli(capsys, *args)[0] == 0
    before = {p: (tmp_path / "run/outputs/sources/fake/v" / f"{p}.json").stat().st_mtime_ns for p in outputs(tmp_path / "run")}
    code, out, _ = run_cli(capsys, *args, "--json")   # this call's counts (the report keeps the call that ran)
    assert code == 0
    summary = json.loads(out)
    assert summary["sources"][0]["counts"]["skipped"] == 5
    assert summary["sources"][0]["launches"] == 0  # nothing to do: no model load at all
    after = {p: (tmp_path / "run/outputs/sources/fake/v" / f"{p}.json").stat().st_mtime_ns for p in before}
    assert before == after
    assert run_cli(capsys, *args, "--force")[0] == 0
    summary = json.loads((tmp_path / "run/reports/run_all.json").read_text())
    assert summary["sources"][0]["counts"]["ok"] == 5 and summary["sources"][0]["launches"] == 1
    # the model answered the same: each page is left as it was (only its `seconds` would differ)
    assert {p: (tmp_path / "run/outputs/sources/fake/v" / f"{p}.json").stat().st_mtime_ns for p in before} == before


@pytest.mark.parametrize("mode,needle,error", [
    ("raise", "issue1__p1", "ValueError: bad page"),                       # exception inside detect
    ("crash", "issue2__p2", "runner killed by SIGKILL (out of memory?) while processing this page"),  # runner dies
    ("garbage", "issue1__p2", "invalid output JSON"),                      # output is not JSON
    ("exit0", "issue2__p1", "runner exited 0 while processing this page"),  # exits mid-job
])
def test_page_faults_are_recorded_and_the_rest_goes_on(tmp_path, page_dir, capsys, mode, needle, error):
    clean_cfg = write_fake_config(tmp_path / "clean.json", {"v": {}})
    assert run_cli(capsys, "run", "--input-dir", page_dir, "--recursive", "--run-dir", tmp_path / "clean", "--config", clean_cfg)[0] == 0
    cfg = write_fake_config(tmp_path / "c.json", {"v": {"mode": mode, "on": [needle]}})
    run = tmp_path / "run"
    code, out, err = run_cli(capsys, "run", "--input-dir", page_dir, "--recursive", "--run-dir", run, "--config", cfg)
    assert code == 4
    assert "1 page run(s) failed" in err
    bad = ids_with(run, needle)
    assert set(failures(run)) == bad
    assert error in next(iter(failures(run).values()))["error"]
    good = outputs(run)
    assert set(good) == {p.page_id for p in read_pages(run)} - bad
    clean = outputs(tmp_path / "clean")
    for page_id, page in good.items():  # good pages identical to a clean run (timings aside)
        assert page["regions"] == clean[page_id]["regions"]
    ledger = [json.loads(line) for line in (run / "logs" / "failures.jsonl").read_text().splitlines()]
    assert [r["page_id"] for r in ledger] == sorted(bad) and ledger[0]["status"] == "failed"
    code, out, _ = run_cli(capsys, "status", "--run-dir", run, "--json")
    status = json.loads(out)
    assert status["sources"][0]["failed"] == 1 and status["sources"][0]["done"] == 4
    assert not list(run.rglob("*.tmp"))


def test_hang_past_page_timeout_is_killed_and_others_finish(tmp_path, page_dir, capsys):
    cfg = write_fake_config(tmp_path / "c.json", {"v": {"mode": "hang", "on": ["issue1__p2"]}}, page_timeout_s=3)
    run = tmp_path / "run"
    t0 = time.monotonic()
    code, _, err = run_cli(capsys, "run", "--input-dir", page_dir, "--recursive", "--run-dir", run, "--config", cfg)
    assert code == 4 and time.monotonic() - t0 < 30
    fails = failures(run)
    assert set(fails) == ids_with(run, "issue1__p2")
    assert "no progress for 3s" in next(iter(fails.values()))["error"]
    assert len(outputs(run)) == 4


def test_runner_exiting_0_without_output(tmp_path, page_dir, capsys):
    cfg = write_fake_config(tmp_path / "c.json", {"v": {}}, env={"FAKE_MODES": "noop"})
    run = tmp_path / "run"
    code, _, err = run_cli(capsys, "run", "--input-dir", page_dir, "--recursive", "--run-dir", run, "--config", cfg)
    assert code == 4
    assert len(failures(run)) == 5 and not outputs(run)
    assert all("without writing output" in f["error"] for f in failures(run).values())


@pytest.mark.parametrize("variant,kwargs,code,message", [
    ({"mode": "missing"}, {}, 3, "fakelib is not installed"),                       # dependency missing
    ({"mode": "nogpu"}, {"device": "gpu", "allow_cpu_fallback": False}, 5, "no CUDA device"),  # GPU refused
    ({}, {"python": "/nonexistent/env/bin/python"}, 3, "/nonexistent/env/bin/python"),  # env missing
])
def test_env_and_device_failures(tmp_path, page_dir, capsys, variant, kwargs, code, message):
    cfg = write_fake_config(tmp_path / "c.json", {"v": variant}, **kwargs)
    got, _, err = run_cli(capsys, "run", "--input-dir", page_dir, "--recursive", "--run-dir", tmp_path / "run", "--config", cfg)
    assert got == code
    assert message in err and "stage fake" in err
    assert len(err.strip().splitlines()[-1]) < 400


def test_interrupted_run_resumes_without_loss(tmp_path, page_dir):
    """Kill `newsbag run` mid-job, rerun: every page once, none half-written."""
    cfg = write_fake_config(tmp_path / "c.json", {"v": {"mode": "hang", "on": ["issue2__p3"]}})
    run = tmp_path / "run"
    args = ["run", "--input-dir", str(page_dir), "--recursive", "--run-dir", str(run), "--config"]
    proc = start_newsbag(*args, cfg)
    deadline = time.monotonic() + 60
    while len(outputs(run)) < 4 and time.monotonic() < deadline:
        time.sleep(0.2)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    assert len(outputs(run)) == 4
    cfg_ok = write_fake_config(tmp_path / "ok.json", {"v": {}})
    done = subprocess.run([sys.executable, "-m", "newsbag", *args, str(cfg_ok)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    summary = json.loads((run / "reports/run_all.json").read_text())
    assert summary["sources"][0]["counts"] == {"ok": 1, "empty": 0, "failed": 0, "skipped": 4}
    files = sorted(p.name for p in (run / "outputs/sources/fake/v").iterdir() if p.is_file())
    assert len([f for f in files if f.endswith(".json") and not f.startswith("run_report")]) == 5
    assert not [f for f in files if f.startswith(".") and not f.endswith(".lock")]  # no temp file left


def test_source_pages_are_fresh_by_fingerprint(tmp_path, page_dir, capsys):
    """Output-changing parameters or a changed image redo pages; volatile ones (batch size, fault modes) do not."""
    run = tmp_path / "run"

    def counts(variants):
        cfg = write_fake_config(tmp_path / "c.json", variants)
        code, out, err = run_cli(capsys, "run", "--input-dir", page_dir, "--recursive", "--run-dir", run,
                                 "--config", cfg, "--json")
        assert code == 0, err
        return json.loads(out)["sources"][0]["counts"]

    assert counts({"v": {}}) == {"ok": 5, "empty": 0, "failed": 0, "skipped": 0}
    assert all(o["source"]["fingerprint"] for o in outputs(run).values())
    assert counts({"v": {}}) == {"ok": 0, "empty": 0, "failed": 0, "skipped": 5}
    assert counts({"v": {"mode": "ok", "on": ["nothing"]}}) == {"ok": 0, "empty": 0, "failed": 0, "skipped": 5}
    assert counts({"v": {"tag": "other"}}) == {"ok": 5, "empty": 0, "failed": 0, "skipped": 0}
    write_image(page_dir / "issue1" / "p2.png", size=(44, 30))
    assert counts({"v": {"tag": "other"}}) == {"ok": 1, "empty": 0, "failed": 0, "skipped": 4}


def test_a_runner_revision_bump_redoes_that_family_only(tmp_path, page_dir, capsys):
    """An upgrade that changes what a runner writes bumps `revision` in its tool.json: status and the
    Slurm resubmit plan call that family's pages stale, and a resumed run redoes them and skips the
    other family's."""
    from newsbag.config import load_config
    from newsbag.slurm.plan import pending_stages

    run, runners = tmp_path / "run", tmp_path / "runners"
    runners.mkdir()
    spec = json.loads((FAKE_RUNNERS / "fake.tool.json").read_text())
    for family in ("fake", "other"):
        (runners / f"{family}.py").symlink_to(FAKE_RUNNERS / "fake.py")  # it finds runners/_loop.py and its helpers through the link
        (runners / f"{family}.tool.json").write_text(json.dumps(spec))
    cfg = write_fake_config(tmp_path / "c.json", {"v": {}}, runners_dir=runners,
                            extra_stages=[{"name": "other", "family": "other", "env": "fake", "variants": {"v": {}}}])
    args = ["run", "--input-dir", page_dir, "--recursive", "--run-dir", run, "--config", cfg]

    def counts():
        code, out, err = run_cli(capsys, *args, "--json")
        assert code == 0, err
        return {s["source"]: (s["counts"]["ok"], s["counts"]["skipped"]) for s in json.loads(out)["sources"]}

    def status():
        code, out, err = run_cli(capsys, "status", "--run-dir", run, "--json")
        assert code == 0, err
        return {s["source"]: (s["done"], s["stale"], s["pending"]) for s in json.loads(out)["sources"]}

    assert counts() == {"fake/v": (5, 0), "other/v": (5, 0)}
    assert status() == {"fake/v": (5, 0, 0), "other/v": (5, 0, 0)}
    assert pending_stages(load_config(cfg), [], run) == []
    (runners / "other.tool.json").write_text(json.dumps({**spec, "revision": spec.get("revision", 0) + 1}))
    assert status() == {"fake/v": (5, 0, 0), "other/v": (0, 5, 0)}
    assert pending_stages(load_config(cfg), [], run) == ["other"]
    code, out, err = run_cli(capsys, *args, "--dry-run", "--json")   # the plan says what the run will do
    assert code == 0, err
    assert {r["source"]: (r["done"], r["todo"]) for r in json.loads(out)["plan"] if r["family"] != "(builtin)"} == {
        "fake/v": (5, 0), "other/v": (0, 5)}
    code, out, _ = run_cli(capsys, "status", "--run-dir", run)
    assert code == 0 and "stale     5" in next(line for line in out.splitlines() if "other/v" in line)
    assert counts() == {"fake/v": (0, 5), "other/v": (5, 0)}
    assert status() == {"fake/v": (5, 0, 0), "other/v": (5, 0, 0)}


def test_status_counts_source_files_when_the_recorded_config_no_longer_loads(tmp_path, page_dir, capsys, caplog):
    """A runner's tool.json gone since the run: status still answers, by the files, and says why."""
    from newsbag.status import collect_status

    runners = tmp_path / "runners"
    runners.mkdir()
    (runners / "fake.py").symlink_to(FAKE_RUNNERS / "fake.py")
    (runners / "fake.tool.json").write_text((FAKE_RUNNERS / "fake.tool.json").read_text())
    cfg = write_fake_config(tmp_path / "c.json", {"v": {}}, runners_dir=runners)
    run = tmp_path / "run"
    assert run_cli(capsys, "run", "--input-dir", page_dir, "--recursive", "--run-dir", run, "--config", cfg)[0] == 0
    (runners / "fake.tool.json").unlink()
    (source,) = collect_status(run)["sources"]
    assert (source["done"], source["stale"], source["pending"]) == (5, 0, 0)
    assert (f"status: source pages counted without checking their fingerprints: {run / 'config.resolved.json'}: "
            f"stage 'fake': runner 'fake' has no tool spec {runners / 'fake.tool.json'}") in caplog.text


def test_a_scan_replaced_in_place_is_redone_by_a_run_from_the_manifest(tmp_path, page_dir, capsys):
    """Cluster jobs run from the manifest (`newsbag pages` once, then `newsbag run --run-dir R`):
    a scan replaced since it was hashed must be hashed again and its page redone there too, not
    skipped as current against the old image's hash; a scan that is now broken is named."""
    run = tmp_path / "run"
    cfg = write_fake_config(tmp_path / "c.json", {"v": {}})
    code, _, err = run_cli(capsys, "pages", "--input-dir", page_dir, "--recursive", "--run-dir", run)
    assert code == 0, err

    def counts(*extra):
        code, out, err = run_cli(capsys, "run", "--run-dir", run, "--config", cfg, "--json", *extra)
        return code, json.loads(out)["sources"][0]["counts"], err

    assert counts()[1] == {"ok": 5, "empty": 0, "failed": 0, "skipped": 0}
    (replaced,) = ids_with(run, "issue1__p2")
    old_sha = {p.page_id: p.sha256 for p in read_pages(run)}
    write_image(page_dir / "issue1" / "p2.png", size=(44, 30))
    assert counts()[1] == {"ok": 1, "empty": 0, "failed": 0, "skipped": 4}
    assert outputs(run)[replaced]["image"]["width"] == 44
    new_sha = {p.page_id: p.sha256 for p in read_pages(run)}
    assert {k for k in new_sha if new_sha[k] != old_sha[k]} == {replaced}
    assert counts()[1] == {"ok": 0, "empty": 0, "failed": 0, "skipped": 5}

    (broken,) = ids_with(run, "issue2__p3")
    (page_dir / "issue2" / "p3.png").write_bytes(b"not a png any more")
    code, got, err = counts()
    assert code == 4 and got == {"ok": 0, "empty": 0, "failed": 0, "skipped": 4}, err
    assert f"{page_dir / 'issue2' / 'p3.png'}: not a readable image" in err
    assert broken in {p.page_id for p in read_pages(run)}  # still a page of the run: its outputs are kept


def test_a_runners_temp_files_left_by_a_kill_are_removed_by_the_next_call_that_runs_the_source(tmp_path, page_dir, capsys):
    """A runner SIGKILLed (OOM, scancel) between a page's temp file and its rename leaves the
    temp in the source folder; the next call that computes pages there removes it when its
    writer is gone, and keeps a live writer's (another call's runner on this host)."""
    import socket

    cfg = write_fake_config(tmp_path / "c.json", {"v": {}})
    run = tmp_path / "run"
    assert run_cli(capsys, "pages", "--input-dir", page_dir, "--recursive", "--run-dir", run)[0] == 0
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    host = socket.gethostname()
    folder = run / "outputs" / "sources" / "fake" / "v"
    folder.mkdir(parents=True)
    dead, live = folder / f".p1.json.{host}-{gone.pid}-0.tmp", folder / f".p2.json.{host}-{os.getpid()}-0.tmp"
    for temp in (dead, live):
        temp.write_text('{"page_id": ')
    assert run_cli(capsys, "run", "--run-dir", run, "--config", cfg)[0] == 0
    assert len(outputs(run)) == 5
    assert not dead.exists() and live.exists()


def test_the_temp_file_of_a_runner_killed_mid_write_is_removed_before_its_restart_takes_over(tmp_path, page_dir, capsys):
    """A runner killed while writing a page (OOM kill) leaves its temp; the orchestrator
    restarts it within the same call for the pages left, and that call removes the dead
    runner's temp (it swept the folder once, before the first runner, when there was none)."""
    cfg = write_fake_config(tmp_path / "c.json", {"v": {"mode": "torn", "on": ["issue1__p2"]}})
    run = tmp_path / "run"
    code, _, err = run_cli(capsys, "run", "--input-dir", page_dir, "--recursive", "--run-dir", run, "--config", cfg)
    assert code == 4, err
    assert len(outputs(run)) == 4 and "runner killed by SIGKILL" in err
    assert not list(run.rglob("*.tmp"))


def test_a_runner_names_its_temp_files_by_host_and_pid(tmp_path, monkeypatch):
    """The name tells the next call whether the writer is gone (`io._temp_writer_gone`)."""
    monkeypatch.syspath_prepend(str(Path(__file__).parents[1] / "runners"))
    import _writes
    from newsbag import io

    names = []
    real_replace = os.replace
    monkeypatch.setattr(_writes.os, "replace", lambda src, dst: (names.append(Path(src).name), real_replace(src, dst)))
    _writes.atomic_write_json(tmp_path / "p1.json", {"page_id": "p1"})
    assert json.loads((tmp_path / "p1.json").read_text()) == {"page_id": "p1"}
    (name,) = names
    assert name.startswith(".p1.json.") and not io._temp_writer_gone(name, str(tmp_path), time.time())
    assert io._temp_writer_gone(name.replace(f"-{os.getpid()}-", "-999999999-"), str(tmp_path), time.time())


def test_a_scan_gone_after_a_finished_run_keeps_its_outputs_and_the_rerun_exits_0(tmp_path, page_dir, capsys, caplog,
                                                                                   monkeypatch):
    """`rm` of one scan after a finished run, then `newsbag run --run-dir R`: exit 4 ("unreadable
    image ... No such file"), and that page's board, scan.jpg and data.js deleted."""
    cfg = write_fake_config(tmp_path / "c.json", {"v": {}}, extra_stages=[{"name": "fusion", "kind": "fusion"},
                                                                           {"name": "review", "kind": "review"}])
    run = tmp_path / "run"
    code, _, err = run_cli(capsys, "run", "--input-dir", page_dir, "--recursive", "--run-dir", run, "--config", cfg)
    assert code == 0, err
    (gone,) = ids_with(run, "issue1__p1")
    board = run / "review" / "pages" / gone
    drawn = {p.name: p.read_bytes() for p in board.iterdir()}
    (page_dir / "issue1" / "p1.png").unlink()
    monkeypatch.setattr(logging.getLogger(), "_newsbag_configured", True, raising=False)  # keep caplog's handler
    with caplog.at_level("INFO"):
        code, _, err = run_cli(capsys, "run", "--run-dir", run)
    assert code == 0, err
    assert {p.name: p.read_bytes() for p in board.iterdir()} == drawn
    assert len([m for m in caplog.messages if "scan is gone" in m]) == 1
    assert not [m for m in caplog.messages if "No such file" in m]


def test_a_run_moved_one_level_deeper_resumes_with_its_own_command(tmp_path, page_dir, capsys, monkeypatch):
    """`mv a/r1 b/c/r1` (scans untouched): status called every scan missing, the run's own command
    exited 2 ("... both get page id ...", the vanished relative path taken for a second file), and
    exports written after the move linked to nothing. Naming the same inputs again re-anchors the
    manifest: a file with the same identity and hash under the named input is the same page."""
    import re
    import shutil

    from newsbag import pages as pages_mod
    from newsbag.status import collect_status

    cfg = write_fake_config(tmp_path / "c.json", {"v": {}}, extra_stages=[
        {"name": "fusion", "kind": "fusion"}, {"name": "export", "kind": "export", "formats": ["page-xml"]}])
    first, moved = tmp_path / "a" / "r1", tmp_path / "b" / "c" / "r1"
    assert run_cli(capsys, "run", "--input-dir", page_dir, "--recursive", "--run-dir", first, "--config", cfg)[0] == 0
    moved.parent.mkdir(parents=True)
    shutil.move(first, moved)
    assert collect_status(moved)["scans_missing"] == 5
    inspected = []
    real_inspect = pages_mod.inspect_page
    monkeypatch.setattr(pages_mod, "inspect_page", lambda *a, **k: inspected.append(a[0]) or real_inspect(*a, **k))
    code, out, err = run_cli(capsys, "run", "--input-dir", page_dir, "--recursive", "--run-dir", moved, "--json")
    assert code == 0, err
    assert inspected == []   # recognised by identity and hash, not decoded again
    assert json.loads(out)["sources"][0]["counts"]["skipped"] == 5   # this call's counts
    status = collect_status(moved)
    assert (status["pages"], status["scans_missing"], status["scans_changed"]) == (5, 0, 0)
    for page in read_pages(moved):
        assert (moved / page.path).resolve() == (page_dir / Path(page.path).relative_to("../../../pages")).resolve()
    exported = sorted((moved / "exports" / "page-xml").rglob("*.xml"))
    assert len(exported) == 5
    for xml in exported:
        image = re.search(r'imageFilename="([^"]+)"', xml.read_text()).group(1)
        assert (xml.parent / image).is_file(), image
