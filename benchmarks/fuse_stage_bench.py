"""`newsbag fuse` as users run it, end to end (read + validate sources, pre-pass, variants, metrics,
write), on one core, side by side with the old tool's fusion on the same pages.

    python benchmarks/fuse_stage_bench.py --pages 50
    python benchmarks/fuse_stage_bench.py --pages 50 --old-tool /path/to/newspaper-parsing
    python benchmarks/fuse_stage_bench.py --pages 50 --repeat 5   # the median of 5 runs, and all 5
    python benchmarks/fuse_stage_bench.py --scaling        # 1k..20k boxes per page, and 1,000 pages
    python benchmarks/fuse_stage_bench.py --pages 1000 --repeat 2 --compare ../other-checkout   # A/B, alternating

Synthetic run: 6 region sources x 300 boxes per page named as the Torch bag names them
(paddle_layout x3, paddle_vl15, dell, mineru) plus the text-line evidence, fused with the
Torch config's fusion section. Each command runs as its own process pinned to one core
(`taskset -c 0`); the figure is that process's CPU time (user + sys) per page, so other
load on the machine changes it less than wall time. The old tool (saulrichardson/
newspaper-parsing, `newsbag.fusion.run_fusion`) reads the same boxes in its own layout
(`<stage>/<variant>/<stem>/layout_boxes.normalized.json`); its code is loaded from the
path you give and is not part of this repository. newsbag's modules are byte-compiled before
the timed runs, as an installed package's are (`bytecode_env`).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path


HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path[:0] = [str(HERE), str(REPO / "src")]

from _machine import machine_line  # noqa: E402

REGION_SOURCES = [("paddle_layout", "pp_doclayout_v2"), ("paddle_layout", "pp_doclayout_v3"),
                  ("paddle_layout", "pp_doclayout_plus_l"), ("paddle_vl15", "doc_parser"),
                  ("dell", "american_stories"), ("mineru", "layout")]
LINES = ("text_lines", "lines")


def synthetic_sources(n_sources: int, n_boxes: int, seed: int):
    """(width, height, {(stage, variant): (xyxy, score, label)}): `fusion_bench.synthetic_page`
    (a grid of paragraphs every source sees with jitter and drops, two lines per paragraph)
    under the Torch bag's source names."""
    from fusion_bench import synthetic_page

    page = synthetic_page(n_sources, n_boxes, seed)
    regions = [b for name, b in page.items() if name != "text_lines/lines"]
    out = {}
    for s, boxes in enumerate(regions):
        name = REGION_SOURCES[s] if s < len(REGION_SOURCES) else ("extra", f"v{s}")
        out[name] = (boxes.xyxy, boxes.score, "text")
    lines = page["text_lines/lines"]
    out[LINES] = (lines.xyxy, lines.score, "text_line")
    meta = lines.meta
    return meta.width, meta.height, out


def build_run(root: Path, n_pages: int, n_sources: int, n_boxes: int, old_layout: bool) -> Path:
    """A run directory with a manifest and source pages; with ``old_layout`` also the old tool's tree."""
    from PIL import Image

    from newsbag.images import CONVERSION_REVISION
    from newsbag.manifest import PageRecord, write_pages

    run = root / "run"
    (run / "manifests").mkdir(parents=True)
    manifest = []
    for p in range(n_pages):
        width, height, sources = synthetic_sources(n_sources, n_boxes, seed=p)
        page_id = f"page{p:05d}"
        image = root / "images" / f"{page_id}.png"
        image.parent.mkdir(exist_ok=True)
        if old_layout:  # the old tool opens each image for its size
            Image.new("1", (width, height)).save(image)
        manifest.append({"page_id": page_id, "path": f"../images/{page_id}.png", "image_path": str(image),
                         "width": width, "height": height, "sha256": "0" * 64})
        for (stage, variant), (xyxy, score, label) in sources.items():
            regions = [{"bbox_xyxy": [round(v, 2) for v in b], "label": label, "class": label,
                        "score": round(float(s), 5), "order": None, "text": None}
                       for b, s in zip(xyxy.tolist(), score.tolist())]
            page = {"page_id": page_id, "image": {"path": f"../images/{page_id}.png", "width": width, "height": height},
                    "source": {"stage": stage, "variant": variant, "family": stage, "model": "synthetic", "device": "cpu"},
                    "regions": regions, "seconds": 0.0}
            folder = run / "outputs" / "sources" / stage / variant
            folder.mkdir(parents=True, exist_ok=True)
            (folder / f"{page_id}.json").write_text(json.dumps(page))
            if old_layout and (stage, variant) != LINES:
                old = root / "old_run" / "outputs" / "sources" / stage / variant / page_id
                old.mkdir(parents=True, exist_ok=True)
                (old / "layout_boxes.normalized.json").write_text(json.dumps({"boxes": [
                    {"bbox_xyxy": r["bbox_xyxy"], "norm_label": "text", "label": "text", "score": r["score"]}
                    for r in regions]}))
    write_pages(run, [PageRecord(**m, conversion=CONVERSION_REVISION) for m in manifest])
    return run


def timed(cmd: list[str], env: dict | None = None) -> tuple[float, float, float]:
    """(CPU seconds user+sys, wall seconds, peak RSS MB) of one command pinned to core 0."""
    if shutil.which("taskset"):
        cmd = ["taskset", "-c", "0", *cmd]
    # stderr to a file, not a pipe read after the wait: a long run's log lines (one per repaired
    # source page) would fill the pipe and block the command forever.
    with tempfile.TemporaryFile() as log:
        t0 = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=log, env=env)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - t0
        log.seek(0)
        err = log.read().decode(errors="replace")
    code = os.waitstatus_to_exitcode(status)
    if code != 0:
        raise SystemExit(f"{' '.join(cmd)} exited {code}: {err[-2000:]}")
    return usage.ru_utime + usage.ru_stime, wall, usage.ru_maxrss / 1024


def bytecode_env(repo: Path = REPO) -> dict:
    """The timed commands' environment for the newsbag of checkout `repo`: its modules compiled
    beforehand (its ``__pycache__``, as pip compiles an installed package), not once per timed
    process.

    A machine that sets PYTHONDONTWRITEBYTECODE (these sandboxes do) made every process
    compile ~50 modules again: ~0.2 s CPU, 10 ms/page of a 20-page run that no user pays.
    """
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPATH"] = str(repo / "src")
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(repo / "src" / "newsbag")], env=env, check=True,
                   stdout=subprocess.DEVNULL)
    return env


def fuse(run: Path, config: Path, env: dict, pristine: Path | None = None) -> tuple[float, float, float]:
    """`timed` `newsbag fuse` of `run` (first put back as `pristine` when given: a run that
    starts from the sources alone)."""
    if pristine is not None:
        shutil.rmtree(run)
        shutil.copytree(pristine, run)
    return timed([sys.executable, "-m", "newsbag", "fuse", "--run-dir", str(run), "--config", str(config)], env)


def compare(n_pages: int, other: Path, config: Path, repeat: int) -> None:
    """This checkout's `newsbag fuse` against another checkout's (`other`: an older commit, say) on
    the same pages, run after run in alternating order: the ratio of each pair, and its median.
    On a VM whose speed moves by +-25 % within minutes, a pair taken back to back is the
    comparison that holds; single runs of the two are not."""
    with tempfile.TemporaryDirectory(prefix="fuse_compare_") as tmp:
        root = Path(tmp)
        run = build_run(root, n_pages, 6, 300, old_layout=False)
        pristine = root / "pristine"
        shutil.copytree(run, pristine)
        sides = {"this": (REPO, bytecode_env()), "other": (other, bytecode_env(other))}
        ms = {"this": [], "other": []}
        for k in range(repeat):
            for side in (("other", "this") if k % 2 == 0 else ("this", "other")):
                repo, env = sides[side]
                cpu, _, _ = fuse(run, repo / "configs" / config.name, env, pristine)
                ms[side].append(1000 * cpu / n_pages)
            print(f"    pair {k + 1}: other {ms['other'][-1]:.1f}, this {ms['this'][-1]:.1f} ms/page CPU "
                  f"(this/other {ms['this'][-1] / ms['other'][-1]:.3f})", flush=True)
        ratios = [t / o for t, o in zip(ms["this"], ms["other"])]
        print(f"pages {n_pages:>5}  this {statistics.median(ms['this']):.1f}, other ({other}) "
              f"{statistics.median(ms['other']):.1f} ms/page CPU (medians); this/other per pair, "
              f"median {statistics.median(ratios):.3f}", flush=True)


OLD_DRIVER = """
import importlib.util, sys
from pathlib import Path
spec = importlib.util.spec_from_file_location("old_fusion", sys.argv[1])
mod = importlib.util.module_from_spec(spec); spec.loader.exec_module(mod)
images = sorted(Path(sys.argv[2]).glob("*.png"))
mod.run_fusion(images, Path(sys.argv[3]), ["pp_doclayout_v2", "pp_doclayout_v3", "pp_doclayout_plus_l"],
               "doc_parser", "american_stories", "layout", 0.5, "P4_paddle_union4_plus_dell_plus_mineru")
"""


def old_fusion_file(path: Path) -> Path:
    """The old tool's fusion.py from a checkout, its src/, or the file itself."""
    for cand in (path, path / "fusion.py", path / "newsbag" / "fusion.py", path / "src" / "newsbag" / "fusion.py"):
        if cand.is_file():
            return cand
    raise SystemExit(f"--old-tool {path}: no fusion.py there (give a newspaper-parsing checkout or its fusion.py)")


def bench(n_pages: int, n_sources: int, n_boxes: int, old_tool: Path | None, config: Path, repeat: int = 1) -> dict:
    """One row; with `repeat` > 1 the stage runs that many times, each on a fresh copy of the
    sources, and the row gives the median run (one figure on a shared VM moves by +-25 %)."""
    with tempfile.TemporaryDirectory(prefix="fuse_bench_") as tmp:
        root = Path(tmp)
        run = build_run(root, n_pages, n_sources, n_boxes, old_layout=old_tool is not None)
        pristine = root / "pristine"
        if repeat > 1:   # each further run starts from the same sources
            shutil.copytree(run, pristine)
        env = bytecode_env()
        runs = [fuse(run, config, env, pristine if k else None) for k in range(repeat)]
        cpu, wall, rss = sorted(runs)[(repeat - 1) // 2]
        size = sum(f.stat().st_size for f in (run / "outputs" / "fusion").rglob("*.json"))
        rerun_cpu, rerun_wall, _ = fuse(run, config, env)
        row = {"pages": n_pages, "boxes_per_page": n_sources * n_boxes, "cpu_ms_per_page": 1000 * cpu / n_pages,
               "wall_ms_per_page": 1000 * wall / n_pages, "peak_rss_mb": rss,
               "fused_kb_per_page": size / 1024 / n_pages, "rerun_cpu_s": rerun_cpu,
               "runs_cpu_ms_per_page": [1000 * r[0] / n_pages for r in runs]}
        if old_tool is not None:
            driver = root / "old_driver.py"
            driver.write_text(OLD_DRIVER)
            ocpu, owall, orss = timed([sys.executable, str(driver), str(old_fusion_file(old_tool)),
                                       str(root / "images"), str(root / "old_run")])
            row.update(old_cpu_ms_per_page=1000 * ocpu / n_pages, old_wall_ms_per_page=1000 * owall / n_pages,
                       old_peak_rss_mb=orss, speedup=ocpu / cpu)
        return row


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pages", type=int, default=50)
    ap.add_argument("--sources", type=int, default=6)
    ap.add_argument("--boxes", type=int, default=300, help="boxes per source and page")
    ap.add_argument("--old-tool", type=Path, help="newspaper-parsing checkout (or its src/newsbag/fusion.py)")
    ap.add_argument("--config", type=Path, default=REPO / "configs" / "pipeline.torch.json")
    ap.add_argument("--scaling", action="store_true", help="1k..20k boxes per page (5 pages each), then --many pages")
    ap.add_argument("--many", type=int, default=1000, help="pages of the page-count scaling run (6 x 300 boxes)")
    ap.add_argument("--repeat", type=int, default=1,
                    help="run the stage this many times on fresh copies; report the median run and the spread")
    ap.add_argument("--compare", type=Path, metavar="CHECKOUT",
                    help="another newsbag checkout: run both on the same pages, alternating, --repeat pairs")
    args = ap.parse_args()
    print(machine_line(), flush=True)
    if args.compare:
        compare(args.pages, args.compare.resolve(), args.config, max(1, args.repeat))
        return
    if args.scaling:
        runs = [(5, 6, total // 6, None) for total in (1000, 2000, 5000, 10000, 20000)] + [(args.many, 6, 300, None)]
    else:
        runs = [(args.pages, args.sources, args.boxes, args.old_tool)]
    for pages, sources, boxes, old_tool in runs:   # each row as soon as it is measured
        row = bench(pages, sources, boxes, old_tool, args.config, max(1, args.repeat))
        line = (f"pages {row['pages']:>5}  boxes/page {row['boxes_per_page']:>6}  newsbag fuse {row['cpu_ms_per_page']:7.1f} ms/page CPU "
                f"({row['wall_ms_per_page']:.1f} wall)  peak RSS {row['peak_rss_mb']:.0f} MB  "
                f"fused JSON {row['fused_kb_per_page']:.0f} KB/page  rerun (nothing changed) {row['rerun_cpu_s']:.2f} s CPU  "
                f"[{1000 * (row['cpu_ms_per_page'] * row['pages'] / 1000 - row['rerun_cpu_s']) / row['pages']:.1f} ms/page "
                f"beyond the rerun's fixed start]")
        if len(row["runs_cpu_ms_per_page"]) > 1:
            line += f"\n    median of {len(row['runs_cpu_ms_per_page'])} runs: " + ", ".join(
                f"{v:.1f}" for v in row["runs_cpu_ms_per_page"]) + " ms/page CPU"
        if "old_cpu_ms_per_page" in row:
            line += (f"\n    old tool run_fusion {row['old_cpu_ms_per_page']:.1f} ms/page CPU ({row['old_wall_ms_per_page']:.1f} wall, "
                     f"peak RSS {row['old_peak_rss_mb']:.0f} MB): newsbag is {row['speedup']:.1f}x faster")
        print(line, flush=True)


if __name__ == "__main__":
    main()
