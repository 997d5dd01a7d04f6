"""CPU time of `newsbag tune` on N ground-truth pages (goal: 20 pages in at most 10 CPU-minutes on 2 cores).

    nice -n 10 .venv/bin/python benchmarks/tune_bench.py RUN [--gt ../shared/eval/nzz] [--pages 20] [--trials 40]

RUN: a run whose sources and fusion already ran on the ground truth's pages (e.g. the embedded
bag on ../shared/eval/nzz); it is copied, never written. The first N pages (sorted page ids) keep
their ground truth; `run_tune` runs in this process with the command's defaults, and the report
gives its CPU time (user + sys, this process and any children), the wall time, the machine and
its load before and after.
"""

from __future__ import annotations

import argparse
import logging
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _machine import cpu_seconds, machine_line, peak_rss_mb  # noqa: E402
from tune_nzz_eval import half_gt  # noqa: E402

from newsbag.evaluate import match_pages  # noqa: E402
from newsbag.tuning.run import TuneOptions, run_tune  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run_dir", type=Path)
    ap.add_argument("--gt", type=Path, default=Path(__file__).resolve().parents[2] / "shared" / "eval" / "nzz")
    ap.add_argument("--pages", type=int, default=20)
    defaults = TuneOptions()
    ap.add_argument("--trials", type=int, default=defaults.trials)
    ap.add_argument("--folds", type=int, default=defaults.folds)
    ap.add_argument("--seed", type=int, default=defaults.seed)
    args = ap.parse_args()
    logging.basicConfig(level=logging.WARNING)
    print(machine_line())
    ids = sorted(rec["page_id"] for rec, _ in match_pages(args.run_dir, args.gt)[0])[:args.pages]
    with tempfile.TemporaryDirectory() as tmp:
        copy = Path(tmp) / "run"
        shutil.copytree(args.run_dir, copy)
        gt = half_gt(args.gt, args.run_dir, set(ids), Path(tmp) / "gt")
        cpu0, wall0 = cpu_seconds(), time.perf_counter()
        result = run_tune(copy, gt, TuneOptions(trials=args.trials, seed=args.seed, folds=args.folds))
        cpu, wall = cpu_seconds() - cpu0, time.perf_counter() - wall0
    print(f"tune on {result['pages']} pages, {args.trials} trials x ({result['search']['folds']} folds + a final fit "
          f"when adopted), {result['search']['methods']}: {cpu:.1f} CPU-s ({cpu / 60:.2f} CPU-min), wall {wall:.1f} s, "
          f"peak RSS {peak_rss_mb():.0f} MB")
    print(f"decision: {result['verdict']}")
    print(machine_line())


if __name__ == "__main__":
    main()
