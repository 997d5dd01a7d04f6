"""Real Slurm: submit_newsbag_from_dir.sh on a one-node cluster shaped like Torch (.ci/slurm_setup.sh)."""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys

import pytest

from newsbag.slurm.jobs import read_jobs

from slurm_helpers import (FUSION_VARIANTS, REPO, SLURM_DIR, SUBMIT, all_terminal, bag_config, show_job, submit,
                           wait_for)

pytestmark = pytest.mark.slurm

SOURCES = ["paddle_layout/cdla", "paddle_vl15/blocks", "dell/lines", "mineru/paragraphs"]


def _jobs(run_dir) -> dict[str, str]:
    return {j["kind"]: j["job_id"] for j in read_jobs(run_dir)}


def _assert_outputs(run_dir, n_pages: int) -> None:
    for source in SOURCES:
        pages = sorted(p.name for p in (run_dir / "outputs" / "sources" / source).glob("*.json")
                       if not p.name.startswith("run_"))
        assert len(pages) == n_pages, f"{source}: {pages}"
    header, *rows = [line.split("\t") for line in
                     (run_dir / "outputs" / "fusion" / "variant_leaderboard.tsv").read_text().splitlines()]
    assert sorted(r[header.index("name")] for r in rows) == sorted(f"fusion/{v}" for v in FUSION_VARIANTS) or \
        sorted(r[header.index("name")] for r in rows) == sorted(FUSION_VARIANTS), rows
    assert {r[header.index("n_pages")] for r in rows} == {str(n_pages)}, rows


def test_split_mode_runs_paddle_on_l40s_the_rest_on_h200_then_fuses_on_cs(
        tmp_path, sample_pages, slurm_env, cancel_jobs):
    run_dir = tmp_path / "run"
    res = submit(["--input-dir", str(sample_pages), "--gpu", "split", "--run-dir", str(run_dir)], slurm_env)
    assert res.returncode == 0, res.stderr
    jobs = _jobs(run_dir)
    cancel_jobs.extend(jobs.values())
    assert set(jobs) == {"infer-l40s", "infer-h200", "fuse-review"}
    l40s, h200, fuse = jobs["infer-l40s"], jobs["infer-h200"], jobs["fuse-review"]
    # The chain as Slurm holds it, read while the GPU jobs still run (each takes several seconds).
    assert show_job(fuse)[0]["Dependency"] == f"afterok:{l40s}(unfulfilled),afterok:{h200}(unfulfilled)"

    records = wait_for([l40s, h200, fuse], all_terminal)
    job = {k: records[v][0] for k, v in jobs.items()}
    assert {k: r["JobState"] for k, r in job.items()} == dict.fromkeys(jobs, "COMPLETED")
    assert {k: r["Partition"] for k, r in job.items()} == {
        "infer-l40s": "l40s_public", "infer-h200": "h200_public", "fuse-review": "cs"}
    assert job["infer-l40s"]["TresPerNode"] == "gres:gpu:l40s:1"
    assert job["infer-h200"]["TresPerNode"] == "gres:gpu:h200:1"
    assert "gpu" not in job["fuse-review"].get("TresPerNode", "")
    assert job["fuse-review"]["StartTime"] >= max(job["infer-l40s"]["EndTime"], job["infer-h200"]["EndTime"])
    assert re.search(r"stages paddle_layout,paddle_vl15\b",
                     (run_dir / "logs" / "slurm" / f"newsbag-infer-l40s-{l40s}.out").read_text())
    assert re.search(r"stages dell,mineru\b", (run_dir / "logs" / "slurm" / f"newsbag-infer-h200-{h200}.out").read_text())
    _assert_outputs(run_dir, 3)

    # Requeue (what preemption does): the job reruns, resumes, and rewrites no finished page.
    pages = sorted(p for p in (run_dir / "outputs" / "sources").glob("paddle_*/*/*.json") if not p.name.startswith("run_"))
    assert len(pages) == 6
    before = {p: (p.stat().st_mtime_ns, p.read_bytes()) for p in pages}
    subprocess.run(["scontrol", "requeue", l40s], check=True)
    subprocess.run(["scontrol", "update", f"JobId={l40s}", "StartTime=now"], check=True)  # skip the 120 s hold
    wait_for([l40s], lambda recs: recs[l40s][0]["JobState"] == "COMPLETED" and recs[l40s][0]["Restarts"] == "1")
    log = (run_dir / "logs" / "slurm" / f"newsbag-infer-l40s-{l40s}.out").read_text()
    assert "restart 0 at" in log and "restart 1 at" in log  # --open-mode=append keeps the first run's log
    assert log.count("newsbag run exited 0") == 2
    assert {p: (p.stat().st_mtime_ns, p.read_bytes()) for p in pages} == before


def test_l40s_shards_make_an_array_and_fusion_waits_for_all_tasks(tmp_path, sample_pages, slurm_env, cancel_jobs):
    run_dir = tmp_path / "run"
    res = submit(["--input-dir", str(sample_pages), "--gpu", "l40s", "--shards", "3", "--run-dir", str(run_dir)],
                 slurm_env)
    assert res.returncode == 0, res.stderr
    jobs = _jobs(run_dir)
    cancel_jobs.extend(jobs.values())
    assert set(jobs) == {"infer-l40s", "fuse-review"}
    array, fuse = jobs["infer-l40s"], jobs["fuse-review"]
    assert show_job(fuse)[0]["Dependency"] == f"afterok:{array}_*(unfulfilled)"

    records = wait_for([array, fuse], all_terminal)
    tasks = {r["ArrayTaskId"]: r for r in records[array]}
    assert sorted(tasks) == ["0", "1", "2"]
    assert {r["JobState"] for r in tasks.values()} == {"COMPLETED"}
    assert {r["Partition"] for r in tasks.values()} == {"l40s_public"}
    assert {r["TresPerNode"] for r in tasks.values()} == {"gres:gpu:l40s:1"}
    assert records[fuse][0]["JobState"] == "COMPLETED"
    assert records[fuse][0]["StartTime"] >= max(r["EndTime"] for r in tasks.values())
    for k in range(3):
        log = (run_dir / "logs" / "slurm" / f"newsbag-infer-l40s-{array}_{k}.out").read_text()
        assert f"task {k}/3" in log and "newsbag run exited 0" in log
        for source in SOURCES:  # each task wrote its own report: parallel tasks never clobber one file
            assert (run_dir / "outputs" / "sources" / source / f"run_report.shard-{k}-of-3.json").is_file()
    _assert_outputs(run_dir, 3)


def test_failed_gpu_job_leaves_fusion_unrun_and_status_says_so(tmp_path, sample_pages, slurm_env, cancel_jobs):
    env = dict(slurm_env, NEWSBAG_CONFIG=str(bag_config(tmp_path / "broken.json", broken_env_stage="dell")))
    run_dir = tmp_path / "run"
    res = submit(["--input-dir", str(sample_pages), "--gpu", "split", "--stages", "paddle_layout,dell,fusion,review",
                  "--run-dir", str(run_dir)], env)
    assert res.returncode == 0, res.stderr
    assert "warning" in res.stderr and "no-such-env" in res.stderr
    jobs = _jobs(run_dir)
    cancel_jobs.extend(jobs.values())
    l40s, h200, fuse = jobs["infer-l40s"], jobs["infer-h200"], jobs["fuse-review"]
    # A job that can never run must not sit in the queue: Slurm cancels it once a job it waits for fails.
    assert show_job(fuse)[0]["KillOInInvalidDependent"] == "Yes"

    records = wait_for([l40s, h200, fuse], lambda recs: all_terminal({l40s: recs[l40s], h200: recs[h200]})
                       and recs[fuse][0]["JobState"] == "CANCELLED")
    assert records[l40s][0]["JobState"] == "COMPLETED"
    assert records[h200][0]["JobState"] == "FAILED" and records[h200][0]["ExitCode"] == "3:0"
    assert records[fuse][0]["Reason"] == "DependencyNeverSatisfied"
    assert not (run_dir / "logs" / "slurm" / f"newsbag-fuse-review-{fuse}.out").exists()  # it never started
    log = (run_dir / "logs" / "slurm" / f"newsbag-infer-h200-{h200}.out").read_text()
    assert "stage dell: env 'broken' interpreter" in log and "is missing" in log
    assert not (run_dir / "outputs" / "fusion" / "variant_leaderboard.tsv").exists()

    status = subprocess.run([sys.executable, "-m", "newsbag", "status", "--run-dir", str(run_dir)],
                            env=env, capture_output=True, text=True, timeout=60)
    assert status.returncode == 0, status.stderr
    lines = {line.split(":")[0].strip(): line for line in status.stdout.splitlines() if line.strip().startswith("job ")}
    assert "FAILED" in lines[f"job {h200} infer-h200"]
    assert "CANCELLED (DependencyNeverSatisfied)" in lines[f"job {fuse} fuse-review"]
    print(status.stdout)  # the README and the issue note quote this
    # The way out: the failing job's log, its last error line, and the commands to cancel or resubmit.
    out = status.stdout
    assert f"job {h200} infer-h200 FAILED: log {run_dir}/logs/slurm/newsbag-infer-h200-{h200}.out" in out
    assert "    last error: newsbag job: error: runner env check failed (lines above)" in out
    # Fusion did not fail: it never ran, because of that job (not a bare CANCELLED that reads like a scancel).
    assert f"job {fuse} fuse-review did not run (cancelled): job {h200} infer-h200 FAILED" in out
    assert f"job {fuse} fuse-review CANCELLED" not in out and "scancel" not in out
    assert f"submit_newsbag_from_dir.sh --run-dir {run_dir}" in out
    # Only the selected stages are listed, and a pending row says why.
    assert "paddle_vl15" not in out and "mineru" not in out
    assert re.search(rf"dell/lines +done +0 +empty +0( \(\S+\))? +failed +0 +pending +3  \(job {h200} infer-h200 FAILED: see below\)", out)

    # Fix the env, then resubmit with only --run-dir: same config and settings, it says why fusion did not
    # run, no job for the finished L40S stage.
    broken = tmp_path / "no-such-env" / "bin"
    broken.mkdir(parents=True)
    (broken / "python").write_text(f"#!/bin/sh\nexec {sys.executable} \"$@\"\n")  # a venv's python needs its pyvenv.cfg
    (broken / "python").chmod(0o755)
    bare = {k: v for k, v in env.items() if not k.startswith(("NEWSBAG_CONFIG", "L40S_", "H200_", "CPU_"))}
    res = submit(["--run-dir", str(run_dir)], bare)
    assert res.returncode == 0, res.stderr
    assert f"reusing the settings recorded in {run_dir}: NEWSBAG_CONFIG={tmp_path / 'broken.json'} " \
           "--gpu split --stages paddle_layout,dell,fusion,review --shards 1" in res.stderr
    assert "H200_MEM=2G" in res.stderr
    assert f"job {fuse} fuse-review did not run (cancelled): job {h200} infer-h200 FAILED" in res.stderr
    assert "no job for finished stage(s) paddle_layout" in res.stderr
    again = [j for j in read_jobs(run_dir)][3:]
    cancel_jobs.extend(j["job_id"] for j in again)
    assert [(j["kind"], j["stages"]) for j in again] == [("infer-h200", "dell"), ("fuse-review", "fusion,review")]
    records = wait_for([j["job_id"] for j in again], all_terminal)
    assert {r[0]["JobState"] for r in records.values()} == {"COMPLETED"}
    assert show_job(fuse)[0]["JobState"] == "CANCELLED"
    assert (run_dir / "outputs" / "fusion" / "variant_leaderboard.tsv").is_file()
    # Everything finished: a further resubmit submits nothing.
    res = submit(["--run-dir", str(run_dir)], bare)
    assert res.returncode == 0 and "nothing to submit" in res.stdout, res.stderr


def test_fusion_behind_a_failed_array_task_is_stale_while_other_tasks_run(tmp_path, sample_pages, slurm_env,
                                                                         cancel_jobs):
    """Slurm flags an afterok on an array only once every task ended: while task 1 runs, the fusion job
    behind the failed task 0 reads PENDING (Dependency). Status and a resubmit know it can never run."""
    config = bag_config(tmp_path / "bag.json", broken_env_stage="paddle_layout")
    wrapper = tmp_path / "no-such-env" / "bin" / "python"   # paddle_layout's env: task 0 fails, task 1 waits
    broken, release = tmp_path / "task0-broken", tmp_path / "release-task1"
    broken.touch()
    wrapper.parent.mkdir(parents=True)
    wrapper.write_text(
        "#!/bin/sh\n"
        f'if [ -e {broken} ] && [ "$SLURM_ARRAY_TASK_ID" = 0 ]; then echo "env: error: broken on purpose" >&2; exit 1; fi\n'
        f'while [ "$SLURM_ARRAY_TASK_ID" = 1 ] && [ ! -e {release} ]; do sleep 1; done\n'
        f'exec {sys.executable} "$@"\n')
    wrapper.chmod(0o755)
    env = dict(slurm_env, NEWSBAG_CONFIG=str(config))
    run_dir = tmp_path / "run"
    res = submit(["--input-dir", str(sample_pages), "--gpu", "l40s", "--shards", "2", "--stages",
                  "paddle_layout,dell,fusion", "--run-dir", str(run_dir)], env)
    assert res.returncode == 0, res.stderr
    jobs = _jobs(run_dir)
    cancel_jobs.extend(jobs.values())
    array, fuse = jobs["infer-l40s"], jobs["fuse-review"]

    def task_states(recs):
        return {r.get("ArrayTaskId"): r["JobState"] for r in recs[array]}

    wait_for([array], lambda recs: task_states(recs) == {"0": "FAILED", "1": "RUNNING"})
    (rec,) = show_job(fuse)
    assert (rec["JobState"], rec["Reason"]) == ("PENDING", "Dependency")  # Slurm does not know yet

    status = subprocess.run([sys.executable, "-m", "newsbag", "status", "--run-dir", str(run_dir)],
                            env=env, capture_output=True, text=True, timeout=60)
    assert status.returncode == 0, status.stderr
    out = status.stdout
    assert f"job {array}_0 infer-l40s FAILED: log {run_dir}/logs/slurm/newsbag-infer-l40s-{array}_0.out" in out
    assert f"job {fuse} fuse-review will never start: job {array}_0 infer-l40s FAILED" in out
    assert f"cancel what is left of this run: scancel {fuse} {array}" in out

    # A resubmit now cancels the doomed fusion job, and refuses only because task 1 still runs.
    res = submit(["--run-dir", str(run_dir)], env)
    assert res.returncode == 2, res.stdout + res.stderr
    assert f"cancelled stale job {fuse} (fuse-review, stages fusion): it would never start, " \
           f"job {array}_0 infer-l40s FAILED" in res.stderr
    assert f"job(s) {array} (infer-l40s FAILED 1/2, RUNNING 1/2) of {run_dir} are still queued or running" \
        in res.stderr
    assert show_job(fuse)[0]["JobState"] == "CANCELLED"

    # Fix task 0's cause, let task 1 finish, resubmit: only task 0's slice and fusion run, and finish.
    broken.unlink()
    release.touch()
    wait_for([array], lambda recs: task_states(recs) == {"0": "FAILED", "1": "COMPLETED"})
    res = submit(["--run-dir", str(run_dir)], env)
    assert res.returncode == 0, res.stderr
    again = read_jobs(run_dir)[2:]
    cancel_jobs.extend(j["job_id"] for j in again)
    assert [(j["kind"], j["array"]) for j in again] == [("infer-l40s", "0"), ("fuse-review", "")]
    records = wait_for([j["job_id"] for j in again], all_terminal)
    assert {r["JobState"] for recs in records.values() for r in recs} == {"COMPLETED"}
    assert (run_dir / "outputs" / "fusion" / "variant_leaderboard.tsv").is_file()


def test_preflight_checks_every_job_shape_and_the_envs(slurm_env):
    preflight = [str(SLURM_DIR / "preflight_gpu.sh")]
    res = subprocess.run(["bash", *preflight], env=slurm_env, capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stdout + res.stderr
    assert [line.split(":")[0] for line in res.stdout.splitlines()] == ["ok    l40s", "ok    h200", "ok    cpu", "ok    envs"]
    assert "-p l40s_public --gres=gpu:l40s:1" in res.stdout and "-p cs --mem" in res.stdout
    # more memory than the node has: Slurm itself refuses, and preflight says which shape
    res = subprocess.run(["bash", *preflight], env=dict(slurm_env, H200_MEM="100000G"),
                         capture_output=True, text=True, timeout=60)
    assert res.returncode == 1
    assert [line.split(":")[0] for line in res.stdout.splitlines()] == ["ok    l40s", "FAIL  h200", "ok    cpu", "ok    envs"]


def _refused(res, run_dir):
    assert res.returncode == 2, res.stdout + res.stderr
    assert not (run_dir / "slurm" / "jobs.jsonl").exists() and not (run_dir / "manifests").exists()
    (line,) = res.stderr.strip().splitlines()
    return line


def test_h200_refuses_paddle_stages_before_anything_is_written(tmp_path, sample_pages, slurm_env):
    run_dir = tmp_path / "run"
    res = submit(["--input-dir", str(sample_pages), "--gpu", "h200", "--run-dir", str(run_dir)], slurm_env)
    assert _refused(res, run_dir) == (
        "submit_newsbag_from_dir.sh: error: --gpu h200 would run the Paddle stage(s) paddle_layout on H200, where "
        "Paddle has no CUDA kernels for the GPU (kernel image mismatch); use --gpu split (Paddle on L40S, the rest "
        "on H200) or --gpu l40s, or leave them out with --stages paddle_vl15,dell,mineru,fusion,review")


def test_cpu_mode_with_the_default_config(tmp_path, sample_pages, slurm_env, cancel_jobs):
    env = {k: v for k, v in slurm_env.items() if k != "NEWSBAG_CONFIG"}  # configs/pipeline.torch.json
    run_dir = tmp_path / "run"
    res = submit(["--input-dir", str(sample_pages), "--gpu", "cpu", "--run-dir", str(run_dir)], env)
    line = _refused(res, run_dir)
    assert line.startswith("submit_newsbag_from_dir.sh: error: --gpu cpu: stage(s) mineru require CUDA (require_cuda in ")
    assert line.endswith("leave them out with --stages paddle_layout,paddle_vl15,dell,text_lines,fusion,review,export, "
                         "or submit them with --gpu split")
    res = submit(["--input-dir", str(sample_pages), "--gpu", "cpu", "--stages", "dell", "--run-dir", str(run_dir)], env)
    assert res.returncode == 0, res.stderr
    (job,) = read_jobs(run_dir)
    cancel_jobs.append(job["job_id"])
    assert "submitted infer-cpu job" in res.stdout and "--device cpu" in res.stdout
    (rec,) = wait_for([job["job_id"]], all_terminal)[job["job_id"]]
    assert rec["Partition"] == "cs" and "gpu" not in rec.get("TresPerNode", "")
    log = (run_dir / "logs" / "slurm" / f"newsbag-infer-cpu-{job['job_id']}.out").read_text()
    assert "stages dell; device cpu;" in log
    # The Torch envs do not exist here: the job stops at its env check (exit 3), never at a GPU check (5).
    assert rec["ExitCode"] == "3:0" and "runner env check failed" in log


def test_request_over_a_partition_limit_is_refused_with_the_numbers(tmp_path, sample_pages, slurm_env):
    run_dir = tmp_path / "run"
    res = submit(["--input-dir", str(sample_pages), "--gpu", "l40s", "--run-dir", str(run_dir)],
                 dict(slurm_env, L40S_CPUS="64", CPU_MEM="100000G"))
    line = _refused(res, run_dir)
    ncpu = subprocess.run(["sinfo", "-h", "-p", "l40s_public", "-o", "%c"], capture_output=True, text=True).stdout.split()[0]
    assert (f"infer-l40s job (-p l40s_public --cpus-per-task=64 --mem=2G --time=10 --gres=gpu:l40s:1) can never start "
            f"on this cluster: 64 CPUs asked but its largest node has {ncpu} (set L40S_CPUS={ncpu} or less)") in line
    assert "fuse-review job (-p cs --cpus-per-task=1 --mem=100000G --time=10) can never start on this cluster: " \
           "100000G memory asked but its largest node has " in line


def test_canary_one_page_short_jobs_doctor_first(tmp_path, sample_pages, slurm_env, cancel_jobs):
    run_dir = tmp_path / "run"
    # Through the README's off-cluster command: the shipped try config (configs/slurm-try.json).
    env = {k: v for k, v in slurm_env.items() if k != "NEWSBAG_CONFIG"}
    res = subprocess.run(["bash", str(SLURM_DIR / "try_local_slurm.sh"), "--input-dir", str(sample_pages), "--gpu",
                          "split", "--stages", "paddle_layout,dell,fusion", "--run-dir", str(run_dir), "--canary"],
                         env=dict(env, CANARY_TIME="5"), capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    canary = run_dir / "canary"
    assert not (run_dir / "slurm" / "jobs.jsonl").exists()          # the real run is not submitted
    assert (run_dir / "slurm" / "submit.json").is_file()             # but remembers its settings
    assert len((canary / "manifests" / "pages.jsonl").read_text().splitlines()) == 1
    jobs = _jobs(canary)
    cancel_jobs.extend(jobs.values())
    assert set(jobs) == {"canary-infer-l40s", "canary-infer-h200", "canary-fuse-review"}
    records = wait_for(list(jobs.values()), all_terminal)
    assert {r[0]["JobState"] for r in records.values()} == {"COMPLETED"}
    assert {r[0]["TimeLimit"] for r in records.values()} == {"00:05:00"}
    log = (canary / "logs" / "slurm" / f"newsbag-canary-infer-h200-{jobs['canary-infer-h200']}.out").read_text()
    assert log.index("newsbag doctor for stages dell") < log.index("newsbag run exited 0")
    assert re.search(r"^dell/lines +yes ", log, re.M)  # the doctor table: the member is ready on this node
    fuse_log = (canary / "logs" / "slurm" / f"newsbag-canary-fuse-review-{jobs['canary-fuse-review']}.out").read_text()
    assert "doctor" not in fuse_log
    assert len(list((canary / "outputs" / "sources" / "dell" / "lines").glob("*-*.json"))) == 1


def test_concurrent_submits_into_one_run_dir_do_the_work_once(tmp_path, sample_pages, slurm_env, cancel_jobs):
    run_dir = tmp_path / "run"
    args = ["bash", str(SLURM_DIR / "submit_newsbag_from_dir.sh"), "--input-dir", str(sample_pages), "--gpu", "l40s",
            "--stages", "paddle_layout", "--run-dir", str(run_dir)]
    procs = [subprocess.Popen(args, env=slurm_env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for _ in range(2)]
    results = [p.communicate(timeout=120) + (p.returncode,) for p in procs]
    jobs = read_jobs(run_dir)
    cancel_jobs.extend(j["job_id"] for j in jobs)
    assert [j["kind"] for j in jobs] == ["infer-l40s"], results
    codes = sorted(r[2] for r in results)
    loser = [r for r in results if "submitted infer-l40s" not in r[0]][0]
    assert codes in ([0, 2], [0, 0]), results
    assert "still queued or running" in loser[1] or "nothing to submit" in loser[0], loser


def test_a_config_with_relative_paths_submitted_from_another_folder(tmp_path, sample_pages, slurm_env, cancel_jobs):
    """NEWSBAG_CONFIG=../proj/bag.json given in another folder, its runners_dir and interpreter
    relative: the submit-time env check and the job (in its own cwd, as on another node) both
    take them from the config's folder."""
    proj, elsewhere, run_dir = tmp_path / "proj", tmp_path / "elsewhere", tmp_path / "run"
    (proj / "bin").mkdir(parents=True)
    elsewhere.mkdir()
    (proj / "runners").symlink_to(REPO / "runners")
    python = proj / "bin" / "python"
    python.write_text(f"#!/bin/sh\nexec {shlex.quote(sys.executable)} \"$@\"\n")
    python.chmod(0o755)
    config = json.loads(bag_config(proj / "bag.json").read_text())
    (proj / "bag.json").write_text(json.dumps({**config, "runners_dir": "runners",
                                               "envs": {"default": {"python": "bin/python"}}}))
    res = subprocess.run(["bash", str(SUBMIT), "--input-dir", str(sample_pages), "--gpu", "cpu", "--stages", "dell",
                          "--run-dir", str(run_dir)], env=dict(slurm_env, NEWSBAG_CONFIG="../proj/bag.json"),
                         cwd=elsewhere, capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    (job,) = read_jobs(run_dir)
    cancel_jobs.append(job["job_id"])
    (rec,) = wait_for([job["job_id"]], all_terminal)[job["job_id"]]
    log = (run_dir / "logs" / "slurm" / f"newsbag-infer-cpu-{job['job_id']}.out").read_text()
    assert rec["JobState"] == "COMPLETED", log
    assert f"{python} {proj / 'runners' / 'text_lines.py'} " in (run_dir / "logs" / "dell.lines.log").read_text()
    assert len(list((run_dir / "outputs" / "sources" / "dell" / "lines").glob("*-*.json"))) == 3


def test_a_resubmit_with_retry_failed_retries_the_page_that_crashed_the_runner(tmp_path, slurm_env, cancel_jobs):
    """A page that crashed its runner is held back on reruns; status named `newsbag run --retry-failed`,
    but a cluster user resubmits through the script, which had no such option: the resubmit planned
    no job ("nothing to submit"). --retry-failed now plans the job and the job passes it on."""
    from nbtest import write_fake_config, write_image

    for k in range(2):
        write_image(tmp_path / "in" / f"p{k}.png")
    cfg = write_fake_config(tmp_path / "c.json", {"v": {"mode": "segv", "on": ["p1"]}})
    env = dict(slurm_env, NEWSBAG_CONFIG=str(cfg))
    run_dir = tmp_path / "run"
    args = ["--run-dir", str(run_dir), "--gpu", "cpu", "--stages", "fake"]
    res = submit(["--input-dir", str(tmp_path / "in"), *args], env)
    assert res.returncode == 0, res.stderr
    cancel_jobs.extend(_jobs(run_dir).values())
    wait_for(list(_jobs(run_dir).values()), all_terminal)
    report = json.loads((run_dir / "reports" / "run_fake.json").read_text())["sources"][0]
    assert report["counts"]["failed"] == 1 and "SIGSEGV" in next(iter(report["failures"].values()))
    res = submit(["--run-dir", str(run_dir)], env)
    assert res.returncode == 0 and "nothing to submit" in res.stdout, res.stderr   # held back
    res = submit(["--run-dir", str(run_dir), "--retry-failed"], env)
    assert res.returncode == 0, res.stderr
    (job,) = [j["job_id"] for j in read_jobs(run_dir)][1:]
    cancel_jobs.append(job)
    wait_for([job], all_terminal)
    report = json.loads((run_dir / "reports" / "run_fake.json").read_text())["sources"][0]
    error = next(iter(report["failures"].values()))   # p1 tried again (not "not retried"), crashed again
    assert report["counts"]["failed"] == 1 and error.startswith("runner killed by SIGSEGV"), error
