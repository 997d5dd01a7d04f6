"""Whole-run steps at growing page counts: seconds and peak RSS of `newsbag export --format coco`,
a `newsbag review` with every board current, and `newsbag status`, as users run them.

    python benchmarks/collection_bench.py --pages 500 1000 2000 [--steps export,review,status]

One synthetic run (`fuse_stage_bench.build_run`: 6 region sources x 300 boxes per page, each
source with the fingerprints and run report its runner leaves, fused by `newsbag fuse` with the
Torch config) of the largest count is fused once; each count then
runs each step over the first N pages of its manifest (the manifest cut to N lines: these steps
describe every manifest page), as its own process pinned to one core
(`fuse_stage_bench.timed`: CPU, wall, peak RSS from `os.wait4`). The review step measures the
whole-run part (ranking, scores.tsv, gallery): page 1's board is drawn once, and every other
page gets links to its files and an info.json whose fingerprint and input record are the ones
`newsbag review` writes for that page, so every board is current and none is drawn.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from _machine import machine_line  # noqa: E402
from fuse_stage_bench import REPO, build_run, bytecode_env, timed  # noqa: E402

STEPS = ("export", "review", "status")


def current_sources(run: Path, config: Path) -> None:
    """Give every source page the fingerprint its runner records and each source folder the run
    report a finished runner leaves (`runners/_loop.py`: the page's fingerprint and file
    identity), so that status checks the sources as on a real run: by the reports, with a stat
    a page, not by opening every page (run in a process of its own, as `current_boards`)."""
    from newsbag import freshness, rundir
    from newsbag.config import ModelStage, load_config
    from newsbag.manifest import read_pages

    stages = {s.name: s for s in load_config(config).stages if isinstance(s, ModelStage)}
    records = read_pages(run)
    for name in rundir.discover_sources(run):
        stage, variant = name.split("/", 1)
        folder = rundir.source_dir(run, stage, variant)
        pages = {}
        for record in records:
            path = folder / f"{record.page_id}.json"
            page = json.loads(path.read_text())
            page["source"]["fingerprint"] = stages[stage].page_fingerprint(variant, record.sha256)
            path.write_text(json.dumps(page))
            pages[record.page_id] = {"status": "ok", "seconds": 0.0, "regions": len(page["regions"]),
                                     "fingerprint": page["source"]["fingerprint"], "identity": freshness.file_identity(path)}
        (folder / "run_report.json").write_text(json.dumps({"stage": stage, "variant": variant, "state": "finished",
                                                            "pages": pages}))


def current_boards(run: Path, config: Path) -> None:
    """Draw page 1's board, then make every other page's board current without drawing it (run
    in a process of its own: a child forked from a grown benchmark process reports its size as
    the child's peak RSS)."""
    from PIL import Image

    from newsbag import freshness, rundir
    from newsbag.manifest import read_pages
    from newsbag.review.gallery import DATA_JS, THUMB
    from newsbag.review.options import parse_review_cfg
    from newsbag.review.stage import run_review
    from newsbag.review.state import board_inputs, review_plan

    records = read_pages(run)
    Image.new("1", (records[0].width, records[0].height), 1).save(run / records[0].image_path)
    options = next(s for s in json.loads(config.read_text())["stages"] if s.get("kind") == "review")
    run_review(run, [records[0].page_id], options)
    first = rundir.review_page_dir(run, records[0].page_id)
    template = json.loads((first / "info.json").read_text())
    plan = review_plan(run, parse_review_cfg(options))
    for record in records[1:]:
        page_dir = rundir.review_page_dir(run, record.page_id)
        page_dir.mkdir(parents=True, exist_ok=True)
        for name in (template["scan"], THUMB, DATA_JS):
            os.link(first / name, page_dir / name)
        inputs = board_inputs(record, plan, {})   # no info.json recorded for this board yet
        info = {**template, "page_id": record.page_id, "path": record.path, "image_path": record.image_path,
                "fingerprint": inputs.fingerprint, "inputs": freshness.input_record(inputs.paths, inputs.identities)}
        (page_dir / "info.json").write_text(json.dumps(info, indent=1))


def bench(counts: list[int], config: Path, steps: list[str]) -> None:
    """Print one row per page count and step, as soon as it is measured."""
    with tempfile.TemporaryDirectory(prefix="collection_bench_") as tmp:
        run = build_run(Path(tmp), max(counts), 6, 300, old_layout=False)
        (Path(tmp) / "images").mkdir(exist_ok=True)
        env = bytecode_env()
        subprocess.run([sys.executable, __file__, "--current-sources", str(run), "--config", str(config)],
                       env=env, check=True)
        cli = [sys.executable, "-m", "newsbag"]
        fuse_cpu, _, _ = timed([*cli, "fuse", "--run-dir", str(run), "--config", str(config)], env)
        print(f"# fused {max(counts)} pages in {fuse_cpu:.0f} s CPU", flush=True)
        if "review" in steps:
            subprocess.run([sys.executable, __file__, "--current-boards", str(run), "--config", str(config)],
                           env=env, check=True, stderr=subprocess.DEVNULL)
        commands = {"export": [*cli, "export", "--run-dir", str(run), "--config", str(config), "--format", "coco"],
                    "review": [*cli, "review", "--run-dir", str(run), "--config", str(config)],
                    "status": [*cli, "status", "--run-dir", str(run)]}
        manifest = run / "manifests" / "pages.jsonl"
        lines = manifest.read_text().splitlines(keepends=True)
        for n in sorted(counts):
            manifest.write_text("".join(lines[:n]))
            shutil.rmtree(run / "exports", ignore_errors=True)
            for step in steps:
                cpu, wall, rss = timed(commands[step], env)
                extra = ""
                if step == "export":
                    (coco,) = (run / "exports" / "coco").rglob("*.json")
                    extra = f"  COCO file {coco.stat().st_size / 1e6:.0f} MB"
                elif step == "review":
                    extra = f"  index.html {(run / 'review' / 'index.html').stat().st_size / 1e6:.1f} MB"
                print(f"pages {n:>6}  {step:<7} {cpu:7.1f} s CPU ({wall:.1f} wall, {1000 * cpu / n:.1f} ms/page)  "
                      f"peak RSS {rss:7.0f} MB{extra}", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pages", type=int, nargs="+", default=[500, 1000, 2000])
    ap.add_argument("--steps", default=",".join(STEPS), help=f"comma-separated, of {', '.join(STEPS)}")
    ap.add_argument("--config", type=Path, default=REPO / "configs" / "pipeline.torch.json")
    ap.add_argument("--current-boards", type=Path, metavar="RUN", help=argparse.SUPPRESS)
    ap.add_argument("--current-sources", type=Path, metavar="RUN", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.current_sources:
        current_sources(args.current_sources, args.config)
        return
    if args.current_boards:
        current_boards(args.current_boards, args.config)
        return
    steps = [s for s in args.steps.split(",") if s]
    unknown = sorted(set(steps) - set(STEPS))
    if unknown:
        ap.error(f"unknown step(s) {', '.join(unknown)}; choose from {', '.join(STEPS)}")
    print(machine_line(), flush=True)
    bench(args.pages, args.config, steps)


if __name__ == "__main__":
    main()
