"""Slurm submission logic without a scheduler: partition rules, limits, settings, the way out, small fixes."""

from __future__ import annotations

import json
import logging

import pytest

from newsbag.config import parse_config
from newsbag.errors import ConfigError
from newsbag.slurm.canary import make_canary
from newsbag.slurm.jobs import expand_log_path
from newsbag.slurm.limits import Request, check_limits
from newsbag.slurm.plan import pending_stages, plan_jobs
from newsbag.slurm.queue import live_and_stale_jobs, unrun_lines, why_never_runs
from newsbag.slurm.recovery import last_error_line, way_out
from newsbag.slurm.settings import load_settings, save_settings
from nbtest import run_cli, write_fake_config, write_image


def _torch_like(tmp_path, mineru_cuda=True):
    """Stage names and families of the Torch bag, all runnable here (family fake)."""
    def model(name, family, **params):
        return {"name": name, "family": family, "variants": {"v": params}}
    raw = {"runners_dir": str(tmp_path / "runners"), "stages": [
        model("paddle_layout", "paddle_layout"), model("paddle_vl15", "paddle_vl15"), model("dell", "dell"),
        model("mineru", "mineru", **({"require_cuda": True} if mineru_cuda else {})),
        {"name": "fusion", "kind": "fusion"}, {"name": "review", "kind": "review"}]}
    runners = tmp_path / "runners"
    runners.mkdir(exist_ok=True)
    for fam in ("paddle_layout", "paddle_vl15", "dell", "mineru"):
        (runners / f"{fam}.py").write_text("")
        params = {"require_cuda": {"type": "boolean", "default": False}} if fam == "mineru" else {}
        (runners / f"{fam}.tool.json").write_text(json.dumps({"parameters": params, "labels": {"text": "text"}}))
    return parse_config(raw, str(tmp_path / "torch.json"))


def _table(jobs):
    return [(j.kind, j.slot, ",".join(j.stages), j.device) for j in jobs]


@pytest.mark.parametrize("mode, stages, expected, note", [
    # split: Paddle on L40S, Dell and MinerU on H200, builtins on the CPU partition
    ("split", [], [("infer-l40s", "l40s", "paddle_layout,paddle_vl15", ""), ("infer-h200", "h200", "dell,mineru", ""),
                   ("fuse-review", "post", "fusion,review", "")], None),
    ("l40s", ["dell", "review"], [("infer-l40s", "l40s", "dell", ""), ("fuse-review", "post", "review", "")], None),
    ("h200", ["dell", "mineru", "fusion"], [("infer-h200", "h200", "dell,mineru", ""),
                                            ("fuse-review", "post", "fusion", "")], None),
    # builtins alone: never a GPU job, whatever the mode
    ("h200", ["fusion", "review"], [("fuse-review", "post", "fusion,review", "")], None),
])
def test_plan_modes(tmp_path, mode, stages, expected, note):
    jobs, notes = plan_jobs(_torch_like(tmp_path), stages, mode)
    assert _table(jobs) == expected
    assert all(j.script == "newsbag_fuse_review_cs.sbatch" for j in jobs if j.kind == "fuse-review")


def test_h200_refuses_paddle_with_the_reason_and_the_fix(tmp_path):
    with pytest.raises(ConfigError) as exc:
        plan_jobs(_torch_like(tmp_path), ["paddle_layout", "dell", "fusion"], "h200")
    assert str(exc.value) == (
        "--gpu h200 would run the Paddle stage(s) paddle_layout on H200, where Paddle has no CUDA kernels for the "
        "GPU (kernel image mismatch); use --gpu split (Paddle on L40S, the rest on H200) or --gpu l40s, "
        "or leave them out with --stages dell,fusion")


def test_split_routes_a_paddle_stage_listed_for_h200_to_l40s(tmp_path):
    jobs, notes = plan_jobs(_torch_like(tmp_path), [], "split", split_h200=("paddle_vl15", "mineru"))
    assert _table(jobs)[:2] == [("infer-l40s", "l40s", "paddle_layout,paddle_vl15,dell", ""),
                                ("infer-h200", "h200", "mineru", "")]
    assert notes == ["Paddle stage(s) paddle_vl15 go to L40S, not H200 (Paddle has no H200 kernels)"]


def test_cpu_mode_runs_model_stages_with_device_cpu_and_refuses_cuda_only_ones(tmp_path):
    with pytest.raises(ConfigError, match=r"--gpu cpu: stage\(s\) mineru require CUDA \(require_cuda in .*torch.json\) "
                                          r"and cannot run on the CPU partition; leave them out with --stages "
                                          r"paddle_layout,paddle_vl15,dell,fusion,review"):
        plan_jobs(_torch_like(tmp_path), [], "cpu")
    jobs, notes = plan_jobs(_torch_like(tmp_path, mineru_cuda=False), [], "cpu")
    assert _table(jobs) == [("infer-cpu", "cpu", "paddle_layout,paddle_vl15,dell,mineru", "cpu"),
                            ("fuse-review", "post", "fusion,review", "")]


CLUSTER = {
    "cs": {"max_time_min": 2880.0, "max_mem_mb": None, "max_cpus_node": None, "state": "UP",
           "nodes": [{"name": "n1", "cpus": 2, "mem_mb": 22899.0, "gres": {}}]},
    "l40s_public": {"max_time_min": None, "max_mem_mb": 16384.0, "max_cpus_node": None, "state": "UP",
                    "nodes": [{"name": "n1", "cpus": 2, "mem_mb": 22899.0, "gres": {"gpu": 2, "gpu:l40s": 1}}]},
}


@pytest.mark.parametrize("request_, problem", [
    (Request("infer-l40s", "L40S", "l40s_public", "gpu:l40s:1", 2, "16G", "12:00:00"), None),   # fits exactly
    (Request("fuse-review", "CPU", "cs", "", 8, "32G", "3-00:00:00"),
     "fuse-review job (-p cs --cpus-per-task=8 --mem=32G --time=3-00:00:00) can never start on this cluster: "
     "time 3-00:00:00 exceeds the partition's MaxTime of 2880 min (set CPU_TIME to at most 2880); "
     "8 CPUs asked but its largest node has 2 (set CPU_CPUS=2 or less); "
     "32G memory asked but its largest node has 22G (set CPU_MEM=22G or less)"),
    # MaxMemPerNode caps the node's memory
    (Request("infer-l40s", "L40S", "l40s_public", "gpu:l40s:1", 1, "20G", "10"),
     "infer-l40s job (-p l40s_public --cpus-per-task=1 --mem=20G --time=10 --gres=gpu:l40s:1) can never start on "
     "this cluster: 20G memory asked but its largest node has 16G (set L40S_MEM=16G or less)"),
    (Request("infer-h200", "L40S", "l40s_public", "gpu:h200:1", 1, "1G", "10"),
     "infer-h200 job (-p l40s_public --cpus-per-task=1 --mem=1G --time=10 --gres=gpu:h200:1) can never start on "
     "this cluster: no node has 1 x gpu:h200 (its nodes have: gpu:l40s; set L40S_GRES)"),
    (Request("infer-h200", "H200", "h200_public", "gpu:h200:1", 1, "1G", "10"),
     "infer-h200 job (-p h200_public --cpus-per-task=1 --mem=1G --time=10 --gres=gpu:h200:1): partition "
     "h200_public does not exist (this cluster has: cs, l40s_public); set H200_PARTITION"),
])
def test_check_limits_names_the_numbers(request_, problem):
    assert check_limits([request_], CLUSTER) == ([problem] if problem else [])


def test_settings_round_trip_and_refuse_unknown_keys(tmp_path):
    assert load_settings(tmp_path) == {}
    save_settings(tmp_path, {"NEWSBAG_CONFIG": "/c.json", "GPU_MODE": "cpu", "STAGES": "", "L40S_MEM": "7G",
                             "NEWSBAG_ALLOW_PARTIAL": "1"})
    assert load_settings(tmp_path) == {"NEWSBAG_CONFIG": "/c.json", "GPU_MODE": "cpu", "STAGES": "",
                                       "NEWSBAG_ALLOW_PARTIAL": "1", "L40S_MEM": "7G"}
    with pytest.raises(ConfigError, match="unknown submit setting"):
        save_settings(tmp_path, {"PATH": "/bin"})


def test_recall_prints_tab_lines(tmp_path, capsys):
    save_settings(tmp_path, {"GPU_MODE": "split", "SHARDS": "4"})
    code, out, _ = run_cli(capsys, "slurm", "recall", "--run-dir", tmp_path)
    assert (code, out) == (0, "GPU_MODE\tsplit\nSHARDS\t4\n")


def test_live_and_stale_jobs():
    rows = [{"job_id": "1", "state": "COMPLETED"}, {"job_id": "2", "state": "PENDING (DependencyNeverSatisfied)"},
            {"job_id": "3", "state": "RUNNING 1/2, PENDING (Resources) 1/2"}, {"job_id": "4", "state": "FAILED"},
            {"job_id": "5", "state": "unknown"}]
    queued = live_and_stale_jobs(rows)
    assert ([r["job_id"] for r in queued.live], [r["job_id"] for r in queued.stale]) == (["3"], ["2"])


def test_a_job_waiting_on_a_job_that_ended_badly_is_stale_before_slurm_flags_it():
    # Slurm re-evaluates dependencies on its own schedule, and an array's only once every task ended:
    # until then the doomed fusion job reads plain PENDING (Dependency). The ledger's dependency says more.
    rows = [{"job_id": "20", "kind": "infer-l40s", "state": "FAILED 1/2, RUNNING 1/2", "array": "0-1"},
            {"job_id": "21", "kind": "infer-h200", "state": "COMPLETED"},
            {"job_id": "22", "kind": "fuse-review", "state": "PENDING (Dependency)", "dependency": "afterok:20:21"},
            {"job_id": "30", "kind": "infer-h200", "state": "OUT_OF_MEMORY"},
            {"job_id": "31", "kind": "fuse-review", "state": "CANCELLED (DependencyNeverSatisfied)",
             "dependency": "afterok:30"},
            {"job_id": "40", "kind": "infer-l40s", "state": "COMPLETED"},
            {"job_id": "41", "kind": "fuse-review", "state": "PENDING (Dependency)", "dependency": "afterok:40"}]
    queued = live_and_stale_jobs(rows)
    assert ([r["job_id"] for r in queued.live], [r["job_id"] for r in queued.stale]) == (["20", "41"], ["22"])
    assert unrun_lines(rows) == ["job 31 fuse-review did not run (cancelled): job 30 infer-h200 OUT_OF_MEMORY"]
    assert why_never_runs(rows[2], rows, {"20_0": "FAILED", "20_1": "RUNNING"}) == "job 20_0 infer-l40s FAILED"
    assert why_never_runs(rows[4], rows) == "job 30 infer-h200 OUT_OF_MEMORY"
    assert why_never_runs(rows[6], rows) is None


def test_a_job_waiting_on_one_array_task_is_not_stale_when_another_task_failed():
    # afterok:36_1 waits for task 1 only: task 0 failing does not doom it, and a resubmit must not cancel it.
    array = {"job_id": "36", "kind": "infer-l40s", "state": "FAILED 1/2, RUNNING 1/2", "array": "0-1"}
    fusion = {"job_id": "40", "kind": "fuse-review", "state": "PENDING (Dependency)", "dependency": "afterok:36_1:38"}
    rows = [array, {"job_id": "38", "kind": "infer-h200", "state": "COMPLETED"}, fusion]
    queued = live_and_stale_jobs(rows)
    assert ([r["job_id"] for r in queued.live], queued.stale) == (["36", "40"], ())
    assert why_never_runs(fusion, rows, {"36_0": "FAILED", "36_1": "RUNNING"}) is None
    rows[1] = {**rows[1], "state": "FAILED"}
    assert [r["job_id"] for r in live_and_stale_jobs(rows).stale] == ["40"]
    assert why_never_runs(fusion, rows, {"36_0": "FAILED", "36_1": "RUNNING"}) == "job 38 infer-h200 FAILED"


def test_way_out_says_fusion_did_not_run_because_an_inference_job_failed(tmp_path):
    # Submitted with --kill-on-invalid-dep=yes, the fusion job is CANCELLED by Slurm: not a failure of its own.
    pattern = "/r/%x-%j.out"
    rows = [{"job_id": "11", "kind": "infer-l40s", "state": "TIMEOUT 1/2, COMPLETED 1/2", "array": "0-1",
             "stages": "paddle_layout", "log": "/r/%x-%A_%a.out"},
            {"job_id": "12", "kind": "infer-h200", "state": "FAILED", "stages": "dell", "log": pattern},
            {"job_id": "13", "kind": "fuse-review", "state": "CANCELLED (DependencyNeverSatisfied)",
             "stages": "fusion,review", "dependency": "afterok:11:12", "log": pattern}]
    lines = way_out(tmp_path, rows, {"11_0": "COMPLETED", "11_1": "TIMEOUT"}, submit_cmd="submit.sh")
    assert lines == [
        "job 11_1 infer-l40s TIMEOUT: log /r/newsbag-infer-l40s-11_1.out",
        "    last error: (none found in the log; read it)",
        "job 12 infer-h200 FAILED: log /r/newsbag-infer-h200-12.out",
        "    last error: (none found in the log; read it)",
        "job 13 fuse-review did not run (cancelled): job 11_1 infer-l40s TIMEOUT, job 12 infer-h200 FAILED",
        f"after fixing the cause, resubmit (same settings, only stages with pending pages; stale jobs are cancelled): "
        f"submit.sh --run-dir {tmp_path}",
    ]
    # The same seconds before Slurm flags it: still queued, so it is named and cancelled.
    pending = rows[:2] + [{**rows[2], "state": "PENDING (Dependency)"}]
    lines = way_out(tmp_path, pending, {"11_0": "COMPLETED", "11_1": "TIMEOUT"}, submit_cmd="submit.sh")
    assert lines[4:6] == [
        "job 13 fuse-review will never start: job 11_1 infer-l40s TIMEOUT, job 12 infer-h200 FAILED",
        "cancel what is left of this run: scancel 13"]


def test_way_out_names_log_last_error_and_commands(tmp_path):
    logs = tmp_path / "logs" / "slurm"
    logs.mkdir(parents=True)
    (logs / "newsbag-infer-h200-12.out").write_text(
        "newsbag job 12 (gpu) on vm\nnewsbag env check: stage dell: env 'dell' interpreter /x is missing\n"
        "newsbag job: error: runner env check failed (lines above); fix the env paths in the config, then resubmit\n")
    (logs / "newsbag-infer-l40s-11_1.out").write_text("newsbag job 11_1\nnewsbag job 11_1: newsbag run exited 4 at t\n")
    pattern = str(logs / "%x-%j.out")
    rows = [{"job_id": "11", "kind": "infer-l40s", "state": "FAILED 1/2, COMPLETED 1/2", "array": "0-1",
             "log": str(logs / "%x-%A_%a.out")},
            {"job_id": "12", "kind": "infer-h200", "state": "FAILED", "log": pattern},
            {"job_id": "13", "kind": "fuse-review", "state": "PENDING (DependencyNeverSatisfied)", "log": pattern}]
    lines = way_out(tmp_path, rows, {"11_0": "COMPLETED", "11_1": "FAILED"}, submit_cmd="submit.sh")
    assert lines == [
        f"job 11_1 infer-l40s FAILED: log {logs}/newsbag-infer-l40s-11_1.out",
        "    last error: newsbag job 11_1: newsbag run exited 4 at t",
        f"job 12 infer-h200 FAILED: log {logs}/newsbag-infer-h200-12.out",
        "    last error: newsbag job: error: runner env check failed (lines above); fix the env paths in the config, "
        "then resubmit",
        "job 13 fuse-review will never start: a job it waits for failed",
        "cancel what is left of this run: scancel 13",
        f"after fixing the cause, resubmit (same settings, only stages with pending pages; stale jobs are cancelled): "
        f"submit.sh --run-dir {tmp_path}",
    ]
    assert way_out(tmp_path, [{"job_id": "1", "state": "COMPLETED"}]) == []
    assert expand_log_path("/r/%x-%j.out", "5", "fuse-review") == "/r/newsbag-fuse-review-5.out"
    assert last_error_line(tmp_path / "missing.out") is None


def test_pending_stages_and_canary(tmp_path):
    from newsbag.pages import build_pages

    pages = tmp_path / "in"
    for name in ("a", "b"):
        write_image(pages / f"{name}.png")
    run = tmp_path / "run"
    build_pages(run, [pages], None, False, None)
    cfg = write_fake_config(tmp_path / "c.json", {"v": {}},
                            extra_stages=[{"name": "fusion", "kind": "fusion"}, {"name": "review", "kind": "review"}])
    from newsbag.config import load_config
    from newsbag.pipeline import RunOptions, run_pipeline

    config = load_config(cfg)
    assert pending_stages(config, [], run) == ["fake", "fusion", "review"]
    run_pipeline(RunOptions(run_dir=run, config_path=cfg, stages=("fake",)))
    assert pending_stages(config, [], run) == ["fusion", "review"]
    run_pipeline(RunOptions(run_dir=run, config_path=cfg))
    assert pending_stages(config, [], run) == []
    canary = make_canary(run)
    (first,) = json.loads("[" + (canary / "manifests" / "pages.jsonl").read_text().strip() + "]")
    orig = json.loads((run / "manifests" / "pages.jsonl").read_text().splitlines()[0])
    assert first["page_id"] == orig["page_id"]
    assert (canary / first["path"]).resolve() == (run / orig["path"]).resolve()


def test_forgetting_recursive_hints_and_writes_no_manifest(tmp_path, capsys):
    write_image(tmp_path / "in" / "issue1" / "p1.png")
    write_image(tmp_path / "in" / "issue2" / "p1.png")
    code, out, err = run_cli(capsys, "pages", "--run-dir", tmp_path / "run", "--input-dir", tmp_path / "in")
    assert code == 2
    assert err.strip().endswith(f"in {tmp_path / 'in'}, but its sub-folders hold 2 image(s): add --recursive")
    assert not (tmp_path / "run" / "manifests" / "pages.jsonl").exists()
    (tmp_path / "empty").mkdir()
    code, _, err = run_cli(capsys, "pages", "--run-dir", tmp_path / "run", "--input-dir", tmp_path / "empty")
    assert code == 2 and err.strip().endswith("; nothing written")


def test_fusion_says_re_fusing_only_when_an_earlier_order_differs(tmp_path, caplog):
    from newsbag.fusion import stage as fusion_stage

    caplog.set_level(logging.INFO)
    src = fusion_stage.run_fusion.__code__.co_consts
    text = " ".join(c for c in src if isinstance(c, str))
    assert "refusing every page" not in text


def test_way_out_forgets_jobs_a_resubmit_replaced(tmp_path):
    # First submit: a task timed out, the fusion job could never start; the resubmit cancelled it and redid both.
    first = [{"job_id": "162", "kind": "infer-l40s", "stages": "fake", "array": "0-2",
              "state": "TIMEOUT 1/3, COMPLETED 2/3", "log": "/r/%x-%A_%a.out"},
             {"job_id": "164", "kind": "fuse-review", "stages": "fusion,review", "state": "CANCELLED",
              "log": "/r/%x-%j.out"}]
    again = [{"job_id": "169", "kind": "infer-l40s", "stages": "fake", "array": "0-2", "state": "COMPLETED"},
             {"job_id": "170", "kind": "fuse-review", "stages": "fusion,review", "state": "COMPLETED"}]
    assert way_out(tmp_path, first + again, {"162_1": "TIMEOUT"}) == []
    # A resubmit that redid only review (fusion was done) still replaces the job that failed in review.
    assert way_out(tmp_path, first + [again[0], {**again[1], "stages": "review", "state": "RUNNING"}]) == []
    # A failure no later job took over is still named.
    other = [{"job_id": "7", "kind": "infer-h200", "stages": "dell", "state": "FAILED", "log": "/r/%x-%j.out"},
             {"job_id": "8", "kind": "infer-l40s", "stages": "paddle_layout", "state": "COMPLETED"}]
    assert way_out(tmp_path, other, submit_cmd="s.sh")[0] == "job 7 infer-h200 FAILED: log /r/newsbag-infer-h200-7.out"


def test_resubmitted_array_asks_only_for_the_shards_with_pending_pages(tmp_path, capsys, monkeypatch):
    # One task of 4 timed out: the resubmit must not queue 4 GPU allocations to redo one slice.
    from newsbag.pages import build_pages
    from newsbag.pipeline import RunOptions, run_pipeline
    from newsbag.manifest import manifest_page_ids

    for k in range(8):
        write_image(tmp_path / "in" / f"p{k}.png")
    run = tmp_path / "run"
    build_pages(run, [tmp_path / "in"], None, False, None)
    cfg = write_fake_config(tmp_path / "c.json", {"v": {}}, extra_stages=[{"name": "fusion", "kind": "fusion"}])
    for k in (0, 1, 3):
        run_pipeline(RunOptions(run_dir=run, config_path=cfg, stages=("fake",), shard=(k, 4)))
    for p, v in {"L40S_PARTITION": "l40s_public", "L40S_CPUS": "1", "CPU_PARTITION": "cs", "CPU_CPUS": "1"}.items():
        monkeypatch.setenv(p, v)

    def arrays(*args):
        code, out, err = run_cli(capsys, "slurm", "plan", "--config", cfg, "--gpu", "l40s", "--no-check-limits", *args)
        assert code == 0, err
        return [(row.split("\t")[0], row.split("\t")[10]) for row in out.splitlines()]

    assert arrays("--shards", "4") == [("infer-l40s", "0-3"), ("fuse-review", "")]          # first submit
    assert arrays("--shards", "4", "--run-dir", run) == [("infer-l40s", "2"), ("fuse-review", "")]
    assert arrays("--run-dir", run) == [("infer-l40s", ""), ("fuse-review", "")]            # no array
    run_pipeline(RunOptions(run_dir=run, config_path=cfg, stages=("fake",), shard=(2, 4)))
    for line in (1, 4, 5):  # shards 1, 0, 1 (manifest line % 4)
        (run / "outputs" / "sources" / "fake" / "v" / f"{manifest_page_ids(run)[line]}.json").unlink()
    assert arrays("--shards", "4", "--run-dir", run) == [("infer-l40s", "0-1"), ("fuse-review", "")]
    # the stages to submit and the shards of each array come from one plan of the run
    from newsbag import planner

    calls = []
    real = planner.plan_run
    monkeypatch.setattr(planner, "plan_run", lambda *a, **k: calls.append(a) or real(*a, **k))
    assert arrays("--shards", "4", "--run-dir", run) == [("infer-l40s", "0-1"), ("fuse-review", "")]
    assert len(calls) == 1


def test_way_out_forgets_a_failure_whose_stages_have_no_pending_page(tmp_path):
    """A job that failed after writing every page (a TIMEOUT or a crash in teardown), or whose
    pages a later call redid outside Slurm: no resubmit plans a job for its stage, so no later
    job takes it over, and status must not ask to fix and resubmit forever once nothing is pending."""
    from newsbag.pages import build_pages
    from newsbag.pipeline import RunOptions, run_pipeline
    from newsbag.manifest import manifest_page_ids
    from newsbag.slurm.plan import stages_with_work

    for k in range(3):
        write_image(tmp_path / "in" / f"p{k}.png")
    run = tmp_path / "run"
    build_pages(run, [tmp_path / "in"], None, False, None)
    cfg = write_fake_config(tmp_path / "c.json", {"v": {}}, extra_stages=[{"name": "fusion", "kind": "fusion"}])
    run_pipeline(RunOptions(run_dir=run, config_path=cfg, stages=("fake", "fusion")))
    rows = [{"job_id": "7", "kind": "infer-l40s", "stages": "fake", "state": "TIMEOUT", "log": "/r/%x-%j.out"},
            {"job_id": "8", "kind": "fuse-review", "stages": "fusion", "state": "CANCELLED (DependencyNeverSatisfied)",
             "dependency": "afterok:7"}]
    assert stages_with_work(run) == set()
    assert way_out(run, rows, pending=lambda: stages_with_work(run)) == []
    # pending work in the stage: the failure is still the way out, and so is the fusion job it stopped
    (run / "outputs" / "sources" / "fake" / "v" / f"{manifest_page_ids(run)[0]}.json").unlink()
    pending = stages_with_work(run)
    assert pending == {"fake", "fusion"}
    lines = way_out(run, rows, pending=lambda: pending, submit_cmd="s.sh")
    assert lines[0] == "job 7 infer-l40s TIMEOUT: log /r/newsbag-infer-l40s-7.out"
    assert "job 8 fuse-review did not run (cancelled): job 7 infer-l40s TIMEOUT" in lines
    assert lines[-1].startswith("after fixing the cause, resubmit")
    # unknown (no readable config record): as before, every current failure is named
    assert way_out(run, rows, submit_cmd="s.sh") == lines
    (run / "config.resolved.json").write_text("{broken")
    assert stages_with_work(run) is None


def test_way_out_commands_quote_a_run_dir_with_spaces(tmp_path):
    # Collections live under names like "NZZ 1933": the printed commands must paste as they are.
    run = tmp_path / "NZZ 1933"
    rows = [{"job_id": "12", "kind": "infer-h200", "state": "FAILED", "stages": "dell", "log": "/r/%x-%j.out"}]
    lines = way_out(run, rows, {}, submit_cmd="submit.sh")
    assert lines[-1].endswith(f"submit.sh --run-dir '{run}'")


def test_a_resubmit_queues_no_task_for_pages_a_rerun_would_not_retry(tmp_path, capsys, monkeypatch):
    # A page that crashed the runner is not retried with the same inputs (--retry-failed is not a
    # submit option): a task for its slice would only record it failed again and exit 4, one GPU
    # allocation and one more cancelled fusion job per resubmit. A page that raised is retried.
    from newsbag.pages import build_pages
    from newsbag.pipeline import RunOptions, run_pipeline
    from newsbag.errors import PartialFailure

    for k in range(4):
        write_image(tmp_path / "in" / f"p{k}.png")
    run = tmp_path / "run"
    build_pages(run, [tmp_path / "in"], None, False, None)
    for p, v in {"L40S_PARTITION": "l40s_public", "L40S_CPUS": "1", "CPU_PARTITION": "cs", "CPU_CPUS": "1"}.items():
        monkeypatch.setenv(p, v)

    def arrays(cfg):
        code, out, err = run_cli(capsys, "slurm", "plan", "--config", cfg, "--gpu", "l40s", "--no-check-limits",
                                 "--shards", "2", "--run-dir", run)
        assert code == 0, err
        return [(row.split("\t")[0], row.split("\t")[10]) for row in out.splitlines()]

    for mode, expected in (("segv", [("fuse-review", "")]), ("raise", [("infer-l40s", "1"), ("fuse-review", "")])):
        cfg = write_fake_config(tmp_path / f"{mode}.json", {"v": {"mode": mode, "on": ["p1"]}},
                                extra_stages=[{"name": "fusion", "kind": "fusion"}])
        for k in (0, 1):
            try:
                run_pipeline(RunOptions(run_dir=run, config_path=cfg, stages=("fake",), shard=(k, 2), force=True))
            except PartialFailure:
                pass
        assert arrays(cfg) == expected, mode
