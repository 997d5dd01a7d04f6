"""Real Slurm: submit_newsbag_from_dir.sh on a one-node cluster shaped like Torch (.ci/slurm_setup.sh)."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from newsbag.slurm import read_jobs

from slurm_helpers import FUSION_VARIANTS, SLURM_DIR, all_terminal, bag_config, show_job, submit, wait_for

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

    def settled(recs):
        return all_terminal({l40s: recs[l40s], h200: recs[h200]}) and (
            recs[fuse][0]["Reason"] == "DependencyNeverSatisfied" or recs[fuse][0]["JobState"] == "CANCELLED")

    records = wait_for([l40s, h200, fuse], settled, timeout_s=120)
    assert records[l40s][0]["JobState"] == "COMPLETED"
    assert records[h200][0]["JobState"] == "FAILED" and records[h200][0]["ExitCode"] == "3:0"
    assert records[fuse][0]["StartTime"] == "Unknown"
    log = (run_dir / "logs" / "slurm" / f"newsbag-infer-h200-{h200}.out").read_text()
    assert "stage dell: env 'broken' interpreter" in log and "is missing" in log
    assert not (run_dir / "outputs" / "fusion" / "variant_leaderboard.tsv").exists()

    status = subprocess.run([sys.executable, "-m", "newsbag", "status", "--run-dir", str(run_dir)],
                            env=env, capture_output=True, text=True, timeout=60)
    assert status.returncode == 0, status.stderr
    lines = {line.split(":")[0].strip(): line for line in status.stdout.splitlines() if line.strip().startswith("job ")}
    assert "FAILED" in lines[f"job {h200} infer-h200"]
    assert "DependencyNeverSatisfied" in lines[f"job {fuse} fuse-review"] or "CANCELLED" in lines[f"job {fuse} fuse-review"]


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
