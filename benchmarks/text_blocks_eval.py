"""text_lines block grouping against the nzz ground truth: text-region metrics per page and mean.

    PYTHONPATH=src python benchmarks/text_blocks_eval.py [--gt ../shared/eval/nzz] --cache /tmp/tl_cache

DB line detection (the slow part, ~1 s/page) runs once per page and is cached as .npy under
--cache, so grouping changes re-measure in seconds. Ground truth is read at run time, never
copied. Metrics are newsbag.evaluate's (iou_f1, region_recall, xcol, pixel_f1, ...).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "runners"))

import text_lines  # noqa: E402

from newsbag.evaluate import evaluate_page_class  # noqa: E402

COLUMNS = ("iou_f1", "region_recall", "xcol", "pixel_f1", "over_merge", "n_pred", "n_gt")


def _params() -> dict:
    tool = json.loads((Path(text_lines.__file__).with_suffix(".tool.json")).read_text())
    return {name: spec["default"] for name, spec in tool["parameters"].items()}


def page_lines(detector, image: Path, cache: Path | None) -> np.ndarray:
    """(N, 5) line xyxy + score of one page, from the cache when present."""
    path = cache / f"{image.stem}.npy" if cache else None
    if path is not None and path.exists():
        return np.load(path)
    regions = detector.detect(str(image), {})
    arr = np.array([r["bbox_xyxy"] + [r["score"]] for r in regions], dtype=float).reshape(-1, 5)
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        np.save(path, arr)
    return arr


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gt", type=Path, default=Path(__file__).resolve().parents[2] / "shared" / "eval" / "nzz")
    ap.add_argument("--cache", type=Path, default=None, help="directory for cached DB lines")
    ap.add_argument("--per-page", action="store_true")
    args = ap.parse_args()
    params = _params()
    detector = text_lines.TextLinesDetector({**params, "group": False}, "cpu", True)
    rows, t_group = [], 0.0
    for ann_path in sorted((args.gt / "annotations").glob("*.json")):
        ann = json.loads(ann_path.read_text())
        lines = page_lines(detector, args.gt / ann["image"], args.cache)
        t0 = time.perf_counter()
        blocks, _ = text_lines.lines_to_blocks(lines[:, :4], lines[:, 4], params["gap_factor"])
        t_group += time.perf_counter() - t0
        gt = np.array([r["bbox_xyxy"] for r in ann["regions"] if r["label"] == "text"], float).reshape(-1, 4)
        m = evaluate_page_class(blocks, gt, ann["width"], ann["height"])
        rows.append([m[k] for k in COLUMNS])
        if args.per_page:
            print(ann["page_id"], " ".join(f"{k}={m[k]:.3f}" for k in COLUMNS))
    mean = np.nanmean(np.array(rows), axis=0)
    print(f"pages={len(rows)} group_s/page={t_group / max(len(rows), 1):.3f}")
    print("\t".join(COLUMNS))
    print("\t".join(f"{v:.3f}" for v in mean))


if __name__ == "__main__":
    main()
