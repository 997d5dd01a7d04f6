"""torch/slurm scripts without a scheduler: argument checks, --dry-run sbatch lines, file hygiene."""

from __future__ import annotations

import shlex
import subprocess

import pytest
from slurm_helpers import SLURM_DIR, submit

SCRIPTS = sorted(p for p in SLURM_DIR.iterdir() if p.suffix in (".sh", ".sbatch"))


@pytest.mark.parametrize("path", SCRIPTS, ids=lambda p: p.name)
def test_scripts_are_lf_only_and_parse(path):
    data = path.read_bytes()
    assert b"\r" not in data, f"{path.name} has CR bytes: Slurm rejects DOS line endings"
    assert data.startswith(b"#!/")
    assert b"--gpus" not in data  # Torch wants --gres
    subprocess.run(["bash", "-n", str(path)], check=True)


def _sbatch_lines(stdout: str) -> list[list[str]]:
    """The argv of every printed sbatch command (`+ env VAR=... sbatch ...`)."""
    return [shlex.split(line[2:]) for line in stdout.splitlines() if line.startswith("+ ") and " sbatch " in line]


def _opts(argv: list[str]) -> dict[str, str]:
    """env assignments and sbatch options of one command as a flat dict."""
    out = {}
    it = iter(argv[argv.index("sbatch") + 1:])
    for a in argv[1:argv.index("sbatch")]:
        k, _, v = a.partition("=")
        out[k] = v
    for a in it:
        if a.startswith("--") and "=" in a:
            k, _, v = a.partition("=")
            out[k] = v
        elif a in ("-A", "-p"):
            out[a] = next(it)
        else:
            out[a] = ""
    return out


def _dry(tmp_path, slurm_env, sample_dir, *args):
    run_dir = tmp_path / "run"
    res = submit(["--input-dir", str(sample_dir), "--run-dir", str(run_dir), "--dry-run", *args], slurm_env)
    assert res.returncode == 0, res.stderr
    assert not run_dir.exists(), "--dry-run wrote the run directory"
    return [_opts(a) for a in _sbatch_lines(res.stdout)], res.stdout


@pytest.fixture
def in_dir(tmp_path):
    d = tmp_path / "in"
    d.mkdir()
    return d


def test_split_dry_run(tmp_path, slurm_env, in_dir):
    jobs, out = _dry(tmp_path, slurm_env, in_dir, "--gpu", "split")
    assert "newsbag pages --run-dir" in out
    assert [(j["-p"], j.get("--gres"), j["NEWSBAG_STAGES"], j.get("--dependency")) for j in jobs] == [
        ("l40s_public", "gpu:l40s:1", "paddle_layout,paddle_vl15", None),
        ("h200_public", "gpu:h200:1", "dell,mineru", None),
        ("cs", None, "fusion,review", "afterok:<infer-l40s>:<infer-h200>"),
    ]
    assert {j["-A"] for j in jobs} == {"torch_pr_609_general"}
    assert all("--requeue" in j and j["--open-mode"] == "append" for j in jobs)
    assert jobs[0]["--output"].endswith("/run/logs/slurm/%x-%j.out")


@pytest.mark.parametrize("args, expected", [
    # one GPU job with every selected model stage, fusion after it
    (["--gpu", "l40s"], [("l40s_public", "gpu:l40s:1", "paddle_layout,paddle_vl15,dell,mineru"),
                         ("cs", None, "fusion,review")]),
    (["--gpu", "h200", "--stages", "mineru,review"], [("h200_public", "gpu:h200:1", "mineru"), ("cs", None, "review")]),
    # split with only H200 stages selected: no L40S job at all
    (["--gpu", "split", "--stages", "dell,fusion"], [("h200_public", "gpu:h200:1", "dell"), ("cs", None, "fusion")]),
    # split without post stages: no CPU job
    (["--gpu", "split", "--stages", "paddle_layout"], [("l40s_public", "gpu:l40s:1", "paddle_layout")]),
    (["--gpu", "cpu"], [("cs", None, "paddle_layout,paddle_vl15,dell,mineru"), ("cs", None, "fusion,review")]),
    (["--gpu", "cpu", "--stages", "review"], [("cs", None, "review")]),
])
def test_modes_and_stages(tmp_path, slurm_env, in_dir, args, expected):
    jobs, _ = _dry(tmp_path, slurm_env, in_dir, *args)
    assert [(j["-p"], j.get("--gres"), j["NEWSBAG_STAGES"]) for j in jobs] == expected


def test_shards_make_arrays_and_fusion_waits_for_them(tmp_path, slurm_env, in_dir):
    jobs, _ = _dry(tmp_path, slurm_env, in_dir, "--gpu", "split", "--shards", "4")
    l40s, h200, fuse = jobs
    for j in (l40s, h200):
        assert (j["--array"], j["NEWSBAG_SHARDS"]) == ("0-3", "4")
        assert j["--output"].endswith("%x-%A_%a.out")
    assert "--array" not in fuse and fuse["NEWSBAG_SHARDS"] == ""
    assert fuse["--dependency"] == "afterok:<infer-l40s>:<infer-h200>"


def test_env_overrides(tmp_path, slurm_env, in_dir):
    env = dict(slurm_env, ACCOUNT="acct_x", L40S_PARTITION="gpu_a", CPU_PARTITION="cpu_b", L40S_MEM="7G",
               CPU_TIME="1:00:00", L40S_EXTRA="--qos=fast", NEWSBAG_PY=slurm_env["NEWSBAG_PY"])
    jobs, _ = _dry(tmp_path, env, in_dir, "--gpu", "l40s")
    assert [(j["-A"], j["-p"]) for j in jobs] == [("acct_x", "gpu_a"), ("acct_x", "cpu_b")]
    assert (jobs[0]["--mem"], jobs[0]["--qos"], jobs[1]["--time"]) == ("7G", "fast", "1:00:00")
    assert jobs[0]["NEWSBAG_PY"] == slurm_env["NEWSBAG_PY"] and jobs[0]["BASE"] == slurm_env["BASE"]


@pytest.mark.parametrize("args, message", [
    (["--gpu", "a100"], "unknown --gpu 'a100' (choose l40s, h200, split or cpu)"),
    (["--stages", "dell,layoutparser"], "unknown stage(s) layoutparser (this config has: paddle_layout,"),
    (["--shards", "0"], "--shards must be a positive integer, got '0'"),
    (["--max-pages", "x"], "--max-pages must be a positive integer, got 'x'"),
    (["--bogus"], "unknown option '--bogus'"),
])
def test_bad_arguments_are_refused_before_anything_is_written(tmp_path, slurm_env, in_dir, args, message):
    run_dir = tmp_path / "run"
    res = submit(["--input-dir", str(in_dir), "--run-dir", str(run_dir), *args], slurm_env)
    assert res.returncode == 2
    (line,) = res.stderr.strip().splitlines()
    assert line.startswith(f"submit_newsbag_from_dir.sh: error: {message}")
    assert not run_dir.exists()


def test_missing_interpreter_is_one_line(tmp_path, slurm_env, in_dir):
    res = submit(["--input-dir", str(in_dir), "--dry-run"], dict(slurm_env, NEWSBAG_PY=str(tmp_path / "nope")))
    assert res.returncode == 2
    assert res.stderr.strip() == (f"submit_newsbag_from_dir.sh: error: NEWSBAG_PY={tmp_path / 'nope'} is missing or "
                                  "not executable; set NEWSBAG_PY or VENV_DIR to the env where newsbag is installed")


def test_full_is_split_with_every_stage(tmp_path, slurm_env, in_dir):
    full = SLURM_DIR / "submit_newsbag_full.sh"
    res = subprocess.run(["bash", str(full), "--input-dir", str(in_dir), "--dry-run"], env=slurm_env,
                         capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stderr
    assert [_opts(a)["-p"] for a in _sbatch_lines(res.stdout)] == ["l40s_public", "h200_public", "cs"]
    res = subprocess.run(["bash", str(full), "--input-dir", str(in_dir), "--gpu", "cpu"], env=slurm_env,
                         capture_output=True, text=True, timeout=60)
    assert res.returncode == 2 and "--gpu is fixed here" in res.stderr


def test_a_run_dir_made_without_the_scripts_is_submitted_with_its_recorded_config(tmp_path, slurm_env, in_dir):
    """A run made with `newsbag run --config F` (no RUN/slurm/submit.json), submitted without
    NEWSBAG_CONFIG, keeps F as `newsbag run` without --config does: configs/pipeline.torch.json
    would run other models into it and replace its record."""
    import json
    import sys

    from nbtest import write_image
    from newsbag.config import load_config, to_jsonable

    write_image(in_dir / "a.png")
    run_dir = tmp_path / "run"
    env = {k: v for k, v in slurm_env.items() if k != "NEWSBAG_CONFIG"}
    subprocess.run([sys.executable, "-m", "newsbag", "pages", "--run-dir", str(run_dir), "--input-dir", str(in_dir)],
                   env=env, check=True, capture_output=True)
    small = json.loads(open(slurm_env["NEWSBAG_CONFIG"]).read())
    # fusion with its defaults: the shipped section's variants name sources of the stages dropped here
    small["stages"] = [s for s in small["stages"] if s["name"] == "dell"] + [{"name": "fusion", "kind": "fusion"}]
    (tmp_path / "small.json").write_text(json.dumps(small))
    record = run_dir / "config.resolved.json"   # what `newsbag run --config small.json` records
    record.write_text(json.dumps(to_jsonable(load_config(tmp_path / "small.json").resolved)))
    res = submit(["--run-dir", str(run_dir), "--dry-run"], env)
    assert res.returncode == 0, res.stderr
    assert [(j["NEWSBAG_CONFIG"], j["NEWSBAG_STAGES"]) for j in map(_opts, _sbatch_lines(res.stdout))] == [
        (str(record), "dell"), (str(record), "fusion")]
    assert f"reusing the settings recorded in {run_dir}: NEWSBAG_CONFIG={record}" in res.stderr


def test_a_resubmit_with_only_run_dir_finds_the_interpreter_its_first_submit_recorded(tmp_path, slurm_env, in_dir):
    """NEWSBAG_PY is a saved setting, but reading the settings needs Python: a resubmit without
    NEWSBAG_PY (a new login shell) failed unless $BASE/venv existed. The script now reads the
    recorded interpreter from RUN/slurm/submit.json itself; one that is gone is named with the fix."""
    import sys

    from nbtest import write_image

    write_image(in_dir / "a.png")
    run_dir = tmp_path / "run dir"
    py = tmp_path / "env ü" / "bin" / "python"   # a space and a non-ASCII letter, as JSON keeps them
    py.parent.mkdir(parents=True)
    py.write_text(f"#!/bin/sh\nexec {sys.executable} \"$@\"\n")
    py.chmod(0o755)
    for cmd in (["pages", "--run-dir", str(run_dir), "--input-dir", str(in_dir)],
                ["slurm", "remember", "--run-dir", str(run_dir), f"NEWSBAG_PY={py}", "GPU_MODE=cpu"]):
        subprocess.run([sys.executable, "-m", "newsbag", *cmd], env=slurm_env, check=True, capture_output=True)
    bare = {k: v for k, v in slurm_env.items() if k != "NEWSBAG_PY"}   # $BASE/venv does not exist
    res = submit(["--run-dir", str(run_dir), "--dry-run"], bare)
    assert res.returncode == 0, res.stderr
    jobs = [_opts(a) for a in _sbatch_lines(res.stdout)]
    assert jobs and {j["NEWSBAG_PY"] for j in jobs} == {str(py)}
    py.unlink()
    res = submit(["--run-dir", str(run_dir), "--dry-run"], bare)
    assert res.returncode == 2
    assert res.stderr.strip() == (f"submit_newsbag_from_dir.sh: error: NEWSBAG_PY={py} (recorded in "
                                  f"{run_dir}/slurm/submit.json) is missing or not executable; set NEWSBAG_PY "
                                  "or VENV_DIR to the env where newsbag is installed")
