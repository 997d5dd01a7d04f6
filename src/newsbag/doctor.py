"""`newsbag doctor`: is each model stage ready (interpreter, imports, GPU, one real page)?

Only starts subprocesses in the stage's env (runners/_probe.py, then the runner itself on
one page); newsbag never imports a model library.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import tempfile
from pathlib import Path
from typing import Any

from PIL import Image

from .config import BuiltinStage, ModelStage, PipelineConfig, parse_config, to_jsonable
from .transcription.recognizer_choice import reads_without
from .runner_probe import probe_imports, probe_weights, subprocess_env
from .transcription.transcript import crop_plan
from .runner_events import split_event
from .tables import aligned_lines

__all__ = ["run_doctor", "family_imports", "format_doctor_table", "page_error"]

log = logging.getLogger(__name__)

_BASE_IMPORTS = ["numpy", "PIL"]
_FAMILY_IMPORTS = {
    "dell": ["onnxruntime"],
    "mineru": ["torch", "transformers", "mineru_vl_utils"],
    "paddle_vl15": ["paddle", "paddleocr"],
    "recognize": ["onnxruntime"],
    "recognize_tesseract": ["tesserocr"],
    "tesseract": ["tesserocr"],
    "text_lines": ["onnxruntime", "scipy"],
}
_PADDLE_LAYOUT_IMPORTS = {"paddleocr": ["paddle", "paddleocr"], "onnxruntime": ["onnxruntime"]}


def family_imports(family: str, params: dict) -> list[str]:
    """Modules a family's runner needs in its env (paddle_layout depends on its backend)."""
    if family == "paddle_layout":
        extra = _PADDLE_LAYOUT_IMPORTS.get(params.get("backend", "onnxruntime"), [])
    else:
        extra = _FAMILY_IMPORTS.get(family, [])
    return _BASE_IMPORTS + extra


def _would_use(stage: ModelStage, cuda: bool) -> str:
    if stage.device == "cpu":
        return "cpu"
    if cuda:
        return "cuda"
    return "cpu" if stage.allow_cpu_fallback else "none (GPU required, no fallback)"


def _run_page(stage: ModelStage, variant: str, params: dict, runners: Path, page: Path, timeout_s: float,
              reads_plan: bool = False) -> dict:
    """Run the stage's runner on `page`; a recogniser (`reads_plan`) reads one line box across its top."""
    with Image.open(page) as im:
        width, height = im.size
    with tempfile.TemporaryDirectory(prefix="newsbag-doctor-") as tmp:
        out_dir = Path(tmp) / "out"
        if reads_plan:
            plan = crop_plan([[0, 0, width, min(height, 100)]], ["line"], [width, height])
            (Path(tmp) / "doctor.json").write_text(json.dumps(plan), encoding="utf-8")
            params = {**params, "plan_dir": tmp}
        job = {"stage": stage.name, "variant": variant, "family": stage.family, "params": params,
               "device": stage.device, "allow_cpu_fallback": stage.allow_cpu_fallback, "out_dir": str(out_dir),
               "label_map": dict(stage.label_map), "force": True,
               "report_name": "run_report.json",
               "pages": [{"page_id": "doctor", "image_path": str(page.resolve()), "path": page.name,
                          "width": width, "height": height}]}
        job_path = Path(tmp) / "job.json"
        job_path.write_text(json.dumps(job), encoding="utf-8")
        cmd = [stage.env.python, str(runners / f"{stage.family}.py"), "--job", str(job_path)]
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, env=subprocess_env(stage), timeout=timeout_s)
        except subprocess.TimeoutExpired:
            return {"page_ok": False, "page_error": f"runner timed out after {timeout_s:.0f}s"}
        out: dict[str, Any] = {"page_exit": proc.returncode}
        page_status = {}
        try:
            report = json.loads((out_dir / "run_report.json").read_text(encoding="utf-8"))
            out["device_used"] = report.get("device_used")
            if "providers_used" in report:
                out["providers_used"] = report["providers_used"]
            page_status = report.get("pages", {}).get("doctor", {})
        except (OSError, ValueError):
            pass
        try:
            result = json.loads((out_dir / "doctor.json").read_text(encoding="utf-8"))
            out.update(page_ok=proc.returncode == 0, page_regions=len(result["regions"]), page_seconds=result["seconds"])
            if page_status.get("status") == "empty":  # answered, nothing parsed: not ready
                out.update(page_ok=False, page_error=f"the model answered but nothing usable came back: "
                                                     f"{page_status.get('reason', '')}"[:800])
        except (OSError, ValueError, KeyError):
            out.update(page_ok=False, page_error=page_error(proc.stdout, proc.stderr)[:800])
        return out


def page_error(stdout: str, stderr: str) -> str:
    """Why a one-page check wrote no page: the runner's last error event (read as the
    orchestrator reads them: malformed ones ignored, ones glued to a library's output found),
    else the last line of its stderr."""
    events = [event for line in stdout.splitlines() if (event := split_event(line)[1]) is not None]
    errors = [e["error"] for e in events if e["event"] in ("fatal", "done") and e.get("error")]
    return str(errors[-1]) if errors else (stderr.strip().splitlines() or ["no output"])[-1]


def _diagnose(row: dict, probe: dict, imports: list[str]) -> None:
    """Fill the device columns and the list of problems from a probe report."""
    problems = row["problems"]
    if "error" in probe:
        problems.append(probe["error"])
        return
    failed = {k: v["error"] for k, v in probe.get("imports", {}).items() if not v.get("ok")}
    row["imports_ok"] = not failed
    row["versions"] = {k: v.get("version") for k, v in probe.get("imports", {}).items() if v.get("ok")}
    problems.extend(f"import {k}: {err}" for k, err in failed.items())
    frameworks = probe.get("frameworks", {})
    fw = next((frameworks[name] for name in ("torch", "paddle", "onnxruntime") if name in frameworks), {})
    if "error" in fw:
        problems.append(f"device query failed: {fw['error']}")
    cuda = bool(fw.get("cuda_available"))
    for key in ("gpu_name", "compute_capability", "arch_supported", "gpu_op_ok", "available_providers"):
        if key in fw:
            row[key] = fw[key]
    row["device"] = _would_use(row["_stage"], cuda)
    if row["device"].startswith("none"):
        problems.append("no usable GPU and allow_cpu_fallback is false")
    if fw.get("arch_supported") is False:
        problems.append(f"GPU compute capability {fw.get('compute_capability')} is not in the build's arch list "
                        f"{fw.get('arch_list')}: install a wheel built for this card")
    if fw.get("gpu_op_ok") is False:
        problems.append(f"a GPU op failed: {fw.get('gpu_op_error')}")


def _model_stages(cfg: PipelineConfig) -> list[tuple[ModelStage, bool, bool]]:
    """Each model stage, and the transcription stage's recognisers as ones, with whether it reads
    a line plan (a recogniser reads the lines its stage planned, not a whole page) and whether
    its stage reads without it where its weights are missing (`recognizer_choice.reads_without`)."""
    out = []
    for stage in cfg.stages:
        if isinstance(stage, ModelStage):
            out.append((stage, False, False))
        elif isinstance(stage, BuiltinStage) and stage.kind == "transcription":
            from .transcription.stage import recognizer_stages
            from .transcription.options import parse_transcription_options

            params = parse_transcription_options(to_jsonable(stage.options))
            out.extend((s, True, reads_without(params, s.family)) for s in recognizer_stages(params))
    return out


def run_doctor(config: dict | PipelineConfig, *, run_page: str | None, timeout_s: float = 900.0) -> list[dict]:
    """One row per model stage variant, and the transcription stage's recogniser: what is ready
    and what is not (for Tesseract, which traineddata files it found).

    Args:
        config: a raw config dict (as in the JSON file) or a parsed PipelineConfig.
        run_page: an image to push through each runner, or None to skip the page test.
        timeout_s: per subprocess.

    Returns:
        Rows with stage, variant, family, env, python, python_ok, imports_ok, device (what the
        page ran on, else what the stage would use), gpu_name, compute_capability,
        arch_supported, gpu_op_ok, page_ok, device_used, providers_used, ready (bool) and
        problems (list of one-line strings).
    """
    cfg = config if isinstance(config, PipelineConfig) else parse_config(config)
    runners = cfg.runners_dir
    probes: dict[tuple, dict] = {}
    rows = []
    members = _model_stages(cfg)
    total = sum(len(stage.variants) for stage, _, _ in members)
    for stage, reads_plan, optional in members:
        for variant, frozen in stage.variants.items():
            # each member takes seconds (an env's imports, one page): say which one is being checked
            log.info("doctor: checking %s/%s (%d of %d)", stage.name, variant, len(rows) + 1, total)
            params = to_jsonable(frozen)
            row: dict[str, Any] = {"stage": stage.name, "variant": variant, "family": stage.family,
                                   "env": stage.env.name, "python": stage.env.python,
                                   "device_requested": stage.device, "python_ok": False, "imports_ok": False,
                                   "device": None, "page_ok": None, "problems": [], "_stage": stage}
            rows.append(row)
            python = Path(stage.env.python)
            if not (python.is_file() and os.access(python, os.X_OK)):
                row["problems"].append(f"env {stage.env.name}: interpreter {python} does not exist; create the env")
                continue
            row["python_ok"] = True
            imports = family_imports(stage.family, params)
            key = (stage.env.python, tuple(sorted(stage.env.env.items())), tuple(imports))
            if key not in probes:
                probes[key] = probe_imports(stage, runners, imports, timeout_s)
            _diagnose(row, probes[key], imports)
            if row["imports_ok"]:
                weights = probe_weights(stage, runners, params, timeout_s)
                row["weights_ok"] = bool(weights.get("ok"))
                row["weights"] = weights.get("paths", [])
                if not weights.get("ok") and optional:
                    row["note"] = f"weights: {weights.get('error')}; {stage.name} reads without it"
                    continue   # nothing to run a page with; the stage falls back (recognizer_choice)
                if not weights.get("ok"):
                    row["problems"].append(f"weights: {weights.get('error')}")
            if run_page and row["imports_ok"]:
                row.update(_run_page(stage, variant, params, runners, Path(run_page), timeout_s, reads_plan))
                # What the page ran on wins over the guess: onnxruntime-gpu lists CUDA where it cannot load it.
                row["device"] = row.get("device_used") or row["device"]
                if not row["page_ok"]:
                    row["problems"].append(f"one-page run failed: {row.get('page_error', 'exit ' + str(row.get('page_exit')))}")
    for row in rows:
        row.pop("_stage")
        row["ready"] = not row["problems"]
    return rows


def format_doctor_table(rows: list[dict]) -> str:
    """Plain-text table: one line per stage/variant, then the problems, indented."""
    head = ("source", "ready", "python", "imports", "weights", "device", "gpu", "cc", "arch", "page")
    table = [head]
    for r in rows:
        mark = {True: "ok", False: "FAIL", None: "-"}
        table.append((f"{r['stage']}/{r['variant']}", "yes" if r["ready"] else "NO", mark[r["python_ok"]],
                      mark[r["imports_ok"]], mark[r.get("weights_ok")], str(r.get("device") or "-"), str(r.get("gpu_name") or "-"),
                      str(r.get("compute_capability") or "-"), mark[r.get("arch_supported")], mark[r.get("page_ok")]))
    lines = aligned_lines(table)
    for r in rows:
        if r.get("weights_ok") and r.get("weights"):
            lines.append(f"  {r['stage']}/{r['variant']}: found {', '.join(r['weights'])}")
        lines.extend(f"  {r['stage']}/{r['variant']}: {p}" for p in r["problems"] + [r.get("note")] if p)
    return "\n".join(lines)
