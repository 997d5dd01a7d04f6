"""Runner truthfulness against the fake runner: empty pages, flushed reports, set-up failures, refusals."""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

import pytest

from newsbag.config import parse_config
from newsbag.errors import ConfigError, RunnerError

from nbtest import FAKE_RUNNERS, REPO, run_cli, start_newsbag, write_fake_config


def _src(run: Path) -> Path:
    return run / "outputs" / "sources" / "fake" / "v"


def _report(run: Path) -> dict:
    return json.loads((_src(run) / "run_report.json").read_text())


def test_empty_pages_are_not_ok_and_a_high_share_is_flagged(tmp_path, page_dir, capsys):
    cfg = write_fake_config(tmp_path / "c.json", {"v": {"mode": "empty", "on": ["issue1"]}})
    run = tmp_path / "run"
    code, _, err = run_cli(capsys, "run", "--input-dir", page_dir, "--recursive", "--run-dir", run, "--config", cfg)
    assert code == 0, err  # empty is not a failure, but it is not hidden either
    report = _report(run)
    empty = {k: v for k, v in report["pages"].items() if v["status"] == "empty"}
    assert len(empty) == 2 and report["counts"]["empty"] == 2 and report["counts"]["ok"] == 3
    assert all("I cannot read this page" in v["reason"] for v in empty.values())
    assert report["empty_share"] == 0.4 and "2 of 5 answered pages empty" in report["flags"][0]
    summary = json.loads((run / "reports" / "run_all.json").read_text())["sources"][0]
    assert summary["counts"]["empty"] == 2 and summary["empty_share"] == 0.4 and summary["flags"]
    code, out, _ = run_cli(capsys, "status", "--run-dir", run)
    assert "empty     2 (40%)" in out and "FLAGGED" in out and "I cannot read this page" in out
    code, out, _ = run_cli(capsys, "status", "--run-dir", run, "--json")
    row = json.loads(out)["sources"][0]
    assert (row["done"], row["empty"], row["empty_share"], row["flagged"]) == (5, 2, 0.4, True)
    # rerun: the empty pages are finished pages (same answer again), not retried forever
    code, _, _ = run_cli(capsys, "run", "--run-dir", run, "--config", cfg)
    assert code == 0 and _report(run)["page_totals"]["empty"] == 2


def test_a_low_empty_share_is_counted_but_not_flagged(tmp_path, page_dir, capsys):
    cfg = write_fake_config(tmp_path / "c.json", {"v": {"mode": "empty", "on": ["issue2__p3"]}})
    run = tmp_path / "run"
    code, _, err = run_cli(capsys, "run", "--input-dir", page_dir, "--recursive", "--run-dir", run, "--config", cfg)
    assert code == 0
    assert _report(run)["counts"]["empty"] == 1 and _report(run)["flags"] == []


def test_report_is_on_disk_while_the_runner_works_and_after_a_kill(tmp_path, page_dir):
    cfg = write_fake_config(tmp_path / "c.json", {"v": {"mode": "hang", "on": ["issue2__p3"]}})
    run = tmp_path / "run"
    proc = start_newsbag("run", "--input-dir", page_dir, "--recursive", "--run-dir", run, "--config", cfg)
    deadline = time.monotonic() + 60
    report = {}
    while time.monotonic() < deadline:
        try:
            report = _report(run)
        except (OSError, ValueError):
            report = {}
        if report.get("counts", {}).get("ok") == 4:
            break
        time.sleep(0.3)
    os.killpg(proc.pid, signal.SIGKILL)  # newsbag and its runner at once: nobody left to write the end
    proc.wait()
    report = _report(run)
    on_disk = {p.stem for p in _src(run).glob("*.json") if not p.name.startswith("run_report")}
    assert report["state"] == "running" and report["counts"]["ok"] == 4
    assert {k for k, v in report["pages"].items() if v["status"] == "ok"} == on_disk



def _gone(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] in ("Z", "X")
    except (OSError, IndexError):
        return True


def test_status_says_a_runner_killed_with_newsbag_died_and_one_at_work_is_running(tmp_path, page_dir, capsys):
    """kill -9 of newsbag (OOM killer, a node reboot, Slurm's SIGKILL) takes its runner along:
    neither can write, so the report keeps ``running``. status must not pass that on as a
    runner at work: a report whose pid is gone on this host is a runner that died."""
    import socket

    gate, pidfile = tmp_path / "gate", tmp_path / "runner.pid"
    cfg = write_fake_config(tmp_path / "c.json", {"v": {"mode": "wait", "on": ["issue2__p3"]}},
                            env={"FAKE_GATE": str(gate), "FAKE_PIDFILE": str(pidfile)})
    run = tmp_path / "run"
    proc = start_newsbag("run", "--input-dir", page_dir, "--recursive", "--run-dir", run, "--config", cfg)
    deadline = time.monotonic() + 60
    while not Path(f"{gate}.reached").exists() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    pid, host = int(pidfile.read_text()), socket.gethostname()
    code, out, _ = run_cli(capsys, "status", "--run-dir", run, "--json")
    (runner,) = json.loads(out)["sources"][0]["runners"]
    assert (runner["state"], runner["pid"], runner["host"], runner["report"]) == ("running", pid, host, "run_report.json")
    os.killpg(proc.pid, signal.SIGKILL)  # newsbag at once; its runner follows (PR_SET_PDEATHSIG), unheard
    proc.wait()
    deadline = time.monotonic() + 30
    while not _gone(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _gone(pid) and _report(run)["state"] == "running"  # the leftover: nobody wrote the end
    code, out, _ = run_cli(capsys, "status", "--run-dir", run, "--json")
    (runner,) = json.loads(out)["sources"][0]["runners"]
    assert (runner["state"], runner["pid"], runner["host"]) == ("died", pid, host)
    code, out, _ = run_cli(capsys, "status", "--run-dir", run)
    assert code == 0
    assert f"runner pid {pid} on {host} died without finishing (run_report.json" in out, out
    assert "running" not in out, out


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])  # Ctrl-C; scancel, kill
def test_report_of_a_runner_stopped_with_newsbag_says_killed_not_running(tmp_path, page_dir, sig):
    """newsbag sees its runner die (it stops it on the way out): the report must not say
    ``running`` until some later run; the pages finished before stay recorded."""
    gate = tmp_path / "gate"
    cfg = write_fake_config(tmp_path / "c.json", {"v": {"mode": "wait", "on": ["issue2__p3"]}},
                            env={"FAKE_GATE": str(gate)})
    run = tmp_path / "run"
    proc = start_newsbag("run", "--input-dir", page_dir, "--recursive", "--run-dir", run, "--config", cfg)
    deadline = time.monotonic() + 60
    while not Path(f"{gate}.reached").exists() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert proc.poll() is None and _report(run)["state"] == "running"
    os.kill(proc.pid, sig)
    proc.wait(60)
    report = _report(run)
    assert report["state"] == "killed", report
    assert report["killed_by"] == "newsbag was interrupted (Ctrl-C or SIGTERM) and stopped it"
    assert report["killed"] >= report["started"]
    on_disk = {p.stem for p in _src(run).glob("*.json") if not p.name.startswith("run_report")}
    assert {k for k, v in report["pages"].items() if v["status"] == "ok"} <= on_disk


def test_setup_failure_keeps_its_own_message_and_is_not_missing_weights(tmp_path, page_dir, capsys):
    cfg = write_fake_config(tmp_path / "c.json", {"v": {"mode": "setupfail"}})
    code, _, err = run_cli(capsys, "run", "--input-dir", page_dir, "--recursive", "--run-dir", tmp_path / "run",
                           "--config", cfg)
    assert code == RunnerError.exit_code  # a source that never started, not EnvError (3): nothing to pre-stage
    assert "model setup failed: RuntimeError: CUDA error: initialization error" in err
    assert "missing dependency" not in err.lower() and "pre-stage" not in err
    assert not _src(tmp_path / "run").exists()


@pytest.mark.parametrize("variant, kwargs, code", [
    ({"mode": "missing"}, {}, 3),
    ({"mode": "nogpu"}, {"device": "gpu", "allow_cpu_fallback": False}, 5),
])
def test_refused_member_leaves_nothing_fusion_could_take_for_output(tmp_path, page_dir, capsys, variant, kwargs, code):
    cfg = write_fake_config(tmp_path / "c.json", {"v": variant}, **kwargs)
    got, _, _ = run_cli(capsys, "run", "--input-dir", page_dir, "--recursive", "--run-dir", tmp_path / "run",
                        "--config", cfg)
    assert got == code
    assert not (tmp_path / "run" / "outputs" / "sources" / "fake").exists()


def _raw_config(tmp_path, runners: Path, **stage) -> dict:
    return {"version": 1, "runners_dir": str(runners),
            "stages": [{"name": "fake", "family": "fake", "variants": {"v": {}}, **stage}]}


def _copy_fake(tmp_path, mutate) -> Path:
    root = tmp_path / "runners"
    root.mkdir()
    (root / "fake.py").write_text((FAKE_RUNNERS / "fake.py").read_text())
    spec = json.loads((FAKE_RUNNERS / "fake.tool.json").read_text())
    mutate(spec)
    (root / "fake.tool.json").write_text(json.dumps(spec))
    return root


@pytest.mark.parametrize("mutate, stage, message", [
    # a new family without a label table would turn every label into "unknown": refused
    (lambda s: s.pop("labels"), {}, "no label table"),
    (lambda s: s.update(labels={"text": "body"}), {}, "'body', which is not a canonical label"),
    (lambda s: s["parameters"].update(dtype={"type": "string", "default": "auto", "enum": ["auto", "float16"]}),
     {"variants": {"v": {"dtype": "float8"}}}, "variant 'v': dtype must be one of auto, float16, got 'float8'"),
    (lambda s: None, {"max_empty_share": 2}, "max_empty_share must be a number in [0, 1], got 2"),
    # the output revision is fingerprinted into every page: a whole number, or absent (0)
    (lambda s: s.update(revision="2"), {}, 'fake.tool.json: revision must be a whole number >= 0 '
                                           '(bump it when the runner\'s output changes for the same inputs), got "2"'),
    (lambda s: s.update(revision=1.5), {}, "fake.tool.json: revision must be a whole number >= 0"),
    (lambda s: s.update(revision=-1), {}, "got -1"),
    (lambda s: s.update(revision=True), {}, "got true"),
])
def test_config_load_checks_tool_spec(tmp_path, mutate, stage, message):
    root = _copy_fake(tmp_path, mutate)
    with pytest.raises(ConfigError, match=None) as exc:
        parse_config(_raw_config(tmp_path, root, **stage))
    assert message in str(exc.value)


@pytest.mark.parametrize("spec", sorted((REPO / "runners").glob("*.tool.json")), ids=lambda p: p.name)
def test_every_shipped_runner_declares_its_output_revision(spec):
    assert type(json.loads(spec.read_text()).get("revision")) is int


@pytest.mark.parametrize("revision, expected", [(None, 0), (0, 0), (3, 3)])  # None: a tool.json without one
def test_the_family_revision_comes_from_its_tool_json(tmp_path, revision, expected):
    root = _copy_fake(tmp_path, lambda s: s.update(revision=revision) if revision is not None else s.pop("revision", None))
    (stage,) = parse_config(_raw_config(tmp_path, root)).stages
    assert stage.revision == expected


def test_label_table_comes_from_the_family_tool_json(tmp_path):
    root = _copy_fake(tmp_path, lambda s: s.update(labels={"text": "text", "mystery": "headline"}))
    (stage,) = parse_config(_raw_config(tmp_path, root)).stages
    assert dict(stage.label_map) == {"text": "text", "mystery": "headline"} and stage.max_empty_share == 0.2
