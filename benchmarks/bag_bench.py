"""The embedded bag end to end on real pages: per-member inference, orchestration overhead,
fusion, review, end-to-end s/page, peak RSS per process, and a rerun that must do nothing.

    python benchmarks/bag_bench.py                                  # all of ../shared/eval/nzz
    python benchmarks/bag_bench.py --limit 8 --keep /tmp/bag_run     # a quicker sample, keep the run

A source whose variant shares its model pass with a sibling (tesseract/paragraphs,
text_lines/blocks) shows only its post-processing as model time. Each stage runs as its own `newsbag` command (models, then `fuse`, then `review`) so each
gets its own wall time, CPU time and peak RSS; the runners' own reports give model seconds
per page and their peak RSS. Orchestration overhead per source = the orchestrator's wall
time for that source minus the runner's model setup and page seconds (runner start,
job/page JSON, events, output checks), as a share of the model's page seconds.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(HERE))

from _machine import machine_line  # noqa: E402


def newsbag(args: list[str]) -> dict:
    """Run ``newsbag ARGS``; wall s, CPU s (user+sys of it and its children) and peak RSS MB."""
    cmd = [sys.executable, "-m", "newsbag", *args]
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            env={**os.environ, "PYTHONPATH": str(REPO / "src"), "TTY_INTERACTIVE": "0"})
    err = proc.stderr.read().decode(errors="replace")
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    code = os.waitstatus_to_exitcode(status)
    if code not in (0, 4):
        raise SystemExit(f"{' '.join(cmd)} exited {code}: {err[-3000:]}")
    return {"wall": wall, "cpu": usage.ru_utime + usage.ru_stime, "peak_rss_mb": usage.ru_maxrss / 1024, "exit": code}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--input-dir", type=Path, default=REPO.parent / "shared" / "eval" / "nzz" / "images")
    ap.add_argument("--config", type=Path, default=REPO / "configs" / "pipeline.local.json")
    ap.add_argument("--limit", type=int, help="first N pages only")
    ap.add_argument("--workers", type=int, default=1, help="fusion/review processes")
    ap.add_argument("--keep", type=Path, help="run directory to use and keep (default: a temporary one)")
    args = ap.parse_args()
    print(machine_line())
    run = args.keep or Path(tempfile.mkdtemp(prefix="bag_bench_")) / "run"
    if run.exists():
        shutil.rmtree(run)
    config = json.loads(args.config.read_text())
    models = [s["name"] for s in config["stages"] if s.get("kind") not in ("fusion", "review", "export")]
    base = ["--run-dir", str(run), "--config", str(args.config)]
    select = ["--input-dir", str(args.input_dir)] + (["--max-pages", str(args.limit)] if args.limit else [])
    timings = {"models": newsbag(["run", *select, *base, "--stages", ",".join(models)])}
    pages = sum(1 for line in (run / "manifests" / "pages.jsonl").read_text().splitlines() if line.strip())
    timings["fusion"] = newsbag(["fuse", *base, "--workers", str(args.workers)])
    timings["review"] = newsbag(["review", *base, "--workers", str(args.workers)])
    rerun = newsbag(["run", *select, *base, "--workers", str(args.workers)])
    report = json.loads((run / "reports" / "run_all.json").read_text())

    print(f"pages: {pages}   config: {args.config.name}   run dir: {run}")
    print(f"{'source':<28}{'model s/page':>13}{'setup s':>9}{'overhead s/page':>17}{'peak RSS MB':>13}")
    model_total = overhead_total = 0.0
    first = json.loads(sorted((run / "reports").glob("run_*.json"), key=lambda p: p.stat().st_mtime)[0].read_text())
    for src in first["sources"]:
        rr = json.loads((run / "outputs" / "sources" / src["stage"] / src["variant"] / "run_report.json").read_text())
        secs = [p["seconds"] for p in rr["pages"].values() if p.get("status") == "ok" and p.get("seconds") is not None]
        model = sum(secs)
        overhead = src["seconds"] - model - float(rr.get("setup_seconds") or 0.0)
        model_total += model
        overhead_total += overhead
        print(f"{src['source']:<28}{model / max(1, len(secs)):>13.2f}{float(rr.get('setup_seconds') or 0):>9.2f}"
              f"{overhead / pages:>17.3f}{rr.get('peak_rss_mb', 0):>13.0f}")
    print(f"{'all sources':<28}{model_total / pages:>13.2f}{'':>9}{overhead_total / pages:>17.3f}"
          f"   orchestration overhead = {100 * overhead_total / max(model_total, 1e-9):.1f}% of model time")
    for stage in ("models", "fusion", "review"):
        t = timings[stage]
        print(f"stage {stage:<8} {t['wall'] / pages:7.2f} s/page wall  {t['cpu'] / pages:7.2f} s/page CPU  "
              f"peak RSS {t['peak_rss_mb']:.0f} MB (largest process)")
    total = sum(t["wall"] for t in timings.values())
    print(f"end to end: {total / pages:.2f} s/page wall ({total:.0f} s for {pages} pages)")
    did = {s["source"]: s["counts"] for s in report["sources"]}
    work = sum(c.get("ok", 0) + c.get("failed", 0) for c in did.values())
    fused = report["builtin"].get("fusion", {})
    reviewed = report["builtin"].get("review", {})
    print(f"rerun, nothing changed: {rerun['wall']:.1f} s wall; model pages run {work}, "
          f"fused {fused.get('ok', '?')}, boards drawn {reviewed.get('ok', '?')}")


if __name__ == "__main__":
    main()
