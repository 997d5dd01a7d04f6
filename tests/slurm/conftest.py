"""Fixtures for the Slurm tests.

The slurm-marked tests are skipped where sinfo is not installed, or (outside CI) where it cannot
reach a controller; under CI (CI=true) a controller that does not answer fails them, because
.ci/slurm_setup.sh must have started one.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from PIL import Image
from slurm_helpers import REPO, SHARED, bag_config


def _no_slurm_reason() -> str | None:
    """Why the Slurm tests cannot run here, or None."""
    if not shutil.which("sinfo"):
        return "Slurm client tools (sinfo) not installed; .ci/slurm_setup.sh starts a one-node Slurm"
    if os.environ.get("CI"):
        return None
    try:
        answered = subprocess.run(["sinfo", "-h"], capture_output=True, timeout=20).returncode == 0
    except subprocess.TimeoutExpired:
        answered = False
    return None if answered else "sinfo cannot reach a Slurm controller (start one: .ci/slurm_setup.sh)"


def pytest_collection_modifyitems(config, items):
    if not any("slurm" in item.keywords for item in items):
        return
    reason = _no_slurm_reason()
    if reason is None:
        return
    skip = pytest.mark.skip(reason=reason)
    for item in items:
        if "slurm" in item.keywords:
            item.add_marker(skip)


@pytest.fixture
def sample_pages(tmp_path) -> Path:
    """Three small pages: the US sample and two NZZ scans, downscaled so a job takes seconds."""
    src = sorted((SHARED / "samples").glob("*.png"))[:1] + sorted((SHARED / "eval" / "nzz" / "images").glob("*.tif"))[:2]
    if len(src) < 3:
        pytest.skip(f"sample pages missing under {SHARED}")
    out = tmp_path / "pages"
    out.mkdir()
    for p in src:
        with Image.open(p) as im:
            im = im.convert("L")
            im.thumbnail((900, 900))
            im.save(out / f"{p.stem}.png")
    return out


@pytest.fixture
def slurm_env(tmp_path) -> dict:
    """Environment for the submit script: this checkout's newsbag, small requests, caches under tmp."""
    env = dict(os.environ)
    env.update({
        "PYTHONPATH": str(REPO / "src") + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else ""),
        "NEWSBAG_PY": sys.executable,
        "BASE": str(tmp_path / "base"),
        "NEWSBAG_CONFIG": str(bag_config(tmp_path / "bag.json")),
        "L40S_CPUS": "1", "H200_CPUS": "1", "CPU_CPUS": "1",
        "L40S_MEM": "2G", "H200_MEM": "2G", "CPU_MEM": "2G",
        "L40S_TIME": "10", "H200_TIME": "10", "CPU_TIME": "10",
        "OMP_NUM_THREADS": "1",
    })
    return env


@pytest.fixture
def cancel_jobs():
    """Ids appended here are scancel'ed after the test (only jobs this test submitted)."""
    ids: list[str] = []
    yield ids
    if ids and shutil.which("scancel"):
        subprocess.run(["scancel", *ids], capture_output=True)
