"""newsbag.slurm: the job ledger, job states from a fake squeue/sacct on PATH, stage and env checks."""

from __future__ import annotations

import json
import stat

import pytest

from newsbag.config import parse_config
from newsbag.errors import ConfigError
from nbtest import run_cli

from newsbag.slurm.jobs import describe_jobs, format_job_lines, job_states, read_jobs, record_job
from newsbag.slurm.limits import check_envs
from newsbag.slurm.plan import select_stages


def _fake_tool(bin_dir, name, stdout, rc=0):
    """A fake Slurm client that logs its argv and prints canned output."""
    path = bin_dir / name
    path.write_text("\n".join([
        "#!/bin/sh",
        f"printf '%s\\n' \"$*\" >> '{bin_dir}/{name}.argv'",
        "/bin/cat <<'EOF'",
        stdout.rstrip("\n"),
        "EOF",
        f"exit {rc}",
    ]) + "\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


@pytest.fixture
def fake_bin(tmp_path, monkeypatch):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    monkeypatch.setenv("PATH", str(bin_dir))  # only the fakes: no real Slurm tools leak in
    return bin_dir


SQUEUE = """\
101|101|N/A|COMPLETED|None
102_0|102|0|COMPLETED|None
102_1|102|1|FAILED|NonZeroExitCode
102_2|102|2|COMPLETED|None
103|103|N/A|PENDING|DependencyNeverSatisfied
104_0|104|0|RUNNING|None
104_1|104|1|PENDING|Resources
999|999|N/A|RUNNING|None
"""


def test_job_states_from_squeue(fake_bin):
    _fake_tool(fake_bin, "squeue", SQUEUE)
    states = job_states(["101", "102", "103", "104"])
    assert states == {
        "101": "COMPLETED",                                  # plain job
        "102_0": "COMPLETED", "102_1": "FAILED", "102_2": "COMPLETED",
        "102": "FAILED 1/3, COMPLETED 2/3",                  # array summary: failures first
        "103": "PENDING (DependencyNeverSatisfied)",          # the reason is what the user needs
        "104_0": "RUNNING", "104_1": "PENDING (Resources)",
        "104": "RUNNING 1/2, PENDING (Resources) 1/2",
    }                                                         # 999 was not asked for
    assert (fake_bin / "squeue.argv").read_text().split() == [
        "-h", "-t", "all", "-r", "-j", "101,102,103,104", "-o", "%i|%F|%K|%T|%r"]


def test_job_states_falls_back_to_sacct_for_jobs_squeue_forgot(fake_bin):
    _fake_tool(fake_bin, "squeue", "101|101|N/A|RUNNING|None")
    _fake_tool(fake_bin, "sacct", "102_0|COMPLETED|None\n102_1|COMPLETED|None\n103|CANCELLED by 0|None")
    assert job_states(["101", "102", "103"]) == {
        "101": "RUNNING", "102_0": "COMPLETED", "102_1": "COMPLETED", "102": "COMPLETED", "103": "CANCELLED"}
    assert (fake_bin / "sacct.argv").read_text().split()[:6] == ["-n", "-P", "-X", "-j", "102,103", "-o"]


@pytest.mark.parametrize("tools", [
    {},                                                       # no Slurm on this machine
    {"squeue": ("", 1), "sacct": ("Slurm accounting storage is disabled", 1)},  # purged ids, no accounting
])
def test_job_states_empty_when_slurm_knows_nothing(fake_bin, tools):
    for name, (out, rc) in tools.items():
        _fake_tool(fake_bin, name, out, rc)
    assert job_states(["5", "6"]) == {}


def test_job_states_no_ids_runs_nothing(fake_bin):
    _fake_tool(fake_bin, "squeue", SQUEUE)
    assert job_states([]) == {}
    assert not (fake_bin / "squeue.argv").exists()


def test_ledger_round_trip_skips_torn_lines(tmp_path):
    assert read_jobs(tmp_path) == []
    record_job(tmp_path, {"job_id": "7", "kind": "infer-l40s", "partition": "l40s_public"})
    with open(tmp_path / "slurm" / "jobs.jsonl", "a") as fh:
        fh.write('{"job_id": "8", "kin')                     # a submit killed mid-write
    record_job(tmp_path, {"job_id": "9", "kind": "fuse-review", "dependency": "afterok:7"})
    assert [j["job_id"] for j in read_jobs(tmp_path)] == ["7", "9"]


def test_describe_and_format(tmp_path, fake_bin):
    _fake_tool(fake_bin, "squeue", SQUEUE)
    record_job(tmp_path, {"job_id": "102", "kind": "infer-l40s", "partition": "l40s_public",
                          "gres": "gpu:l40s:1", "stages": "dell", "array": "0-2", "dependency": ""})
    record_job(tmp_path, {"job_id": "103", "kind": "fuse-review", "partition": "cs", "gres": "",
                          "stages": "fusion,review", "array": "", "dependency": "afterok:102"})
    record_job(tmp_path, {"job_id": "55", "kind": "infer-h200", "partition": "h200_public"})
    rows = describe_jobs(tmp_path)
    assert [r["state"] for r in rows] == ["FAILED 1/3, COMPLETED 2/3", "PENDING (DependencyNeverSatisfied)", "unknown"]
    assert format_job_lines(rows) == [
        "job 102 infer-l40s: FAILED 1/3, COMPLETED 2/3 [l40s_public gpu:l40s:1 array 0-2] stages dell",
        "job 103 fuse-review: PENDING (DependencyNeverSatisfied) [cs] stages fusion,review after afterok:102",
        "job 55 infer-h200: unknown [h200_public] stages ",
    ]


def _config(tmp_path, python):
    return parse_config({
        "envs": {"paddle": {"python": str(python)}},
        "stages": [
            {"name": "paddle_layout", "family": "paddle_layout", "env": "paddle", "variants": {"cdla": {}}},
            {"name": "mineru", "family": "tesseract", "variants": {"p": {"level": "paragraph"}}},
            {"name": "fusion", "kind": "fusion"},
            {"name": "review", "kind": "review"},
        ]}, str(tmp_path / "c.json"))


@pytest.mark.parametrize("csv, expected", [
    ("", [("paddle_layout", "model"), ("mineru", "model"), ("fusion", "fusion"), ("review", "review")]),
    ("review,mineru", [("mineru", "model"), ("review", "review")]),   # config order, not argument order
    (" fusion , ", [("fusion", "fusion")]),                           # blanks ignored
])
def test_select_stages(tmp_path, csv, expected):
    assert select_stages(_config(tmp_path, "/usr/bin/env"), csv) == expected


def test_select_stages_refuses_unknown(tmp_path):
    with pytest.raises(ConfigError, match=r"unknown stage\(s\) dell \(this config has: paddle_layout, mineru"):
        select_stages(_config(tmp_path, "/usr/bin/env"), "dell,mineru")


def test_check_envs_names_the_missing_interpreter(tmp_path):
    missing = tmp_path / "envs" / "paddle" / "bin" / "python"
    config = _config(tmp_path, missing)
    assert check_envs(config, ["mineru", "fusion"]) == []     # default env = this interpreter
    (msg,) = check_envs(config, [])
    assert msg.startswith(f"stage paddle_layout: env 'paddle' interpreter {missing} is missing")
    assert "envs.paddle.python" in msg


def test_main_stages_and_record(tmp_path, capsys):
    cfg = tmp_path / "c.json"
    cfg.write_text(json.dumps({"stages": [{"name": "dell", "family": "text_lines", "variants": {"l": {}}},
                                          {"name": "fusion", "kind": "fusion"}]}))
    assert run_cli(capsys, "slurm", "stages", "--config", cfg, "--stages", "fusion") == (0, "fusion\tfusion\n", "")
    code, _, err = run_cli(capsys, "slurm", "stages", "--config", cfg, "--stages", "nope")
    assert code == 2 and err.startswith("newsbag: error: unknown stage(s) nope")
    assert run_cli(capsys, "slurm", "record", "--run-dir", tmp_path, "--job-id", "12", "--kind", "fuse-review",
                   "--partition", "cs", "--dependency", "afterok:10:11")[0] == 0
    (job,) = read_jobs(tmp_path)
    assert {k: job[k] for k in ("job_id", "kind", "partition", "gres", "dependency")} == {
        "job_id": "12", "kind": "fuse-review", "partition": "cs", "gres": "", "dependency": "afterok:10:11"}


def test_cli_check_env_and_jobs(tmp_path, capsys, monkeypatch):
    missing = tmp_path / "envs" / "paddle" / "bin" / "python"
    cfg = tmp_path / "c.json"
    cfg.write_text(json.dumps({"envs": {"paddle": {"python": str(missing)}}, "stages": [
        {"name": "paddle_layout", "family": "paddle_layout", "env": "paddle", "variants": {"v3": {}}},
        {"name": "fusion", "kind": "fusion"}]}))
    code, _, err = run_cli(capsys, "slurm", "check-env", "--config", cfg)
    assert code == 3 and err.startswith(f"newsbag env check: stage paddle_layout: env 'paddle' interpreter {missing}")
    assert run_cli(capsys, "slurm", "check-env", "--config", cfg, "--stages", "fusion")[0] == 0
    monkeypatch.setenv("PATH", str(tmp_path / "nobin"))          # no squeue/sacct: states are unknown
    assert run_cli(capsys, "slurm", "jobs", "--run-dir", tmp_path) == (0, "no Slurm jobs recorded\n", "")
    record_job(tmp_path, {"job_id": "7", "kind": "gpu-l40s", "partition": "l40s_public"})
    code, out, _ = run_cli(capsys, "slurm", "jobs", "--run-dir", tmp_path, "--json")
    assert code == 0 and [r["job_id"] for r in json.loads(out)] == ["7"]


@pytest.mark.parametrize("bad", ["FAILED", "TIMEOUT", "OUT_OF_MEMORY", "CANCELLED", "NODE_FAIL"])
def test_status_names_the_failed_array_task_and_its_log_whatever_killed_it(tmp_path, capsys, fake_bin, bad):
    # Arrays at scale lose tasks to the time limit, memory and scancel as often as to exit codes.
    _fake_tool(fake_bin, "squeue", f"40_0|40|0|COMPLETED|None\n40_1|40|1|{bad}|None\n"
                                   "41|41|N/A|PENDING|DependencyNeverSatisfied\n")
    logs = tmp_path / "logs" / "slurm"
    logs.mkdir(parents=True)
    (logs / "newsbag-infer-l40s-40_1.out").write_text(
        "newsbag job 40_1 task 1/2\nslurmstepd: error: *** JOB 42 ON vm CANCELLED AT t DUE TO TIME LIMIT ***\n")
    record_job(tmp_path, {"job_id": "40", "kind": "infer-l40s", "partition": "l40s_public", "stages": "dell",
                          "array": "0-1", "log": str(logs / "%x-%A_%a.out")})
    record_job(tmp_path, {"job_id": "41", "kind": "fuse-review", "partition": "cs", "stages": "fusion",
                          "dependency": "afterok:40", "log": str(logs / "%x-%j.out")})
    code, out, _ = run_cli(capsys, "status", "--run-dir", tmp_path)
    assert code == 0
    assert f"  job 40_1 infer-l40s {bad}: log {logs}/newsbag-infer-l40s-40_1.out\n" in out
    assert "      last error: slurmstepd: error: *** JOB 42 ON vm CANCELLED AT t DUE TO TIME LIMIT ***\n" in out


def test_job_states_keep_why_slurm_cancelled_a_job(fake_bin):
    # --kill-on-invalid-dep=yes: Slurm cancels a job whose dependency failed; a bare CANCELLED would read like scancel.
    _fake_tool(fake_bin, "squeue", "201|201|N/A|CANCELLED|DependencyNeverSatisfied\n202|202|N/A|CANCELLED|None")
    _fake_tool(fake_bin, "sacct", "203|CANCELLED|DependencyNeverSatisfied")
    assert job_states(["201", "202", "203"]) == {
        "201": "CANCELLED (DependencyNeverSatisfied)", "202": "CANCELLED", "203": "CANCELLED (DependencyNeverSatisfied)"}


def test_resubmit_right_after_a_failure_cancels_the_doomed_fusion_job(tmp_path, fake_bin, capsys):
    # The seconds before Slurm re-evaluates the dependency: the inference job already FAILED (sacct),
    # the fusion job still reads PENDING (Dependency). It can never run: cancel it, do not refuse the resubmit.
    _fake_tool(fake_bin, "squeue", "")
    _fake_tool(fake_bin, "sacct", "50|FAILED|NonZeroExitCode\n51|COMPLETED|None\n52|PENDING|Dependency")
    _fake_tool(fake_bin, "scancel", "")
    record_job(tmp_path, {"job_id": "50", "kind": "infer-h200", "stages": "dell", "dependency": ""})
    record_job(tmp_path, {"job_id": "51", "kind": "infer-l40s", "stages": "paddle_layout", "dependency": ""})
    record_job(tmp_path, {"job_id": "52", "kind": "fuse-review", "stages": "fusion,review", "dependency": "afterok:50:51"})
    code, out, err = run_cli(capsys, "slurm", "stale", "--run-dir", tmp_path, "--cancel")
    assert (code, err) == (0, "")
    assert out == "cancelled stale job 52 (fuse-review, stages fusion,review): it would never start, " \
                  "job 50 infer-h200 FAILED\n"
    assert (fake_bin / "scancel.argv").read_text() == "52\n"


def test_resubmit_says_why_slurm_cancelled_the_fusion_job(tmp_path, fake_bin, capsys):
    _fake_tool(fake_bin, "squeue", "60|60|N/A|TIMEOUT|TimeLimit\n61|61|N/A|CANCELLED|DependencyNeverSatisfied")
    _fake_tool(fake_bin, "scancel", "")
    record_job(tmp_path, {"job_id": "60", "kind": "infer-l40s", "stages": "dell", "dependency": ""})
    record_job(tmp_path, {"job_id": "61", "kind": "fuse-review", "stages": "fusion", "dependency": "afterok:60"})
    code, out, err = run_cli(capsys, "slurm", "stale", "--run-dir", tmp_path, "--cancel")
    assert (code, out, err) == (0, "job 61 fuse-review did not run (cancelled): job 60 infer-l40s TIMEOUT\n", "")
    assert not (fake_bin / "scancel.argv").exists()


def _fake_squeue_that_forgot(bin_dir, stderr="slurm_load_jobs error: Invalid job id specified"):
    """squeue once the jobs are older than MinJobAge: real squeue exits 1 with this line when it
    knows none of the ids; sacct without slurmdbd answers nothing."""
    path = bin_dir / "squeue"
    path.write_text(f"#!/bin/sh\necho '{stderr}' >&2\nexit 1\n")
    path.chmod(0o755)
    _fake_tool(bin_dir, "sacct", "Slurm accounting storage is disabled", rc=1)


def _forgotten_run(tmp_path):
    """A run whose array task 40_1 exited 4, task 40_0 0, and whose fusion job 41 never started."""
    logs = tmp_path / "logs" / "slurm"
    logs.mkdir(parents=True)
    exits = tmp_path / "slurm" / "exits"
    exits.mkdir(parents=True)
    for task, rc in (("40_0", 0), ("40_1", 4)):
        (logs / f"newsbag-infer-l40s-{task}.out").write_text(f"newsbag job {task}\nnewsbag job {task}: newsbag run exited {rc}\n")
        (exits / f"{task}.json").write_text(json.dumps({"job": task, "exit_code": rc}))
    record_job(tmp_path, {"job_id": "40", "kind": "infer-l40s", "partition": "l40s_public", "stages": "dell",
                          "array": "0-1", "log": str(logs / "%x-%A_%a.out")})
    record_job(tmp_path, {"job_id": "41", "kind": "fuse-review", "partition": "cs", "stages": "fusion",
                          "dependency": "afterok:40", "log": str(logs / "%x-%j.out")})
    return logs


def test_status_without_accounting_reads_the_jobs_own_exit_records(tmp_path, capsys, fake_bin):
    # No slurmdbd: once squeue forgot the jobs (MinJobAge), sacct cannot say how they ended; each job
    # wrote RUN/slurm/exits/<job>.json as it ended, and a job with no log never started.
    logs = _forgotten_run(tmp_path)
    _fake_squeue_that_forgot(fake_bin)
    code, out, _ = run_cli(capsys, "status", "--run-dir", tmp_path)
    assert code == 0
    assert "  job 40 infer-l40s: FAILED (exit 4) 1/2, COMPLETED 1/2 [l40s_public array 0-1] stages dell\n" in out
    assert "  job 41 fuse-review: CANCELLED (never started) [cs] stages fusion after afterok:40\n" in out
    assert f"  job 40_1 infer-l40s FAILED: log {logs}/newsbag-infer-l40s-40_1.out\n" in out
    assert "      last error: newsbag job 40_1: newsbag run exited 4\n" in out
    assert "  job 41 fuse-review did not run (cancelled): job 40_1 infer-l40s FAILED\n" in out


def test_a_job_killed_before_it_could_record_its_exit_is_not_taken_for_a_success(tmp_path, fake_bin):
    # SIGKILL after the time limit's grace period, the OOM killer on the batch step, a node failure.
    logs = _forgotten_run(tmp_path)
    (tmp_path / "slurm" / "exits" / "40_0.json").unlink()
    _fake_squeue_that_forgot(fake_bin)
    rows = describe_jobs(tmp_path)
    assert rows[0]["state"] == "FAILED (exit 4) 1/2, FAILED (no exit record: killed?) 1/2"
    assert (logs / "newsbag-infer-l40s-40_0.out").exists()


def test_an_unreachable_slurm_is_not_read_as_forgotten_jobs(tmp_path, fake_bin):
    # The controller is down: the records say nothing of jobs still queued, so nothing is claimed.
    _forgotten_run(tmp_path)
    _fake_squeue_that_forgot(fake_bin, stderr="slurm_load_jobs error: Unable to contact slurm controller (connect failure)")
    assert [r["state"] for r in describe_jobs(tmp_path)] == ["unknown", "unknown"]


def test_a_task_that_failed_only_pages_says_how_to_fuse_the_rest(tmp_path, capsys, fake_bin):
    # Exit 4 (pages failed, the rest done) cancels fusion like a crash does; a resubmit alone fails the
    # same pages again (a page that crashed the runner is not even retried), so fusion never runs.
    # The job's exit record tells exit 4 apart; status names the setting that lets fusion go on.
    _forgotten_run(tmp_path)
    _fake_tool(fake_bin, "squeue", "40_0|40|0|COMPLETED|None\n40_1|40|1|FAILED|NonZeroExitCode\n"
                                   "41|41|N/A|CANCELLED|DependencyNeverSatisfied\n")
    code, out, _ = run_cli(capsys, "status", "--run-dir", tmp_path)
    assert code == 0
    assert "      exit 4: only some of its pages failed (listed above), the others are done\n" in out
    assert (f"  to fuse the pages that did not fail (the failed ones stay listed): NEWSBAG_ALLOW_PARTIAL=1 "
            f"bash torch/slurm/submit_newsbag_from_dir.sh --run-dir {tmp_path}\n") in out
    (tmp_path / "slurm" / "exits" / "40_1.json").write_text(json.dumps({"job": "40_1", "exit_code": 6}))
    out = run_cli(capsys, "status", "--run-dir", tmp_path)[1]
    assert "NEWSBAG_ALLOW_PARTIAL" not in out and "exit 4" not in out   # a source that never started: no such way


@pytest.mark.parametrize("state", ["COMPLETED", "FAILED"])  # with and without NEWSBAG_ALLOW_PARTIAL=1
def test_status_does_not_ask_to_resubmit_for_pages_a_resubmit_would_not_retry(tmp_path, capsys, fake_bin, state):
    # The job finished (NEWSBAG_ALLOW_PARTIAL=1) with one page that crashed the runner: a resubmit
    # plans no job for it, so "resubmit to retry" sent the user round in circles.
    from nbtest import write_fake_config, write_image
    from newsbag.errors import PartialFailure
    from newsbag.pages import build_pages
    from newsbag.pipeline import RunOptions, run_pipeline

    for k in range(2):
        write_image(tmp_path / "in" / f"p{k}.png")
    run = tmp_path / "run"
    build_pages(run, [tmp_path / "in"], None, False, None)
    cfg = write_fake_config(tmp_path / "c.json", {"v": {"mode": "segv", "on": ["p1"]}})
    with pytest.raises(PartialFailure):
        run_pipeline(RunOptions(run_dir=run, config_path=cfg, stages=("fake",)))
    _fake_tool(fake_bin, "squeue", f"70|70|N/A|{state}|None")
    record_job(run, {"job_id": "70", "kind": "infer-l40s", "partition": "l40s_public", "stages": "fake"})
    out = run_cli(capsys, "status", "--run-dir", run)[1]
    assert "resubmit to retry" not in out and "see below" not in out
    # a cluster user resubmits through the script: the hint names its --retry-failed, not a login-node run
    assert (f"(job 70 infer-l40s {state}; a page that crashed the runner is not retried by a resubmit unless "
            f"asked: bash torch/slurm/submit_newsbag_from_dir.sh --run-dir {run} --retry-failed)") in out


def test_job_lines_escape_control_characters(tmp_path, capsys, monkeypatch):
    # a hand-edited or torn ledger row must not retitle or clear the operator's terminal
    monkeypatch.setenv("PATH", str(tmp_path / "nobin"))
    record_job(tmp_path, {"job_id": "8", "kind": "fuse-review", "partition": "cs",
                          "stages": "fusion\x1b]0;owned\x07,review\nforged line"})
    code, out, _ = run_cli(capsys, "slurm", "jobs", "--run-dir", tmp_path)
    assert code == 0 and "\x1b" not in out and "\x07" not in out
    assert out == "job 8 fuse-review: unknown [cs] stages fusion\\x1b]0;owned\\x07,review\\x0aforged line\n"
