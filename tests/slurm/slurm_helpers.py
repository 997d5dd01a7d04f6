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
# "dell" here yields text lines (the line source); the other three give regions to fuse.
FUSION_VARIANTS = {
    "S1": {"sources": ["paddle_vl15/*"], "method": "best_single"},
    "P3": {"sources": ["paddle_layout/*", "paddle_vl15/*", "mineru/*"], "method": "consensus", "params": {"vote": 1}},
    "C1": {"sources": ["*"], "method": "consensus",
           "params": {"vote": 2, "granularity": ["mineru/paragraphs", "paddle_vl15/blocks"]}},
}


def bag_config(path: Path, broken_env_stage: str | None = None) -> Path:
    """The embedded CPU bag mapped onto the production stage names (DESIGN section 5 models)."""
    stages = [
        {"name": "paddle_layout", "family": "paddle_layout", "variants": {"cdla": {}}},
        {"name": "paddle_vl15", "family": "tesseract", "variants": {"blocks": {}}},
        {"name": "dell", "family": "text_lines", "variants": {"lines": {"group": False}}},
        {"name": "mineru", "family": "tesseract", "variants": {"paragraphs": {"level": "paragraph"}}},
        {"name": "fusion", "kind": "fusion", "line_source": "dell/lines", "exclude_from_variants": ["dell/lines"],
         "variants": FUSION_VARIANTS},
        {"name": "review", "kind": "review"},
    ]
    envs = {"default": {"python": ""}}
    if broken_env_stage:
        envs["broken"] = {"python": str(path.parent / "no-such-env" / "bin" / "python")}
        for s in stages:
            if s["name"] == broken_env_stage:
                s["env"] = "broken"
    path.write_text(json.dumps({"version": 1, "envs": envs, "device": "auto", "allow_cpu_fallback": True,
                                "stages": stages}, indent=1))
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


def wait_for(job_ids: list[str], done, timeout_s: float = 170.0) -> dict[str, list[dict]]:
    """Poll scontrol until `done(records_by_id)` holds; fail with every job's state on timeout."""
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
