"""`newsbag tune` on nzz, held out by halves: tune on half A, report on half B, and the other way round.

    nice -n 10 .venv/bin/python benchmarks/tune_nzz_eval.py RUN [--gt ../shared/eval/nzz] [--trials 60] [--seed 0]

RUN is a run directory whose sources and fusion already ran on the nzz pages (the embedded
bag); it is copied, never written. Halves as benchmarks/nzz_eval.py splits them: the run's page
ids sorted, even positions half A, odd positions half B. For each half, `run_tune` runs on a
copy of RUN with only that half's ground truth (its own cross-validation by issue decides
adoption); then the other half scores:

- current: the recommendation before tuning (`paragraphs`), from its fused pages;
- after tune: what the run recommends after tuning (`tuned` when adopted, else the current one);
- fit: the half's final fit (the setting `tuned` would hold) whether adopted or not.

Text IoU-F1 and pixel F1 as `newsbag evaluate` computes them. CPU time is tune's own, on the
copy, adoption's fusion of every page included.
"""

from __future__ import annotations

import argparse
import logging
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _machine import machine_line  # noqa: E402
from nzz_eval import split_halves  # noqa: E402

from newsbag import rundir  # noqa: E402
from newsbag.evaluate import page_metrics_by_class  # noqa: E402
from newsbag.groundtruth import gt_root, match_pages  # noqa: E402
from newsbag.fusion.options import parse_fusion_config  # noqa: E402
from newsbag.recommend import fusion_section  # noqa: E402
from newsbag.tuning.pages import load_pages, score_candidate  # noqa: E402
from newsbag.tuning.run import TuneOptions, _search, _study, run_tune  # noqa: E402


def half_gt(gt_dir: Path, run_dir: Path, page_ids: set[str], into: Path) -> Path:
    """A ground-truth folder (nzz layout) holding only the annotations of `page_ids` (links to the originals)."""
    (into / "annotations").mkdir(parents=True)
    for name in ("images", "index.json"):
        if (gt_dir / name).exists():
            os.symlink((gt_dir / name).resolve(), into / name)
    for rec, gt in match_pages(run_dir, gt_dir)[0]:
        if rec["page_id"] in page_ids:
            src = gt_root(gt_dir) / gt.name
            os.symlink(src.resolve(), into / "annotations" / src.name)
    return into


def stored_scores(run_dir: Path, gt_dir: Path, variant: str, ids: list[str]) -> tuple[float, float]:
    """Mean text (iou_f1, pixel_f1) of a fused variant's stored pages over `ids`."""
    vals = []
    for rec, ann in match_pages(run_dir, gt_dir)[0]:
        if rec["page_id"] in ids:
            text = page_metrics_by_class(rundir.fused_dir(run_dir, variant), rec, ann)[0]["text"]
            vals.append((text["iou_f1"], text["pixel_f1"]))
    return tuple(np.nanmean(np.array(vals), axis=0))


def one_half(run: Path, gt: Path, tune_ids: list[str], held_ids: list[str], opts: TuneOptions, tmp: Path) -> dict:
    copy = tmp / "run"
    shutil.copytree(run, copy)
    gt_half = half_gt(gt, run, set(tune_ids), tmp / "gt")
    current = rundir.recommended_variant(copy)
    t0 = time.process_time()
    result = run_tune(copy, gt_half, opts)
    cpu = time.process_time() - t0
    after = rundir.recommended_variant(copy)
    row = {"decision": result["verdict"], "cpu_s": cpu, "current": stored_scores(copy, gt, current, held_ids),
           "after": stored_scores(copy, gt, after, held_ids), "after_variant": after}
    # The fit on the whole tuning half (run_tune's final study, same seed), scored on the held-out half.
    cfg = parse_fusion_config(fusion_section(run))
    search = _search(run, current)
    pages, _ = load_pages(run, gt, cfg, current)
    tune_pages = [p for p in pages if p.page_id in tune_ids]
    held_pages = [p for p in pages if p.page_id in held_ids]
    best = _study(tune_pages, search, opts, opts.seed + len(result["folds"]), "all", [], _NoTracker())
    if best is None:
        row["fit"] = row["current"]
    else:
        s = score_candidate(held_pages, best, search.order)
        row["fit"] = (float(s.iou_f1.mean()), float(s.pixel_f1.mean()))
    row["gain_cv"] = result["gain"]
    return row


class _NoTracker:
    def advance(self, status: str) -> None:
        pass


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run_dir", type=Path)
    ap.add_argument("--gt", type=Path, default=Path(__file__).resolve().parents[2] / "shared" / "eval" / "nzz")
    ap.add_argument("--trials", type=int, default=60)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--folds", type=int, default=3)
    args = ap.parse_args()
    logging.basicConfig(level=logging.WARNING)
    print(machine_line())
    opts = TuneOptions(trials=args.trials, seed=args.seed, folds=args.folds)
    ids = [rec["page_id"] for rec, _ in match_pages(args.run_dir, args.gt)[0]]
    halves = dict(zip("AB", split_halves(ids)))
    print(f"{len(ids)} pages; trials {opts.trials} per study, {opts.folds} folds by issue, seed {opts.seed}")
    print("| tuned on | held out | current IoU-F1 | after tune IoU-F1 | fit IoU-F1 | current pixel F1 | "
          "after tune pixel F1 | CV gain on the tuning half (95% CI) | decision | CPU s |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for tuned_on, held in (("A", "B"), ("B", "A")):
        with tempfile.TemporaryDirectory() as tmp:
            r = one_half(args.run_dir, args.gt, halves[tuned_on], halves[held], opts, Path(tmp))
        g = r["gain_cv"]
        print(f"| {tuned_on} ({len(halves[tuned_on])}) | {held} ({len(halves[held])}) | {r['current'][0]:.4f} | "
              f"{r['after'][0]:.4f} ({r['after_variant']}) | {r['fit'][0]:.4f} | {r['current'][1]:.4f} | "
              f"{r['after'][1]:.4f} | {g['mean']:+.4f} ({g['low']:+.4f}..{g['high']:+.4f}) | "
              f"{'adopted' if r['after_variant'] == 'tuned' else 'kept'} | {r['cpu_s']:.0f} |")
    print(machine_line())


if __name__ == "__main__":
    main()
