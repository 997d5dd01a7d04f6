"""`newsbag export --format coco` as users run it, at growing page counts: seconds and peak RSS
of the process that writes the run's COCO file.

    python benchmarks/export_bench.py --pages 500 1000 2000

One synthetic run (`fuse_stage_bench.build_run`: 6 region sources x 300 boxes per page, fused
by `newsbag fuse` with the Torch config) of the largest count is fused once; each count then
exports the first N pages of its manifest (the manifest cut to N lines: COCO describes every
manifest page) into an empty exports folder, as its own process pinned to one core
(`fuse_stage_bench.timed`: CPU, wall, peak RSS from `os.wait4`).
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from _machine import machine_line  # noqa: E402
from fuse_stage_bench import REPO, build_run, bytecode_env, timed  # noqa: E402


def bench(counts: list[int], config: Path, boxes: int) -> None:
    """Print one row per page count, as soon as it is measured."""
    with tempfile.TemporaryDirectory(prefix="export_bench_") as tmp:
        run = build_run(Path(tmp), max(counts), 6, boxes, old_layout=False)
        env = bytecode_env()
        cli = [sys.executable, "-m", "newsbag"]
        fuse_cpu, _, _ = timed([*cli, "fuse", "--run-dir", str(run), "--config", str(config)], env)
        print(f"# fused {max(counts)} pages in {fuse_cpu:.0f} s CPU", flush=True)
        manifest = run / "manifests" / "pages.jsonl"
        lines = manifest.read_text().splitlines(keepends=True)
        for n in sorted(counts):
            manifest.write_text("".join(lines[:n]))
            shutil.rmtree(run / "exports", ignore_errors=True)
            cpu, wall, rss = timed([*cli, "export", "--run-dir", str(run), "--config", str(config),
                                    "--format", "coco"], env)
            (coco,) = (run / "exports" / "coco").rglob("*.json")
            print(f"pages {n:>6}  export coco {cpu:7.1f} s CPU ({wall:.1f} wall, {1000 * cpu / n:.1f} ms/page)  "
                  f"peak RSS {rss:7.0f} MB  COCO file {coco.stat().st_size / 1e6:.0f} MB", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pages", type=int, nargs="+", default=[500, 1000, 2000])
    ap.add_argument("--boxes", type=int, default=300, help="boxes per source and page")
    ap.add_argument("--config", type=Path, default=REPO / "configs" / "pipeline.torch.json")
    args = ap.parse_args()
    print(machine_line(), flush=True)
    bench(args.pages, args.config, args.boxes)


if __name__ == "__main__":
    main()
