"""Crash isolation per page, restart budgets, failure fraction, orphans and exit codes (#10).

The fake runner kills itself on chosen pages (SIGSEGV, SIGKILL, os._exit) or hangs; these
tests pin who is blamed, how many pages finish, and the exit code.
"""

import json
import logging
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from newsbag.config import load_config
from newsbag.errors import PartialFailure, RunnerError
from newsbag.orchestrator import run_source
from newsbag.manifest import read_pages
from newsbag.status import collect_status

from nbtest import run_cli, start_newsbag, write_fake_config, write_image


@pytest.fixture
def eight_pages(tmp_path) -> Path:
    root = tmp_path / "eight"
    for i in range(8):
        write_image(root / f"page{i:02d}.png", size=(40, 30))
    return root


def _folder(run: Path) -> Path:
    return run / "outputs" / "sources" / "fake" / "v"


def done_pages(run: Path) -> set[str]:
    return {p.stem.split("-")[0] for p in _folder(run).glob("*.json") if not p.name.startswith("run_report")}


def failed_records(run: Path) -> dict[str, dict]:
    return {p.stem.split("-")[0]: json.loads(p.read_text())
            for p in (_folder(run) / "_failed").glob("*.json") if not p.name.endswith(".invalid.json")}


def summary(run: Path) -> dict:
    return json.loads((run / "reports" / "run_all.json").read_text())["sources"][0]


def _run(capsys, pages: Path, run: Path, cfg: Path, *extra):
    return run_cli(capsys, "run", "--input-dir", pages, "--run-dir", run, "--config", cfg, *extra)


def _first(n):
    return {f"page{i:02d}" for i in range(n)}


@pytest.mark.parametrize("mode,n_pages,batch,culprits,error", [
    # the case: 1 hanging page among 6, batch 2 (main: 0 done, 4 innocent pages blamed)
    ("hang", 6, 2, ["page02"], "no progress for 2s on this page"),
    # a native crash inside a batch of 4: only the culprit fails
    ("segv", 8, 4, ["page05"], "killed by SIGSEGV while processing this page"),
    # an OOM-style kill and an abort (os._exit) in two different batches
    ("crash", 8, 3, ["page01"], "killed by SIGKILL (out of memory?) while processing this page"),
    ("die", 8, 3, ["page01", "page07"], "runner exited 1 while processing this page"),
    # the unbatched case: 4 segfaulting pages among 8 (main: the 3 healthy pages after them "not run")
    ("segv", 8, 1, ["page01", "page02", "page03", "page04"], "killed by SIGSEGV while processing this page"),
])
def test_only_the_culprit_fails(tmp_path, eight_pages, capsys, mode, n_pages, batch, culprits, error):
    for extra in range(n_pages, 8):
        (eight_pages / f"page{extra:02d}.png").unlink()
    cfg = write_fake_config(tmp_path / "c.json", {"v": {"mode": mode, "on": culprits, "batch_size": batch}},
                            page_timeout_s=2)
    run = tmp_path / "run"
    code, _, err = _run(capsys, eight_pages, run, cfg)
    assert code == 4, err
    assert f"{len(culprits)} page run(s) failed" in err
    assert set(failed_records(run)) == set(culprits)  # who is blamed: the culprits, nobody else
    assert all(error in r["error"] for r in failed_records(run).values()), failed_records(run)
    assert done_pages(run) == _first(n_pages) - set(culprits)
    counts = summary(run)["counts"]
    assert counts == {"ok": n_pages - len(culprits), "empty": 0, "failed": len(culprits), "skipped": 0}
    ledger = [json.loads(line) for line in (run / "logs" / "failures.jsonl").read_text().splitlines()]
    assert sorted(r["page_id"].split("-")[0] for r in ledger) == sorted(culprits)


@pytest.mark.parametrize("culprit", ["page05", "page07"])  # a restart follows it / it is the last page run
def test_a_crash_inside_a_streamed_batch_keeps_the_pages_before_it_in_every_record(tmp_path, eight_pages, capsys,
                                                                                    caplog, monkeypatch, culprit):
    """The OOM killer takes the runner inside a batch of 4 after it wrote some of that batch's
    pages: they are kept and counted, the culprit alone fails with one log line, and the
    variant's run_report.json still matches the files on disk, the pages the killed runner had
    not flushed yet and the page it died on included."""
    cfg = write_fake_config(tmp_path / "c.json", {"v": {"mode": "crash", "on": [culprit], "batch_size": 4,
                                                        "stream": True}})
    run = tmp_path / "run"
    monkeypatch.setattr(logging.getLogger(), "_newsbag_configured", True, raising=False)  # keep caplog's handler
    code, _, err = _run(capsys, eight_pages, run, cfg)
    assert code == 4, err
    assert done_pages(run) == _first(8) - {culprit} and set(failed_records(run)) == {culprit}
    assert summary(run)["counts"] == {"ok": 7, "empty": 0, "failed": 1, "skipped": 0}
    error = "runner killed by SIGKILL (out of memory?) while processing this page"
    assert len([m for m in caplog.messages if f"page {culprit}-" in m and "fake/v" in m and error in m]) == 1, \
        caplog.messages
    report = json.loads((_folder(run) / "run_report.json").read_text())
    assert {k.split("-")[0]: v["status"] for k, v in report["pages"].items()} == {
        **{p: "ok" for p in _first(8)}, culprit: "failed"}
    assert next(v["error"] for k, v in report["pages"].items() if k.startswith(culprit)) == error
    assert report["page_totals"] == {"ok": 7, "empty": 0, "failed": 1} and report["state"] == "finished"


def test_batch_pages_report_progress_one_by_one(tmp_path, eight_pages, capsys):
    """page_timeout_s is per page: a batch of 4 slow pages (1.2 s each) under a 2 s page timeout passes."""
    cfg = write_fake_config(tmp_path / "c.json", {"v": {"mode": "slow", "seconds": 1.2, "on": ["page0"],
                                                        "batch_size": 4}}, page_timeout_s=2)
    code, _, err = _run(capsys, eight_pages, tmp_path / "run", cfg)
    assert code == 0, err
    assert summary(tmp_path / "run")["launches"] == 1


def test_failure_fraction_aborts_the_source(tmp_path, eight_pages, capsys):
    """Every page crashes the runner: the source stops once failures pass --max-failed-fraction."""
    cfg = write_fake_config(tmp_path / "c.json", {"v": {"mode": "segv", "on": ["page"]}})
    run = tmp_path / "run"
    code, _, err = _run(capsys, eight_pages, run, cfg, "--max-failed-fraction", "0.25")
    assert code == 4
    fails = failed_records(run)
    crashed = {k for k, r in fails.items() if "SIGSEGV" in r["error"]}
    assert crashed == _first(3)  # 3 of 8 > 0.25: stop there
    assert set(fails) == _first(8)
    assert all("not run: source aborted after 3 of 8 pages failed (more than 0.25" in fails[k]["error"]
               for k in _first(8) - crashed)
    assert summary(run)["launches"] == 3



def test_rerun_runs_new_pages_first_and_crashers_only_with_retry_failed(tmp_path, eight_pages, capsys):
    """A rerun no longer retries the crashing pages first (main: it failed the same way forever)."""
    cfg = write_fake_config(tmp_path / "c.json", {"v": {"mode": "segv", "on": ["page00", "page01"]}})
    run = tmp_path / "run"
    assert _run(capsys, eight_pages, run, cfg, "--max-failed-fraction", "0.1")[0] == 4
    assert done_pages(run) == set()  # aborted after page00 crashed
    code, _, err = _run(capsys, eight_pages, run, cfg)  # rerun: the healthy pages all finish
    assert code == 4
    assert done_pages(run) == _first(8) - {"page00", "page01"}
    assert set(failed_records(run)) == {"page00", "page01"}
    assert "SIGSEGV" in failed_records(run)["page00"]["error"]  # page00 not retried: its record kept
    assert "rerun with --retry-failed" in summary(run)["failures"][[k for k in summary(run)["failures"] if k.startswith("page00")][0]]
    assert summary(run)["launches"] == 2  # page01 crashed once; page00 was not tried again
    code, _, err = _run(capsys, eight_pages, run, cfg, "--retry-failed")
    assert code == 4 and summary(run)["launches"] == 2 and summary(run)["counts"]["failed"] == 2
    ok = write_fake_config(tmp_path / "ok.json", {"v": {}})
    code, _, err = _run(capsys, eight_pages, run, ok, "--retry-failed")
    assert code == 0, err
    assert done_pages(run) == _first(8) and not failed_records(run)


def test_previously_failed_pages_are_retried_last(tmp_path, eight_pages, capsys):
    bad = write_fake_config(tmp_path / "bad.json", {"v": {"mode": "raise", "on": ["page00", "page03"]}})
    run = tmp_path / "run"
    assert _run(capsys, eight_pages, run, bad)[0] == 4
    for p in _folder(run).glob("page0[5-7]*.json"):
        p.unlink()
    ok = write_fake_config(tmp_path / "ok.json", {"v": {}})
    stage = load_config(ok).stage("fake")
    order = []
    outcome = run_source(run, stage, "v", read_pages(run), runners=stage_runners(ok),
                         on_page=lambda o: order.append((o.page_id.split("-")[0], o.status)))
    assert [p for p, s in order if s == "ok"] == ["page05", "page06", "page07", "page00", "page03"]
    assert outcome.counts() == {"ok": 5, "empty": 0, "failed": 0, "skipped": 3}


def stage_runners(cfg: Path) -> Path:
    return load_config(cfg).runners_dir


def test_source_that_never_starts_has_its_own_exit_code(tmp_path, eight_pages, capsys):
    cfg = write_fake_config(tmp_path / "c.json", {"v": {}}, env={"FAKE_MODES": "importerror"})
    code, _, err = _run(capsys, eight_pages, tmp_path / "run", cfg)
    assert code == RunnerError.exit_code == 6 != PartialFailure.exit_code
    assert "before processing any page" in err and "fakelib" in (tmp_path / "run/logs/fake.v.log").read_text()


def _newsbag(tmp_path, pages, run, cfg):
    return start_newsbag("run", "--input-dir", pages, "--run-dir", run, "--config", cfg, stderr=subprocess.PIPE)


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return False
    return state not in ("Z", "X")


def _start_and_wait(tmp_path, eight_pages, run):
    pidfile = tmp_path / "runner.pid"
    cfg = write_fake_config(tmp_path / "c.json", {"v": {"mode": "slow", "seconds": 4, "on": ["page03"]}},
                            env={"FAKE_PIDFILE": str(pidfile)})
    proc = _newsbag(tmp_path, eight_pages, run, cfg)
    deadline = time.monotonic() + 60
    while len(done_pages(run)) < 3 and time.monotonic() < deadline:
        time.sleep(0.1)
    assert len(done_pages(run)) == 3
    return proc, int(pidfile.read_text())


def _assert_clean_after_kill(tmp_path, eight_pages, run, runner_pid):
    deadline = time.monotonic() + 10
    while _alive(runner_pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _alive(runner_pid), "runner outlived newsbag"
    time.sleep(5)  # the slow page would have finished by now, had the runner survived
    assert failed_records(run) == {}
    assert not (run / "logs" / "failures.jsonl").exists()
    row = collect_status(run)["sources"][0]  # in between: neither done nor failed, pending
    assert (row["done"], row["failed"], row["pending"]) == (len(done_pages(run)), 0, 8 - len(done_pages(run)))
    assert not list((run / "jobs").glob("*")) if (run / "jobs").exists() else True
    ok = write_fake_config(tmp_path / "ok.json", {"v": {}})
    done = subprocess.run([sys.executable, "-m", "newsbag", "run", "--run-dir", str(run), "--config", str(ok)],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done_pages(run) == _first(8)


def test_kill_9_of_the_process_group_leaves_no_runner(tmp_path, eight_pages):
    run = tmp_path / "run"
    proc, runner_pid = _start_and_wait(tmp_path, eight_pages, run)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    _assert_clean_after_kill(tmp_path, eight_pages, run, runner_pid)


@pytest.mark.parametrize("sig,code", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])  # Ctrl-C, scancel
def test_interrupt_stops_the_runner_and_exits_130(tmp_path, eight_pages, sig, code):
    run = tmp_path / "run"
    proc, runner_pid = _start_and_wait(tmp_path, eight_pages, run)
    os.kill(proc.pid, sig)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == code, err
    assert b"interrupted" in err
    _assert_clean_after_kill(tmp_path, eight_pages, run, runner_pid)


def test_a_second_ctrl_c_while_the_runner_is_stopped_still_marks_it_killed(tmp_path, eight_pages, capsys, monkeypatch):
    """Ctrl-C pressed twice: the second lands while newsbag stops the runner. The stop is
    finished first (the runner dead, its report ``killed``, not ``running``), then it counts."""
    run = tmp_path / "run"
    assert run_cli(capsys, "pages", "--input-dir", eight_pages, "--run-dir", run)[0] == 0
    pidfile = tmp_path / "runner.pid"
    cfg = write_fake_config(tmp_path / "c.json", {"v": {"mode": "slow", "seconds": 30, "on": ["page03"]}},
                            env={"FAKE_PIDFILE": str(pidfile)})
    stage = load_config(cfg).stage("fake")
    real_killpg, pressed = os.killpg, []

    def killpg_and_ctrl_c_again(pid, sig):
        real_killpg(pid, sig)
        if not pressed:
            pressed.append(sig)
            signal.raise_signal(signal.SIGINT)

    def ctrl_c_after_three(outcome):
        if len([p for p in _folder(run).glob("page*.json")]) >= 3:
            raise KeyboardInterrupt

    monkeypatch.setattr(os, "killpg", killpg_and_ctrl_c_again)
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)  # a background shell ignores it
    try:
        with pytest.raises(KeyboardInterrupt):
            run_source(run, stage, "v", read_pages(run), runners=stage_runners(cfg), on_page=ctrl_c_after_three)
    finally:
        signal.signal(signal.SIGINT, previous)
    assert pressed == [signal.SIGTERM]
    report = json.loads((_folder(run) / "run_report.json").read_text())
    assert (report["state"], report["pid"]) == ("killed", int(pidfile.read_text()))
    assert not _alive(report["pid"])


def test_streamed_batch_reports_each_page_and_retries_only_unfinished_ones(tmp_path, capsys, monkeypatch):
    """A detect_batch generator: pages are written as yielded; a raise retries only the rest, one by one."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "runners"))
    import _loop
    import _events

    class Streaming:
        def __init__(self, params, device, allow_cpu_fallback):
            self.device_used, self.info, self.calls = "cpu", {}, []

        def detect(self, image_path, page):
            if page["page_id"] == "c":
                raise ValueError("bad page c")
            return [{"bbox_xyxy": [1, 1, 5, 5], "label": "text", "score": 0.5}]

        def detect_batch(self, items):
            for _, page in items:
                yield self.detect(None, page)

    pages = [{"page_id": k, "image_path": "-", "path": f"{k}.png", "width": 10, "height": 10} for k in "abcd"]
    job = {"stage": "s", "variant": "v", "family": "f", "out_dir": str(tmp_path), "pages": pages, "batch_size": 4}
    assert _loop.run_job(job, Streaming) == 4
    events = [json.loads(line[len(_events.EVENT_PREFIX):]) for line in capsys.readouterr().out.splitlines()]
    steps = [(e["event"], e.get("page_id") or e.get("page_ids"), e.get("status")) for e in events
             if e["event"] in ("batch", "start", "done")]
    assert steps == [("batch", ["a", "b", "c", "d"], None), ("done", "a", "ok"), ("done", "b", "ok"),
                     ("start", "c", None), ("done", "c", "failed"), ("start", "d", None), ("done", "d", "ok")]


def test_the_runner_keeps_only_a_page_made_with_the_jobs_fingerprint(tmp_path, capsys):
    """The runner's own resume check (before compute) is the orchestrator's: a valid page that
    records another fingerprint than the job's is computed again; one with the job's is skipped.
    The report records what each written page is (fingerprint, size and mtime): newsbag's index."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "runners"))
    import _loop
    import _events

    class OneBox:
        def __init__(self, params, device, allow_cpu_fallback):
            self.device_used, self.info = "cpu", {}

        def detect(self, image_path, page):
            return [{"bbox_xyxy": [1, 1, 5, 5], "label": "text", "score": 0.5}]

    for page_id, made_with in (("kept", "now"), ("stale", "before")):
        (tmp_path / f"{page_id}.json").write_text(json.dumps(
            {"page_id": page_id, "regions": [], "source": {"fingerprint": made_with}}))
    pages = [{"page_id": k, "image_path": "-", "path": f"{k}.png", "width": 10, "height": 10, "fingerprint": "now"}
             for k in ("kept", "stale")]
    job = {"stage": "s", "variant": "v", "family": "f", "out_dir": str(tmp_path), "pages": pages}
    assert _loop.run_job(job, OneBox) == 0
    events = [json.loads(line[len(_events.EVENT_PREFIX):]) for line in capsys.readouterr().out.splitlines()]
    assert {e["page_id"]: e["status"] for e in events if e["event"] == "done"} == {"kept": "skipped", "stale": "ok"}
    redone = tmp_path / "stale.json"
    assert json.loads(redone.read_text())["source"]["fingerprint"] == "now"
    entry = json.loads((tmp_path / "run_report.json").read_text())["pages"]["stale"]
    st = redone.stat()
    assert entry["fingerprint"] == "now" and entry["identity"] == [st.st_size, st.st_mtime_ns]



def test_the_runner_sorts_its_pages_into_done_and_to_do_in_one_pass(tmp_path, capsys):
    """The runner compared each page of its job with every page to do (`page not in todo`: dict
    equality, n^2/2 comparisons): 125 s before the model loaded, on each launch of an unsharded
    100k-page job. The pages it is handed are sorted in one pass, never compared with each other."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "runners"))
    import _loop
    import _events

    compared = []

    class Page(dict):
        def __eq__(self, other):
            compared.append(self["page_id"])
            return dict.__eq__(self, other)

        __hash__ = None

    class OneBox:
        def __init__(self, params, device, allow_cpu_fallback):
            self.device_used, self.info = "cpu", {}

        def detect(self, image_path, page):
            return [{"bbox_xyxy": [1, 1, 5, 5], "label": "text", "score": 0.5}]

    (tmp_path / "p00.json").write_text(json.dumps({"page_id": "p00", "regions": [], "source": {"fingerprint": "now"}}))
    pages = [Page(page_id=f"p{i:02d}", image_path="-", path=f"p{i:02d}.png", width=10, height=10, fingerprint="now")
             for i in range(40)]
    job = {"stage": "s", "variant": "v", "family": "f", "out_dir": str(tmp_path), "pages": pages}
    assert _loop.run_job(job, OneBox) == 0
    statuses = [json.loads(line[len(_events.EVENT_PREFIX):]).get("status") for line in capsys.readouterr().out.splitlines()]
    assert statuses.count("skipped") == 1 and statuses.count("ok") == 39
    assert compared == []



@pytest.mark.parametrize("flush_s, last_write_s, wait", [
    (1.0, 0.003, 1.0),    # a shard's report (1,000 pages, 3 ms here): every second, as before
    (1.0, 0.25, 5.0),     # an unsharded 100k-page report (16 MB, 0.25 s here): 5 % of the runner's time
    (0.2, 0.0, 0.2),
])
def test_the_runner_spends_at_most_a_twentieth_of_its_time_rewriting_its_report(flush_s, last_write_s, wait):
    """The report was rewritten every second while pages finished, whatever its size: at 100k
    pages a quarter of the runner's time (and of its GIL) went to serialising it."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "runners"))
    import _report

    assert _report.flush_wait(flush_s, last_write_s) == pytest.approx(wait)


@pytest.mark.parametrize("value", [1.5, -0.1, "half", True])
def test_max_failed_fraction_is_validated(tmp_path, value):
    from newsbag.errors import ConfigError

    cfg = write_fake_config(tmp_path / "c.json", {"v": {}})
    raw = json.loads(cfg.read_text())
    raw["stages"][0]["max_failed_fraction"] = value
    cfg.write_text(json.dumps(raw))
    with pytest.raises(ConfigError, match=r"max_failed_fraction must be a number in \[0, 1\], or null, got "):
        load_config(cfg)


@pytest.mark.parametrize("rc,partial,expected", [
    (4, "1", 0),   # some pages failed: forgiven with NEWSBAG_ALLOW_PARTIAL=1
    (4, "0", 4),
    (6, "1", 6),   # a source never started: never forgiven
    (3, "1", 3),
    (5, "1", 5),
])
def test_slurm_job_forgives_only_failed_pages(tmp_path, rc, partial, expected):
    """torch/slurm/_newsbag_job.sh maps `newsbag run`'s exit code the way the README says, and
    records the exit Slurm sees in RUN/slurm/exits/<job>.json (status reads it once Slurm forgot the job)."""
    run, env = _job_script_env(tmp_path, f"exit {rc}")
    done = subprocess.run(["bash", str(JOB_SCRIPT), "cpu"], env={**env, "NEWSBAG_ALLOW_PARTIAL": partial},
                          capture_output=True, text=True)
    assert done.returncode == expected, done.stderr
    assert json.loads((run / "slurm" / "exits" / "77_3.json").read_text())["exit_code"] == expected


JOB_SCRIPT = Path(__file__).resolve().parents[1] / "torch" / "slurm" / "_newsbag_job.sh"


def _job_script_env(tmp_path, on_run: str) -> tuple[Path, dict]:
    """A run dir and the environment of array task 77_3 whose `newsbag run` is the shell code `on_run`."""
    py = tmp_path / "py"
    py.write_text(f'#!/bin/sh\ncase "$*" in *" run "*) {on_run};; esac\nexit 0\n')
    py.chmod(0o755)
    run = tmp_path / "run"
    (run / "manifests").mkdir(parents=True)
    (run / "manifests" / "pages.jsonl").write_text("")
    return run, {"PATH": os.environ["PATH"], "NEWSBAG_PY": str(py), "NEWSBAG_RUN_DIR": str(run),
                 "NEWSBAG_STAGES": "fake", "BASE": str(tmp_path / "base"), "TMPDIR": str(tmp_path),
                 "SLURM_JOB_ID": "80", "SLURM_ARRAY_JOB_ID": "77", "SLURM_ARRAY_TASK_ID": "3"}


def test_slurm_job_stopped_by_sigterm_records_143_not_success(tmp_path):
    """At the time limit (or scancel) Slurm sends SIGTERM to every process of the job: the record
    must say the job was terminated (bash killed by the signal ran its EXIT trap with $? 0)."""
    started = tmp_path / "started"
    run, env = _job_script_env(tmp_path, f"touch '{started}'; exec sleep 60")
    proc = subprocess.Popen(["bash", str(JOB_SCRIPT), "cpu"], env=env, start_new_session=True,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 30
    while not started.exists() and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.05)
    assert started.exists()
    os.killpg(proc.pid, signal.SIGTERM)
    assert proc.wait(timeout=30) == 143
    assert json.loads((run / "slurm" / "exits" / "77_3.json").read_text())["exit_code"] == 143


def test_crashed_page_is_retried_when_its_inputs_changed(tmp_path, eight_pages, capsys):
    """The hold applies to the same fingerprint only: new output parameters deserve a new try."""
    run = tmp_path / "run"
    cfg = write_fake_config(tmp_path / "c.json", {"v": {"mode": "segv", "on": ["page00"]}})
    assert _run(capsys, eight_pages, run, cfg)[0] == 4
    assert _run(capsys, eight_pages, run, cfg)[0] == 4
    assert next(iter(summary(run)["failures"].values())).startswith("not retried")
    changed = write_fake_config(tmp_path / "t.json", {"v": {"mode": "segv", "on": ["page00"], "tag": "new"}})
    assert _run(capsys, eight_pages, run, changed)[0] == 4
    error = next(iter(summary(run)["failures"].values()))
    assert error.startswith("runner killed by SIGSEGV while processing this page"), error
    assert summary(run)["launches"] == 1  # retried last, after the 7 others were redone


def test_a_page_held_back_on_reruns_is_not_logged_again_in_the_ledger(tmp_path, eight_pages, capsys):
    """failures.jsonl logs what failed when it failed: a crasher that reruns hold back (it did not
    run) is still failed in the exit code, the run report and status, but repeating its row on
    every rerun grew the ledger by every held page per call (1 row, then 4 after 3 reruns)."""
    cfg = write_fake_config(tmp_path / "c.json", {"v": {"mode": "segv", "on": ["page03"]}})
    run = tmp_path / "run"
    for _ in range(4):
        code, _, err = _run(capsys, eight_pages, run, cfg)
        assert code == 4, err
    assert next(iter(summary(run)["failures"].values())).startswith("not retried")
    assert set(failed_records(run)) == {"page03"}
    ledger = [json.loads(line) for line in (run / "logs" / "failures.jsonl").read_text().splitlines()]
    assert [(r["page_id"].split("-")[0], r["error"]) for r in ledger] == [
        ("page03", "runner killed by SIGSEGV while processing this page")]


def test_a_runner_that_dies_on_restart_still_leaves_its_failures_in_the_ledger(tmp_path, eight_pages, capsys):
    # page02 kills the runner; on the restart the runner's set-up fails for good (a CUDA error)
    cfg = write_fake_config(tmp_path / "c.json", {"v": {"mode": "crash", "on": ["page02"]}},
                            env={"FAKE_BREAK_ON_RESTART": str(tmp_path / "broken")})
    run = tmp_path / "run"
    code, _, err = _run(capsys, eight_pages, run, cfg)
    assert code == RunnerError.exit_code and "CUDA error" in err
    ledger = [json.loads(line) for line in (run / "logs" / "failures.jsonl").read_text().splitlines()]
    assert [(r["page_id"].split("-")[0], r["stage"], r["variant"]) for r in ledger] == [("page02", "fake", "v")]
    assert "SIGKILL" in ledger[0]["error"]
    # no runner wrote the report after the one killed on page02: it says so, not "running"
    report = json.loads((_folder(run) / "run_report.json").read_text())
    assert (report["state"], report["killed_by"]) == ("killed", "runner killed by SIGKILL (out of memory?)")


def _mineru_on_a_fake_gpu(tmp_path, colours: dict, batch: int) -> tuple[Path, Path, Path]:
    """(pages folder, config, source folder): MinerU with fake torch/transformers/mineru_vl_utils on a
    fake GPU; a red page makes the model hit an illegal memory access (sticky, as CUDA's)."""
    from PIL import Image

    from nbtest import shared_path, write_hf_model

    shared_path("formats")  # the fake MinerU replays the library's own answers
    fakes = Path(__file__).resolve().parent / "runners" / "fakes"
    hub = tmp_path / "hf" / "hub" / "models--opendatalab--MinerU2.5-2509-1.2B"
    write_hf_model(hub / "snapshots" / "abc")
    (hub / "refs").mkdir()
    (hub / "refs" / "main").write_text("abc")
    pages = tmp_path / "pages"
    pages.mkdir()
    for name, colour in colours.items():
        Image.new("RGB", (60, 80), colour).save(pages / f"{name}.png")
    cfg = tmp_path / "cfg.json"
    cfg.write_text(json.dumps({
        "version": 1,
        "envs": {"mineru": {"python": sys.executable, "env": {
            "PYTHONPATH": str(fakes), "FAKE_CUDA": "1", "HF_HOME": str(tmp_path / "hf"), "HF_HUB_OFFLINE": "1"}}},
        "stages": [{"name": "mineru", "family": "mineru", "env": "mineru", "device": "gpu", "max_restarts": 1,
                    "allow_cpu_fallback": False, "page_timeout_s": 60, "variants": {"layout": {"batch_size": batch}}}]}))
    return pages, cfg, tmp_path / "run" / "outputs" / "sources" / "mineru" / "layout"


def _by_page(folder: Path) -> tuple[set[str], dict[str, str]]:
    done = {p.stem.split("-")[0] for p in folder.glob("*.json") if not p.name.startswith("run_")}
    failed = {p.stem.split("-")[0]: json.loads(p.read_text())["error"] for p in (folder / "_failed").glob("*.json")}
    return done, failed


@pytest.mark.parametrize("batch", [1, 4])
def test_a_lost_cuda_context_costs_one_page_not_the_rest(tmp_path, capsys, batch):
    """Page b's illegal memory access poisons the runner's CUDA context; a fresh runner does the
    pages after it (in a batch: each page alone), and only b fails."""
    colours = {"a": "white", "b": (255, 0, 0), "c": "white", "d": "white"}
    pages, cfg, folder = _mineru_on_a_fake_gpu(tmp_path, colours, batch)
    code, _, err = _run(capsys, pages, tmp_path / "run", cfg)
    assert code == 4, err
    done, failed = _by_page(folder)
    assert done == {"a", "c", "d"} and list(failed) == ["b"] and "illegal memory access" in failed["b"]


def test_a_gpu_that_loses_its_context_on_every_page_stops_after_max_restarts(tmp_path, capsys):
    """A broken GPU is no reason to reload the model once per page until half the pages failed."""
    pages, cfg, folder = _mineru_on_a_fake_gpu(tmp_path, {f"p{i}": (255, 0, 0) for i in range(6)}, 1)
    code, _, err = _run(capsys, pages, tmp_path / "run", cfg)
    assert code == 4, err
    done, failed = _by_page(folder)
    assert done == set() and len(failed) == 6
    lost = sorted(p for p, e in failed.items() if "illegal memory access" in e)
    assert len(lost) == 2  # max_restarts 1: two launches in a row that lost the context, then stop
    assert all("exited 8 (its CUDA context was lost) 2 times in a row" in failed[p] for p in failed if p not in lost)


def test_a_hang_is_not_reported_as_out_of_memory(tmp_path, eight_pages, capsys, caplog, monkeypatch):
    """newsbag kills a runner that stalls; the restart line said the kernel had (``killed by SIGKILL (out of
    memory?)``), which on Slurm sends users to raise --mem for a hang."""
    cfg = write_fake_config(tmp_path / "c.json", {"v": {"mode": "hang", "on": ["page01"]}}, page_timeout_s=2)
    monkeypatch.setattr(logging.getLogger(), "_newsbag_configured", True, raising=False)  # keep caplog's handler
    with caplog.at_level("WARNING", logger="newsbag.orchestrator"):
        code, _, err = _run(capsys, eight_pages, tmp_path / "run", cfg)
    assert code == 4, err
    restart = [m for m in caplog.messages if "restarting for" in m]
    assert restart == ["fake/v: newsbag stopped the runner after no progress for 2s on a page (page_timeout_s); "
                       "restarting for 6 remaining page(s)"], caplog.messages
    assert not [m for m in caplog.messages if "out of memory" in m]


def test_pages_not_run_when_a_source_stopped_run_before_the_failed_ones(tmp_path, eight_pages, capsys):
    """8 pages, 5 fail: the first run stops at the 5th failure with 3 healthy pages not run. A rerun
    retried the 5 failing pages first and stopped again before the 3 (ok 0, failed 8, every time).
    The failing pages crash the runner, so it cannot run ahead to the healthy pages before it is
    stopped (a fast runner whose pages raise may); --retry-failed tries the crashers again."""
    cfg = write_fake_config(tmp_path / "c.json", {"v": {"mode": "segv", "on": [f"page0{i}" for i in range(5)]}})
    run = tmp_path / "run"
    assert _run(capsys, eight_pages, run, cfg, "--max-failed-fraction", "0.5")[0] == 4
    assert done_pages(run) == set()
    assert {k for k, r in failed_records(run).items() if r["error_class"] == "NotRun"} == {"page05", "page06", "page07"}
    for _ in range(2):   # and a Slurm resubmit after it gets no further
        code, _, err = _run(capsys, eight_pages, run, cfg, "--max-failed-fraction", "0.5", "--retry-failed")
        assert code == 4, err
        assert done_pages(run) == {"page05", "page06", "page07"}
        assert set(failed_records(run)) == _first(5)
    assert summary(run)["counts"] == {"ok": 0, "empty": 0, "failed": 5, "skipped": 3}


@pytest.mark.parametrize("body,timeout", [("exit 1", 60), ("sleep 30", 1)])  # dies / hangs before its first event
def test_a_source_that_never_started_is_named_by_status_with_its_error_and_log(tmp_path, eight_pages, capsys, body,
                                                                              timeout):
    """`run` exits 6 with a good line, but a day later `status` showed the source as one nobody ran
    (done 0, failed 0, pending 8), and logs/failures.jsonl had no row."""
    interpreter = tmp_path / "x.sh"
    interpreter.write_text(f"#!/bin/bash\n{body}\n")
    interpreter.chmod(0o755)
    cfg = write_fake_config(tmp_path / "c.json", {"v": {}}, python=str(interpreter), page_timeout_s=timeout)
    run = tmp_path / "run"
    code, _, err = _run(capsys, eight_pages, run, cfg)
    assert code == 6, err
    log_path = run / "logs" / "fake.v.log"
    (source,) = collect_status(run)["sources"]
    assert (source["done"], source["failed"], source["pending"]) == (0, 0, 8)
    stopped = source["not_started"]
    assert stopped["error"].startswith("stage fake variant v: runner ") and "before processing any page" in stopped["error"]
    assert stopped["log"] == str(log_path) and stopped["started"] is False
    code, out, _ = run_cli(capsys, "status", "--run-dir", run)
    assert code == 0
    line = next(line for line in out.splitlines() if "not started" in line)
    assert line.strip().startswith("fake/v: not started") and stopped["error"] in line and str(log_path) in line
    (row,) = [json.loads(line) for line in (run / "logs" / "failures.jsonl").read_text().splitlines()]
    assert row["stage"] == "fake" and row["variant"] == "v" and row["page_id"] is None
    assert (row["status"], row["error_class"], row["error"]) == ("not started", "RunnerError", stopped["error"])
    ok = write_fake_config(tmp_path / "ok.json", {"v": {}})
    assert _run(capsys, eight_pages, run, ok)[0] == 0
    assert collect_status(run)["sources"][0]["not_started"] is None
