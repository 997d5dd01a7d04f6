"""The embedded bag's cost per page: model inference per member, orchestration overhead, fusion,
review, export, end to end, and peak RSS of each process, with the machine's cores and load.

    python benchmarks/bag_bench.py --from-run runs/demo          # measure on a finished run (a copy of it)
    python benchmarks/bag_bench.py --limit 8 --keep /tmp/bag_run  # a fresh run of the first 8 nzz pages

``--from-run RUN`` copies RUN (never writes into it) and runs no member over all pages:

- *model s/page*: every member forced over ``--sample`` pages of the copy through the real
  orchestrator and runners (the runners' own per-page seconds: ``detect`` only), with its
  model set-up time and the runner's peak RSS. Variants that share a model pass
  (tesseract/paragraphs, text_lines/blocks) show only their post-processing.
- *orchestration overhead*: every source of RUN replayed over all its pages through the real
  orchestrator and ``runners/_loop.py`` by a runner whose ``detect`` returns the stored
  regions; what is left of the source's wall time after the replayed ``detect`` seconds is
  the overhead (job JSON, events, the page's clean-up, write and output check), plus the
  runner start of the real family (interpreter and imports, timed on an all-skipped job),
  once per source and run, spread over RUN's pages.
- *fusion, review, export*: their outputs deleted in the copy and each run again as
  ``newsbag fuse|review|export`` (wall, CPU, peak RSS of the process and its workers).
- *end to end*: the sum of the above per page, and the no-change rerun (must do nothing).

Timings on a shared machine are inflated: the head and tail lines give the load; the
ratios (overhead / model) are the part that travels.
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

REPLAY = '''"""Replays a finished source: detect returns the stored regions (benchmarks/bag_bench.py)."""
import json
import os

import _loop


class ReplayDetector:
    def __init__(self, params, device, allow_cpu_fallback):
        self.folder = params["from"]
        self.device_used = "cpu"
        self.info = {"model": "replay"}

    def detect(self, image_path, page):
        with open(os.path.join(self.folder, page["page_id"] + ".json"), encoding="utf-8") as fh:
            stored = json.load(fh)
        return [{"bbox_xyxy": r["bbox_xyxy"], "label": r["label"], "score": r.get("score"),
                 "order": r.get("order"), "text": r.get("text")} for r in stored["regions"]]

    def close(self):
        pass


if __name__ == "__main__":
    _loop.main(ReplayDetector)
'''


def newsbag(args: list[str], env: dict | None = None, out: Path | None = None) -> dict:
    """Run ``newsbag ARGS``; wall s, CPU s (user+sys of it and its children) and peak RSS MB; its
    stdout (a --json summary) goes to `out` when given."""
    cmd = [sys.executable, "-m", "newsbag", *args]
    t0 = time.perf_counter()
    with open(out or os.devnull, "w") as stdout:
        proc = subprocess.Popen(cmd, stdout=stdout, stderr=subprocess.PIPE,
                                env={**os.environ, "PYTHONPATH": str(REPO / "src"), "TTY_INTERACTIVE": "0",
                                     **(env or {})})
        err = proc.stderr.read().decode(errors="replace")
        _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    code = os.waitstatus_to_exitcode(status)
    if code not in (0, 4):
        raise SystemExit(f"{' '.join(cmd)} exited {code}: {err[-3000:]}")
    return {"wall": wall, "cpu": usage.ru_utime + usage.ru_stime, "peak_rss_mb": usage.ru_maxrss / 1024, "exit": code}


def _latest_report(run: Path) -> dict:
    reports = sorted((run / "reports").glob("run_*.json"), key=lambda p: p.stat().st_mtime)
    return json.loads(reports[-1].read_text())


def _model_stages(config: dict) -> list[dict]:
    return [s for s in config["stages"] if s.get("family")]


def _source_report(run: Path, stage: str, variant: str) -> dict:
    return json.loads((run / "outputs" / "sources" / stage / variant / "run_report.json").read_text())


def copy_run(src: Path, work: Path) -> Path:
    """A copy of `src` at the same depth below a folder where ``../../shared`` resolves (page paths are relative)."""
    run = work / "copy" / "run"
    shutil.copytree(src, run, symlinks=True)
    shared = src.resolve().parent.parent / "shared"
    if shared.exists() and not (work / "shared").exists():
        (work / "shared").symlink_to(shared)
    return run


def runner_start(config: dict, run: Path, work: Path) -> dict[str, float]:
    """Seconds from launch to exit of each family's real runner on a job whose pages are all done."""
    from newsbag.config import load_config

    out = {}
    cfg = load_config(Path(config["_path"]))
    page = json.loads((run / "manifests" / "pages.jsonl").read_text().splitlines()[0])
    for stage in _model_stages(config):
        family = stage["family"]
        if family in out:
            continue
        variant = next(iter(stage["variants"]))
        job = {"stage": stage["name"], "variant": variant, "family": family, "params": {}, "device": "cpu",
               "out_dir": str(run / "outputs" / "sources" / stage["name"] / variant), "report_name": "start_probe.json",
               "pages": [{"page_id": page["page_id"], "image_path": page["image_path"], "path": page["path"],
                          "width": page["width"], "height": page["height"]}]}
        python = cfg.stage(stage["name"]).env.python
        t0 = time.perf_counter()
        subprocess.run([python, str(cfg.runners_dir / f"{family}.py"), "--job", "/dev/stdin"], input=json.dumps(job).encode(),
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
        out[family] = time.perf_counter() - t0
        (run / "outputs" / "sources" / stage["name"] / variant / "start_probe.json").unlink(missing_ok=True)
    return out


def replay_overhead(config: dict, src_run: Path, work: Path) -> tuple[dict[str, dict], float]:
    """Replay every source of `src_run` through the orchestrator.

    Returns per source {wall, detect (replayed detect seconds), setup, pages}, and the peak RSS
    of the run (the orchestrator; the replay runners are smaller).
    """
    runners = work / "replay_runners"
    runners.mkdir()
    for helper in (REPO / "runners").glob("_*.py"):  # _loop.py and the helpers it imports
        shutil.copy(helper, runners)
    (runners / "replay.py").write_text(REPLAY)
    labels = {}
    for stage in _model_stages(config):
        labels.update(json.loads((REPO / "runners" / f"{stage['family']}.tool.json").read_text())["labels"])
    (runners / "replay.tool.json").write_text(json.dumps({
        "family": "replay", "description": "bag_bench replay",
        "parameters": {"from": {"type": "string", "default": "", "description": "source folder"}}, "labels": labels}))
    stages = [{"name": s["name"], "family": "replay", "page_timeout_s": 600,
               "variants": {v: {"from": str(src_run / "outputs" / "sources" / s["name"] / v)} for v in s["variants"]}}
              for s in _model_stages(config)]
    replay_cfg = work / "replay.json"
    replay_cfg.write_text(json.dumps({"version": 1, "runners_dir": str(runners), "envs": {"default": {"python": ""}},
                                      "device": "cpu", "stages": stages}))
    run = work / "replay" / "run"
    run.parent.mkdir()
    shutil.copytree(src_run / "manifests", run / "manifests")
    timing = newsbag(["run", "--run-dir", str(run), "--config", str(replay_cfg)])
    out = {}
    for src in _latest_report(run)["sources"]:
        rr = _source_report(run, src["stage"], src["variant"])
        secs = [p["seconds"] for p in rr["pages"].values() if p.get("seconds") is not None]
        out[src["source"]] = {"wall": src["seconds"], "detect": sum(secs), "setup": float(rr.get("setup_seconds") or 0),
                              "pages": len(secs)}
    return out, timing["peak_rss_mb"]


def from_run(args) -> None:
    src = args.from_run.resolve()
    work = Path(tempfile.mkdtemp(prefix="bag_bench_"))
    run = copy_run(src, work)
    config = json.loads((run / "config.resolved.json").read_text())
    config_path = work / "config.json"
    config_path.write_text(json.dumps({k: v for k, v in config.items() if not k.startswith("_")}))
    config["_path"] = str(config_path)
    pages = [json.loads(x) for x in (run / "manifests" / "pages.jsonl").read_text().splitlines() if x.strip()]
    n = len(pages)
    base = ["--run-dir", str(run), "--config", str(config_path)]
    sample = [p["page_id"] for p in pages[:: max(1, n // args.sample)][: args.sample]]
    stages = [s["name"] for s in _model_stages(config)]

    print(machine_line())
    print(f"run: {src} ({n} pages), copied to {run}; model sample: {len(sample)} pages")
    models = newsbag(["run", *base, "--stages", ",".join(stages), "--pages", ",".join(sample), "--force"])
    start = runner_start(config, run, work)
    replay, replay_rss = replay_overhead(config, src, work)

    print(f"\n{'source':<24}{'model s/page':>13}{'setup s':>9}{'runner RSS MB':>15}{'(in RUN)':>10}"
          f"{'overhead ms/page':>18}{'of which start':>16}")
    model_by_stage: dict[str, list[float]] = {}
    for stage in _model_stages(config):
        for variant in stage["variants"]:
            name = f"{stage['name']}/{variant}"
            rr = _source_report(run, stage["name"], variant)
            in_run = _source_report(src, stage["name"], variant).get("peak_rss_mb", 0)
            secs = [rr["pages"][p]["seconds"] for p in sample if rr["pages"].get(p, {}).get("seconds") is not None]
            model = sum(secs) / max(1, len(secs))
            r = replay[name]
            per_page = (r["wall"] - r["detect"] - r["setup"]) / max(1, r["pages"])
            started = start.get(stage["family"], 0.0) / n
            both = model_by_stage.setdefault(stage["name"], [0.0, 0.0])
            both[0] += model
            both[1] += per_page + started
            print(f"{name:<24}{model:>13.3f}{float(rr.get('setup_seconds') or 0):>9.2f}{rr.get('peak_rss_mb', 0):>15.0f}"
                  f"{in_run:>10.0f}{1000 * (per_page + started):>18.1f}{1000 * started:>16.1f}")
    model_total = sum(m for m, _ in model_by_stage.values())
    overhead_total = sum(o for _, o in model_by_stage.values())
    for name, (model, overhead) in model_by_stage.items():
        print(f"stage {name:<18}{model:>13.3f}{'':>34}{1000 * overhead:>18.1f}   overhead = {100 * overhead / max(model, 1e-9):.1f}% of model time")
    print(f"{'all members':<24}{model_total:>13.3f}{'':>34}{1000 * overhead_total:>18.1f}   overhead = "
          f"{100 * overhead_total / max(model_total, 1e-9):.1f}% of model time")
    print(f"model stages on the sample: {models['wall']:.1f} s wall for {len(sample)} pages (runner starts and model "
          f"set-up included); orchestrator peak RSS {replay_rss:.0f} MB (the replay run)")

    builtin = {}
    for stage, folder in (("fuse", run / "outputs" / "fusion"), ("review", run / "review"), ("export", run / "exports")):
        shutil.rmtree(folder, ignore_errors=True)
        builtin[stage] = newsbag([stage, *base, *(["--workers", str(args.workers)] if stage != "export" else [])])
    for stage, t in builtin.items():
        print(f"{stage:<8} {t['wall'] / n:6.3f} s/page wall  {t['cpu'] / n:6.3f} s/page CPU  "
              f"peak RSS {t['peak_rss_mb']:.0f} MB (largest process)")
    total = model_total + overhead_total + sum(t["wall"] for t in builtin.values()) / n
    print(f"end to end (sum of the above): {total:.2f} s/page; "
          f"the run itself took {_latest_report(src)['seconds'] / n:.2f} s/page when it ran")
    # what the rerun did is its --json summary: a call that did nothing leaves the reports as they were
    rerun = newsbag(["run", *base, "--json"], out=work / "rerun.json")
    report = json.loads((work / "rerun.json").read_text())
    work_done = sum(s["counts"].get("ok", 0) + s["counts"].get("failed", 0) for s in report["sources"])
    print(f"rerun, nothing changed: {rerun['wall']:.1f} s wall; model pages run {work_done}, "
          f"fused {report['builtin'].get('fusion', {}).get('ok', '?')}, boards drawn {report['builtin'].get('review', {}).get('ok', '?')}")
    print(machine_line())
    if args.keep:
        print(f"work folder kept: {work}")
    else:
        shutil.rmtree(work, ignore_errors=True)


def fresh_run(args) -> None:
    """A new run over --input-dir (all stages), then fuse, review and a no-change rerun."""
    print(machine_line())
    run = args.keep or Path(tempfile.mkdtemp(prefix="bag_bench_")) / "run"
    if run.exists():
        shutil.rmtree(run)
    config = json.loads(args.config.read_text())
    models = [s["name"] for s in _model_stages(config)]   # not transcription: it needs fusion first
    base = ["--run-dir", str(run), "--config", str(args.config)]
    select = ["--input-dir", str(args.input_dir)] + (["--max-pages", str(args.limit)] if args.limit else [])
    timings = {"models": newsbag(["run", *select, *base, "--stages", ",".join(models)])}
    pages = sum(1 for line in (run / "manifests" / "pages.jsonl").read_text().splitlines() if line.strip())
    timings["fusion"] = newsbag(["fuse", *base, "--workers", str(args.workers)])
    timings["review"] = newsbag(["review", *base, "--workers", str(args.workers)])
    said = Path(tempfile.mkdtemp(prefix="bag_bench_")) / "rerun.json"   # the rerun's own --json summary
    rerun = newsbag(["run", *select, *base, "--workers", str(args.workers), "--json"], out=said)
    report = json.loads(said.read_text())

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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--from-run", type=Path, help="measure on a copy of this finished run (no full model pass)")
    ap.add_argument("--sample", type=int, default=3, help="--from-run: pages each member is timed on")
    ap.add_argument("--input-dir", type=Path, default=REPO.parent / "shared" / "eval" / "nzz" / "images")
    ap.add_argument("--config", type=Path, default=REPO / "configs" / "pipeline.local.json")
    ap.add_argument("--limit", type=int, help="first N pages only")
    ap.add_argument("--workers", type=int, default=1, help="fusion/review processes")
    ap.add_argument("--keep", type=Path, help="fresh run: run directory to use and keep (default: a temporary one); "
                                              "--from-run: keep the work folder")
    args = ap.parse_args()
    if args.from_run:
        from_run(args)
    else:
        fresh_run(args)


if __name__ == "__main__":
    main()
