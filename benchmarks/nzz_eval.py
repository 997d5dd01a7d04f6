"""Re-fuse a run and print its leaderboards and the ground-truth table (text class).

    PYTHONPATH=src python benchmarks/nzz_eval.py RUN [--gt /work/shared/eval/nzz] [--config cfg.json]
                                                 [--compare C4 text_lines/blocks]

RUN is a run directory whose sources already ran (e.g. the embedded bag on the nzz pages);
its fusion outputs are overwritten. Ground truth is read from --gt at run time only.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from newsbag.evaluate import match_pages, page_metrics_by_class, run_evaluate
from newsbag.fusion.stage import run_fusion
from newsbag.fusion.variants import DEFAULT_FUSION_CFG

COLUMNS = ("pixel_f1", "region_recall", "region_precision", "iou_f1", "over_merge", "xcol", "b1x", "n_pred")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run_dir", type=Path)
    ap.add_argument("--gt", type=Path, default=Path("/work/shared/eval/nzz"))
    ap.add_argument("--config", type=Path, help="JSON file with a fusion section (default: the shipped one)")
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--compare", nargs=2, metavar=("A", "B"),
                    help="count pages where A's text IoU F1 beats, loses to or ties B's (variant or source names)")
    args = ap.parse_args()
    cfg = json.loads(args.config.read_text()) if args.config else DEFAULT_FUSION_CFG
    with open(args.run_dir / "manifests" / "pages.jsonl", encoding="utf-8") as fh:
        page_ids = [json.loads(line)["page_id"] for line in fh if line.strip()]
    t0 = time.perf_counter()
    summary = run_fusion(args.run_dir, page_ids, cfg, force=True, workers=args.workers)
    print(f"fusion {time.perf_counter() - t0:.1f} s {summary['counts']} skipped {sorted(summary['skipped_variants'])}"
          f" recommended {summary['recommended_variant']} ({summary['recommended_by']})")
    fusion = args.run_dir / "outputs" / "fusion"
    print((fusion / "variant_leaderboard.tsv").read_text())
    print((fusion / "source_leaderboard.tsv").read_text())
    result = run_evaluate(args.run_dir, args.gt)
    print(f"| kind | name | {' | '.join(COLUMNS)} |")
    print("|" + "---|" * (len(COLUMNS) + 2))
    for row in result["sources"] + result["variants"]:
        if row["class"] == "text":
            cells = [f"{row[c]:.4f}" if row[c] is not None else "-" for c in COLUMNS]
            print(f"| {row['kind']} | {row['name']} | {' | '.join(cells)} |")
    if args.compare:
        print(compare(args.run_dir, args.gt, *args.compare))


def compare(run_dir: Path, gt_dir: Path, a: str, b: str) -> str:
    """Per page text IoU F1 of `a` against `b`: how often it is higher, lower, equal (+-0.001)."""
    folder = {n: run_dir / "outputs" / ("sources" if "/" in n else "fusion") / n for n in (a, b)}
    wins = losses = ties = 0
    for rec, ann in match_pages(run_dir, gt_dir)[0]:
        f = [page_metrics_by_class(folder[n], rec, ann)[0].get("text", {}).get("iou_f1") for n in (a, b)]
        if f[0] is None:
            continue
        wins += f[0] > f[1] + 1e-3
        losses += f[0] < f[1] - 1e-3
        ties += abs(f[0] - f[1]) <= 1e-3
    return f"{a} vs {b}, text IoU F1 per page: higher on {wins}, lower on {losses}, equal on {ties}"


if __name__ == "__main__":
    main()
