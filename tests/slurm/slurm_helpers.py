"""Slurm test helpers: the embedded bag under production stage names, submitting, and polling jobs."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SLURM_DIR = REPO / "torch" / "slurm"
SUBMIT = SLURM_DIR / "submit_newsbag_from_dir.sh"
SHARED = REPO.parent / "shared"
TERMINAL = {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "OUT_OF_MEMORY", "NODE_FAIL", "BOOT_FAIL",
            "DEADLINE", "PREEMPTED"}
TRY_CONFIG = REPO / "configs" / "slurm-try.json"
# The embedded bag under the production stage names ("dell" yields text lines, the line source).
FUSION_VARIANTS = next(s for s in json.loads(TRY_CONFIG.read_text())["stages"] if s["name"] == "fusion")["variants"]


def bag_config(path: Path, broken_env_stage: str | None = None) -> Path:
    """configs/slurm-try.json, optionally with one stage's env pointing at a missing interpreter."""
    config = json.loads(TRY_CONFIG.read_text())
    if broken_env_stage:
        config["envs"]["broken"] = {"python": str(path.parent / "no-such-env" / "bin" / "python")}
        for s in config["stages"]:
            if s["name"] == broken_env_stage:
                s["env"] = "broken"
    path.write_text(json.dumps(config, indent=1))
    return path


def submit(args: list[str], env: dict) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", str(SUBMIT), *args], env=env, capture_output=True, text=True, timeout=120)


def show_job(job_id: str) -> list[dict]:
    """`scontrol -o show job ID` as one dict per job record (array tasks are separate records)."""
    out = subprocess.run(["scontrol", "-o", "show", "job", str(job_id)], capture_output=True, text=True, check=True)
    records = []
    for line in out.stdout.splitlines():
        rec = {}
        for token in line.split():
            key, sep, value = token.partition("=")
            if sep:
                rec[key] = value
        records.append(rec)
    return records


def wait_for(job_ids: list[str], done, timeout_s: float = 600.0) -> dict[str, list[dict]]:
    """Poll scontrol until `done(records_by_id)` holds; fail with every job's state on timeout.

    The limit is generous: on a shared test node (several suites at once) jobs queue for minutes.
    """
    deadline = time.monotonic() + timeout_s
    while True:
        records = {j: show_job(j) for j in job_ids}
        if done(records):
            return records
        if time.monotonic() > deadline:
            states = {j: [(r.get("JobId"), r.get("JobState"), r.get("Reason")) for r in recs] for j, recs in records.items()}
            pytest.fail(f"Slurm jobs not done after {timeout_s:.0f} s: {states}")
        time.sleep(2)


def all_terminal(records: dict[str, list[dict]]) -> bool:
    """Every job and array task finished or can never start (a grouped pending array record is PENDING)."""
    return all(r.get("JobState") in TERMINAL or r.get("Reason") == "DependencyNeverSatisfied"
               for recs in records.values() for r in recs)
