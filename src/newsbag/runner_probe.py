"""Ask a model stage's own env what it has (imports, weights) through runners/_probe.py: no model
is loaded and nothing is downloaded; newsbag never imports a model library itself."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

from .config import ModelStage

__all__ = ["probe_imports", "probe_weights", "subprocess_env"]


def subprocess_env(stage: ModelStage) -> dict[str, str]:
    """The environment a stage's runner starts with: ours, and the stage env's variables over it."""
    return {**os.environ, **dict(stage.env.env)}


def _probe(stage: ModelStage, runners: Path, args: list[str], timeout_s: float, what: str) -> dict:
    """The last JSON line `_probe.py ARGS` prints in the stage's env, or {"error": ...} in one line."""
    cmd = [stage.env.python, str(runners / "_probe.py"), *args]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, env=subprocess_env(stage), timeout=timeout_s)
    except subprocess.TimeoutExpired:
        return {"error": f"{what} timed out after {timeout_s:.0f}s"}
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    if proc.returncode != 0 or not lines:
        tail = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        return {"error": f"{what} exited {proc.returncode}: {tail[:300]}"}
    return json.loads(lines[-1])


def probe_imports(stage: ModelStage, runners: Path, imports: list[str], timeout_s: float) -> dict:
    """Which of `imports` the stage's interpreter can import, and its devices (`_probe.py --imports`)."""
    return _probe(stage, runners, ["--imports", ",".join(imports)], timeout_s, "probe")


def probe_weights(stage: ModelStage, runners: Path, params: dict, timeout_s: float) -> dict:
    """Ask the family's own ``locate_weights`` (in the stage env) whether the weights are where
    the config says: {"ok": bool, "error"?: one line}."""
    found = _probe(stage, runners, ["--weights", stage.family, "--params", json.dumps(params)], timeout_s,
                   "weights check")
    return {"ok": False, "error": found["error"]} if "error" in found else found["weights"]
