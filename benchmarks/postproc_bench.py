"""Runner post-processing at 5,000-20,000 boxes: line grouping, per-class NMS, reading order.

    python benchmarks/postproc_bench.py            # sweep versions, 1k..20k boxes
    python benchmarks/postproc_bench.py --dense    # also the old all-pairs versions up to 5k

Each row: boxes, seconds (best of --repeat), and the traced peak memory of one call.
"""

from __future__ import annotations

import argparse
import sys
import time
import tracemalloc
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO / "runners"), str(REPO / "src"), str(REPO / "tests"), str(Path(__file__).parent)]

import _db  # noqa: E402
import _picodet  # noqa: E402
from _machine import machine_line  # noqa: E402
from newsbag.fusion.order import reading_order  # noqa: E402


def page_lines(n_lines: int, seed: int = 0, n_cols: int = 8, lh: float = 40.0) -> np.ndarray:
    """``n_cols`` columns of 15-line-height-wide text, 40 px lines, the page as tall as the lines need.

    The gutter raster grows with the page area in line heights, so the scaling test keeps
    the column shape and line height fixed and adds lines (a taller page), as a collection does.
    """
    rng = np.random.default_rng(seed)
    per_col = max(1, n_lines // n_cols)
    col_w = 16 * lh
    boxes = []
    for c in range(n_cols):
        left, y = c * col_w + 0.5 * lh, 100.0
        for _ in range(per_col):
            y += 1.2 * lh if rng.random() < 0.08 else 0.0
            x0 = left + (rng.uniform(1, 2) * lh if rng.random() < 0.08 else rng.uniform(-2, 2))
            x1 = left + 15 * lh - (rng.uniform(2, 10) * lh if rng.random() < 0.08 else rng.uniform(-2, 2))
            boxes.append([x0, y, x1, y + lh * rng.uniform(0.95, 1.05)])
            y += lh * 1.05
    xyxy = np.array(boxes)
    across = rng.choice(len(xyxy), len(xyxy) // 50, replace=False)
    xyxy[across, 2] += 5 * lh
    return xyxy


def nms_candidates(n: int, seed: int = 0):
    """``n`` candidates in clusters of 20 (what a lowered score threshold gives), 10 classes."""
    rng = np.random.default_rng(seed)
    k = max(1, n // 20)
    xy = rng.uniform(0, 560, (k, 2))
    base = np.repeat(np.hstack([xy, xy + rng.uniform(5, 200, (k, 2)) * [1, 0.3]]), 20, axis=0)[:n]
    return base + rng.normal(0, 3, base.shape), rng.random(len(base)), np.repeat(rng.integers(0, 10, k), 20)[:n]


def fused_boxes(n: int, seed: int = 0) -> np.ndarray:
    """``n`` paragraph boxes on a grid of columns (the shape a fused page has)."""
    rng = np.random.default_rng(seed)
    cols = max(1, int(np.sqrt(n / 4)))
    k = np.arange(n)
    base = np.stack([k % cols * 100.0, k // cols * 60.0, k % cols * 100.0 + 95, k // cols * 60.0 + 55], 1)
    return base + rng.normal(0, 2, base.shape)


def measure(fn, repeat: int) -> tuple[float, float]:
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    tracemalloc.start()
    fn()
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return best, peak / 1e6


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="1000,5000,10000,20000")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--dense", action="store_true", help="also time the old all-pairs versions (<= 5000 boxes)")
    args = ap.parse_args()
    print(machine_line())
    print(f"{'function':<28}{'boxes':>8}{'seconds':>10}{'peak MB':>10}")
    cases = {
        "_db.group_lines": (lambda n: page_lines(n), lambda x: _db.group_lines(x)),
        "_picodet.nms_per_class": (lambda n: nms_candidates(n), lambda x: _picodet.nms_per_class(*x, 0.5)),
        "order.reading_order": (lambda n: fused_boxes(n), lambda x: reading_order(x, 8000, 11000)),
    }
    if args.dense:
        from reference.dense_db import group_lines_dense
        from reference.dense_nms import nms_per_class_dense
        from reference.recursive_order import reading_order_recursive
        dense = {
            "_db.group_lines": lambda x: group_lines_dense(x),
            "_picodet.nms_per_class": lambda x: nms_per_class_dense(*x, 0.5),
            "order.reading_order": lambda x: reading_order_recursive(x, 8000, 11000),
        }
    for name, (make, fn) in cases.items():
        for n in (int(s) for s in args.sizes.split(",")):
            x = make(n)
            n_boxes = len(x[0]) if isinstance(x, tuple) else len(x)
            sec, peak = measure(lambda: fn(x), args.repeat)
            print(f"{name:<28}{n_boxes:>8}{sec:>10.3f}{peak:>10.1f}", flush=True)
            if args.dense and n <= 5000:
                sec, peak = measure(lambda: dense[name](x), 1)
                print(f"{name + ' (dense, old)':<28}{n_boxes:>8}{sec:>10.3f}{peak:>10.1f}", flush=True)


if __name__ == "__main__":
    main()
