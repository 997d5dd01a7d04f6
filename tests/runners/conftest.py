"""Runner-test helpers: make runners/ importable and run a family through `_loop.run_job` or as a script."""

from __future__ import annotations

import importlib
import json
import subprocess
import sys
from pathlib import Path

import pytest
from PIL import Image

from nbtest import EXAMPLE_PAGE, shared_path

REPO = Path(__file__).resolve().parents[2]
RUNNERS = REPO / "runners"
SAMPLE_PAGE = EXAMPLE_PAGE

for _p in (str(RUNNERS), str(REPO / "src")):
    if _p not in sys.path:
        sys.path.insert(0, _p)

DETECTOR_CLASSES = {
    "tesseract": "TesseractDetector",
    "paddle_layout": "PaddleLayoutDetector",
    "text_lines": "TextLinesDetector",
}


def tool_defaults(family: str) -> dict:
    """Declared parameter defaults, as the orchestrator fills them."""
    tool = json.loads((RUNNERS / f"{family}.tool.json").read_text())
    return {name: spec["default"] for name, spec in tool["parameters"].items()}


def page_entry(image_path: Path, page_id: str | None = None) -> dict:
    with Image.open(image_path) as im:
        width, height = im.size
    return {"page_id": page_id or image_path.stem, "image_path": str(image_path),
            "path": f"pages/{image_path.name}", "width": width, "height": height}


def nzz_page(stem: str) -> tuple[Path, dict]:
    """(image path, ground-truth dict) of one NZZ page; read at test time, never copied."""
    nzz = shared_path("eval", "nzz")
    image = next((nzz / "images").glob(f"*{stem}.tif"))
    return image, json.loads((nzz / "annotations" / f"{stem}.json").read_text())


def read_page(out_dir: Path, page_id: str) -> dict:
    return json.loads((out_dir / f"{page_id}.json").read_text())


class RunnerHarness:
    """Writes job JSONs under a tmp dir and runs a family in-process or as a subprocess.

    Tests reach the helpers through the ``harness`` fixture (a conftest is not importable).
    """

    sample_page = SAMPLE_PAGE
    page_entry = staticmethod(page_entry)
    nzz_page = staticmethod(nzz_page)
    read_page = staticmethod(read_page)

    def __init__(self, tmp: Path):
        self.tmp = tmp

    def job(self, family: str, pages: list[dict], params: dict | None = None, *, variant: str = "v",
            device: str = "auto", allow_cpu_fallback: bool = True) -> dict:
        from newsbag.tool_spec import label_table

        return {"stage": family, "variant": variant, "family": family,
                "params": {**tool_defaults(family), **(params or {})}, "device": device,
                "allow_cpu_fallback": allow_cpu_fallback, "out_dir": str(self.tmp / family / variant),
                "label_map": label_table(family), "force": False,
                "report_name": "run_report.json", "pages": pages}

    def run(self, family: str, pages: list[dict], params: dict | None = None, **kw) -> tuple[int, Path]:
        """In-process `_loop.run_job`; returns (exit code, out_dir)."""
        import _loop

        job = self.job(family, pages, params, **kw)
        detector_cls = getattr(importlib.import_module(family), DETECTOR_CLASSES[family])
        return _loop.run_job(job, detector_cls), Path(job["out_dir"])

    def run_script(self, family: str, pages: list[dict], params: dict | None = None, **kw):
        """`python runners/<family>.py --job job.json`; returns (exit code, out_dir, stdout)."""
        job = self.job(family, pages, params, **kw)
        job_path = self.tmp / f"{family}.{job['variant']}.job.json"
        job_path.write_text(json.dumps(job))
        proc = subprocess.run([sys.executable, str(RUNNERS / f"{family}.py"), "--job", str(job_path)],
                              capture_output=True, text=True, timeout=600)
        return proc.returncode, Path(job["out_dir"]), proc.stdout


@pytest.fixture
def harness(tmp_path) -> RunnerHarness:
    return RunnerHarness(tmp_path)
