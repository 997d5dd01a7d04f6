"""Shared by the production-runner tests: write a job, run a runner subprocess with fakes, read outputs."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from PIL import Image

REPO = Path(__file__).resolve().parents[2]
RUNNERS = REPO / "runners"
FAKES = Path(__file__).resolve().parent / "fakes"
sys.path.insert(0, str(REPO / "src"))

from newsbag.tool_spec import label_table  # noqa: E402
from nbtest import shared_path  # noqa: E402


def replayed(name: str):
    """One output the real library wrote (JSON in ../shared/formats); without it the module is skipped."""
    return json.loads(shared_path("formats", name, module_level=True).read_text())


def make_page(tmp: Path, page_id: str, size_wh=(2000, 3000), color=(255, 255, 255)) -> dict:
    """A readable page image and its job entry."""
    path = tmp / "pages" / f"{page_id}.png"
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.new("RGB", size_wh, color).save(path)
    return {"page_id": page_id, "image_path": str(path), "path": f"pages/{page_id}.png",
            "width": size_wh[0], "height": size_wh[1]}


def tool_defaults(family: str) -> dict:
    tool = json.loads((RUNNERS / f"{family}.tool.json").read_text())
    return {k: v["default"] for k, v in tool["parameters"].items()}


def run_runner(tmp: Path, family: str, pages: list[dict], params: dict | None = None, *, device="auto",
               allow_cpu_fallback=True, env: dict | None = None, fakes=True, force=False):
    """Run runners/<family>.py --job in a subprocess; returns (exit code, out_dir, stdout events, stderr)."""
    out_dir = tmp / "out" / family
    job = {"stage": family, "variant": "v", "family": family,
           "params": {**tool_defaults(family), **(params or {})}, "device": device,
           "allow_cpu_fallback": allow_cpu_fallback, "out_dir": str(out_dir),
           "label_map": label_table(family), "force": force, "report_name": "run_report.json",
           "pages": pages}
    job_path = tmp / f"job_{family}.json"
    job_path.write_text(json.dumps(job))
    full_env = {k: v for k, v in os.environ.items() if not k.startswith("FAKE_")}
    full_env["PYTHONPATH"] = str(FAKES) if fakes else ""
    full_env["HF_HUB_OFFLINE"] = "1"
    full_env.update(env or {})
    proc = subprocess.run([sys.executable, str(RUNNERS / f"{family}.py"), "--job", str(job_path)],
                          capture_output=True, text=True, env=full_env, timeout=120)
    events = [json.loads(line[len("@@newsbag "):]) for line in proc.stdout.splitlines()
              if line.startswith("@@newsbag ")]
    return proc.returncode, out_dir, events, proc.stderr


def read_json(path: Path):
    return json.loads(Path(path).read_text())


def write_paddle_model(folder: Path) -> Path:
    """A PaddleX static model folder as paddlex reads it (inference.yml/json/pdiparams)."""
    folder.mkdir(parents=True, exist_ok=True)
    for name, data in (("inference.yml", "Global: {}\n"), ("inference.json", "{}"), ("inference.pdiparams", "x" * 64)):
        (folder / name).write_text(data)
    return folder


def run_on_a_card_without_kernels(tmp: Path, family: str, pages: list[dict], params: dict, env: dict,
                                  fallback: bool) -> Path:
    """Run `family` on a fake GPU whose first real op fails (FAKE_KERNEL_FAIL, a wheel without kernels
    for the card) and check it is found before any page: with CPU fallback every page runs on the CPU
    and run_report.json says why; without, exit 5 naming the error. Returns the out dir."""
    code, out_dir, events, err = run_runner(tmp, family, pages, params, device="gpu", allow_cpu_fallback=fallback,
                                            env={**env, "FAKE_CUDA": "1", "FAKE_KERNEL_FAIL": "1"})
    if fallback:
        assert code == 0, err
        report = read_json(out_dir / "run_report.json")
        assert report["device_used"] == "cpu" and report["counts"]["ok"] == len(pages)
        assert "no kernel image is available" in report["gpu_op_error"]
    else:
        assert code == 5, err
        assert events[-1]["error_class"] == "DeviceUnavailable" and "no kernel image is available" in events[-1]["error"]
        assert not out_dir.exists()
    return out_dir
