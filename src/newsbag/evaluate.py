"""Score sources and fusion variants of a run against region ground truth (`newsbag.groundtruth`).

Writes RUN/outputs/evaluation/ (`run_evaluate`): a leaderboard of variants and one of
sources, one row per (name, class) with metrics averaged over the pages whose ground truth
has that class, ranked by text ``iou_f1`` (`columns.EVAL_MEASURE`); what each column means is
declared in `newsbag.columns`:

- pixel_p/r/f1: the union of predicted vs ground-truth regions, rasterised at long side 1024;
- region_recall (b1): share of GT regions >= 50% covered by the predicted union;
- region_precision: share of predictions >= 50% inside the GT union dilated by 1% of the
  page width;
- iou_f1: one-to-one matching at IoU >= 0.5 (granularity);
- over_merge: mean number of GT centres inside a prediction that holds at least one;
- xcol: share of predictions holding the centres of two side-by-side GT regions (x ranges
  disjoint, y ranges overlapping); b1x: region_recall without those predictions.
Region recall and precision alone reward a whole-page box; read them with over_merge,
xcol and b1x. A page with no output from a source counts as empty predictions.
Classes: text (text, title and text lines), image, table: the coarse class of a predicted region's
label, and of a ground-truth region's type through the ground truth's label table
(`groundtruth.labels`); other regions (separators, headers, ...) are not scored. Run pages match
ground-truth pages as `groundtruth.match_pages` says (same image file, same page id, the longest
common tail of their paths, or of those paths without extensions for PAGE, ALTO and COCO; never
a name two pages share); ground truth drawn on an image of another aspect ratio is left out.
"""

from __future__ import annotations

import heapq
import logging
import math
from pathlib import Path

import numpy as np

from . import __version__, labels, manifest, rundir
from .errors import InputError
from .fusion.metrics import iou_f1, pixel_prf, union_mask
from .groundtruth import GtPage, gt_root, match_pages
from .rundir import discover_sources
from .columns import COLUMN, COLUMNS, EVAL_COLUMNS, EVAL_MEASURE, EVAL_MEASURE_CLASS, EVAL_PER_PAGE_COLUMNS
from .io import atomic_text_file, atomic_write_text, write_json
from .page_reader import read_page
from .progress import track
from .tables import aligned_lines, number_cell, tsv_text, tsv_writer

__all__ = ["evaluate_page_class", "held_centres", "eval_classes", "gt_layer", "gt_scale", "match_pages", "page_metrics_by_class",
           "run_evaluate", "format_summary", "EVAL_KEYS", "PRED_CLASS"]

LONG_SIDE = 1024
EVAL_KEYS = ("pixel_p", "pixel_r", "pixel_f1", "region_recall", "region_precision", "iou_f1",
             "over_merge", "xcol", "b1x", "n_pred", "n_gt")
PRED_CLASS = {"text": "text", "title": "text", "line": "text", "image": "image", "table": "table"}
_NAMED = 5   # unmatched ground-truth pages named in the warning
CLASSES = ("text", "image", "table")

log = logging.getLogger(__name__)


def _rect_share(mask: np.ndarray, xyxy: np.ndarray, s: float) -> np.ndarray:
    """(N,) share of each box's raster pixels (at scale s) that are set in `mask`."""
    h, w = mask.shape
    sat = np.zeros((h + 1, w + 1), np.int64)
    sat[1:, 1:] = mask.cumsum(0).cumsum(1)
    c = np.rint(np.asarray(xyxy, float) * s).astype(np.int64)
    x0, y0 = np.clip(c[:, 0], 0, w - 1), np.clip(c[:, 1], 0, h - 1)
    x1, y1 = np.clip(np.maximum(c[:, 2], x0 + 1), 1, w), np.clip(np.maximum(c[:, 3], y0 + 1), 1, h)
    inside = sat[y1, x1] - sat[y0, x1] - sat[y1, x0] + sat[y0, x0]
    return inside / np.maximum((x1 - x0) * (y1 - y0), 1)


def held_centres(pred: np.ndarray, gt: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(P,) how many ground-truth centres each prediction holds (edges included), and (P,) whether
    it holds the centres of two side-by-side regions (x ranges disjoint or touching, y ranges
    overlapping): the over_merge and xcol tests.

    Memory and time grow with the (prediction, held centre) pairs: the (P, G) and (G, G)
    matrices this was computed with took 7 bytes a cell (70 GB for the 100,000 regions a page
    may hold) and, as an int64 product, 12.9 s CPU for 2,000 regions and predictions (5 ms now).

    Args:
        pred: (P, 4), gt: (G, 4) boxes, x0 <= x1 and y0 <= y1.
    """
    import shapely

    from .fusion.geometry import box_tree

    cx, cy = (gt[:, 0] + gt[:, 2]) / 2, (gt[:, 1] + gt[:, 3]) / 2
    # An envelope query is the closed box test: a centre on an edge is held.
    if len(pred) and len(gt):
        ig, ip = box_tree(pred).query(shapely.points(cx, cy))
    else:
        ig = ip = np.zeros(0, np.intp)
    n_in = np.bincount(ip, minlength=len(pred))
    order = np.lexsort((gt[ig, 1], ip))          # by prediction, then by the region's top
    ip, ig = ip[order], ig[order]
    starts = np.flatnonzero(np.r_[True, ip[1:] != ip[:-1]]) if len(ip) else np.zeros(0, np.intp)
    xpred = np.zeros(len(pred), bool)
    for a, b in zip(starts.tolist(), [*starts[1:].tolist(), len(ip)]):
        xpred[ip[a]] = _side_by_side(gt[ig[a:b]].tolist())
    return n_in, xpred


def _side_by_side(boxes: list[list[float]]) -> bool:
    """Whether two of `boxes` (sorted by top) have overlapping y ranges and disjoint x ranges.

    A sweep down the page: after the regions starting at one height are added and those ending
    there dropped, the live ones all overlap in y, and two of them are side by side exactly when
    the smallest right edge is at or left of the largest left edge.
    """
    ends: list = []
    right: list = []
    left: list = []
    live: set[int] = set()
    k = 0
    while k < len(boxes):
        top = boxes[k][1]
        while k < len(boxes) and boxes[k][1] == top:
            x0, _, x1, y1 = boxes[k]
            heapq.heappush(ends, (y1, k))
            heapq.heappush(right, (x1, k))
            heapq.heappush(left, (-x0, k))
            live.add(k)
            k += 1
        while ends and ends[0][0] <= top:
            live.discard(heapq.heappop(ends)[1])
        for heap in (right, left):
            while heap and heap[0][1] not in live:
                heapq.heappop(heap)
        if right and right[0][0] <= -left[0][0]:
            return True
    return False


def evaluate_page_class(pred: np.ndarray, gt: np.ndarray, width: float, height: float,
                        long_side: int = LONG_SIDE) -> dict:
    """Metrics of one page and class (see module docstring).

    Args:
        pred: (P, 4) predicted boxes; gt: (G, 4) ground-truth boxes, page pixels.
        width, height: page size in pixels.

    Returns:
        dict with `EVAL_KEYS`; undefined values are NaN.
    """
    pred = np.asarray(pred, float).reshape(-1, 4)
    gt = np.asarray(gt, float).reshape(-1, 4)
    s = long_side / max(width, height)
    pm = union_mask(pred, width, height, long_side)
    gm = union_mask(gt, width, height, long_side)
    p, r, f = pixel_prf(pm, gm)
    out = {"pixel_p": p, "pixel_r": r, "pixel_f1": f, "n_pred": float(len(pred)), "n_gt": float(len(gt))}
    out["region_recall"] = float(np.mean(_rect_share(pm, gt, s) >= 0.5)) if len(gt) else np.nan
    if len(pred):
        d = 0.01 * width
        dil = union_mask(gt + np.array([-d, -d, d, d]), width, height, long_side)
        out["region_precision"] = float(np.mean(_rect_share(dil, pred, s) >= 0.5))
    else:
        out["region_precision"] = np.nan
    out["iou_f1"] = iou_f1(pred, gt)
    n_in, xpred = held_centres(pred, gt)
    out["over_merge"] = float(n_in[n_in > 0].mean()) if (n_in > 0).any() else np.nan
    out["xcol"] = float(xpred.mean()) if len(pred) else np.nan
    if len(gt):
        pm_x = union_mask(pred[~xpred], width, height, long_side)
        out["b1x"] = float(np.mean(_rect_share(pm_x, gt, s) >= 0.5))
    else:
        out["b1x"] = np.nan
    return out


def _pred_by_class(page: dict | None, sx: float, sy: float) -> dict[str, np.ndarray]:
    out = {c: [] for c in CLASSES}
    for region in (page or {}).get("regions", []):
        cls = PRED_CLASS.get(labels.coarse_for(region.get("class") or "unknown"))
        if cls:
            x0, y0, x1, y1 = region["bbox_xyxy"]
            out[cls].append([x0 * sx, y0 * sy, x1 * sx, y1 * sy])
    return {c: np.asarray(v, float).reshape(-1, 4) for c, v in out.items()}


def eval_classes(gt: GtPage) -> np.ndarray:
    """(N,) the class each ground-truth region is scored in (`CLASSES`), "" for regions not scored."""
    return np.array([PRED_CLASS.get(c, "") for c in gt.coarse], dtype=object).astype(str).reshape(-1)


def _gt_by_class(gt: GtPage) -> dict[str, np.ndarray]:
    cls = eval_classes(gt)
    return {c: gt.xyxy[cls == c] for c in CLASSES}


def _read_page(path: Path, page_id: str) -> dict | None:
    """The page through the contract (lying boxes repaired as for every reader); None if absent."""
    if not path.exists():
        return None
    try:
        return read_page(path, page_id)
    except ValueError as exc:
        raise InputError(f"unreadable page JSON {exc}; rerun the stage that wrote it") from None


def gt_scale(rec: dict, gt: GtPage) -> tuple[float, float]:
    """(x, y) factors from the run page's pixels to the ground truth's."""
    w, h = gt.width, gt.height
    return w / float(rec.get("width") or w), h / float(rec.get("height") or h)


def page_metrics_by_class(folder: Path, rec: dict, gt: GtPage) -> tuple[dict[str, dict], bool]:
    """`evaluate_page_class` of one page of a source or variant folder, per class present in
    its ground truth; and whether the folder had no output for that page."""
    page = _read_page(Path(folder) / f"{rec['page_id']}.json", rec["page_id"])
    pred, truth = _pred_by_class(page, *gt_scale(rec, gt)), _gt_by_class(gt)
    return {c: evaluate_page_class(pred[c], truth[c], gt.width, gt.height) for c in CLASSES if len(truth[c])}, page is None


def gt_layer(rec: dict, gt: GtPage) -> dict:
    """The page's ground-truth regions in the run page's pixels, for the gallery to draw: each
    with the ``class`` it is scored in (text, image, table; other for the rest, e.g. separators)
    and the ground truth's own region type as ``label``."""
    sx, sy = gt_scale(rec, gt)
    boxes = np.round(gt.xyxy / np.array([sx, sy, sx, sy]), 2).tolist()
    return {"page_id": rec["page_id"], "image": {"width": rec.get("width") or gt.width,
                                                  "height": rec.get("height") or gt.height},
            "regions": [{"bbox_xyxy": box, "class": cls or "other", "label": raw}
                        for box, cls, raw in zip(boxes, eval_classes(gt).tolist(), gt.raw.tolist())]}


def _ranked(rows: list[dict]) -> list[dict]:
    """Rows of one kind ranked by `EVAL_MEASURE` within each class (classes in `CLASSES`
    order; ties: pixel_f1, then name). Every name at the class's top value is marked best,
    none where that value is 0: a class nobody finds has no best."""
    out = []
    for c in CLASSES:
        mine = sorted((r for r in rows if r["class"] == c),
                      key=lambda r: tuple(-(r[k] if r[k] is not None else -1.0) for k in (EVAL_MEASURE, "pixel_f1"))
                      + (r["name"],))
        top = mine[0][EVAL_MEASURE] if mine else None
        for k, r in enumerate(mine, 1):
            out.append({"rank": k, "best": "yes" if top and r[EVAL_MEASURE] == top else "", **r})
    return out


def _best(rows: list[dict]) -> str | None:
    return next((r["name"] for r in rows if r["best"] and r["class"] == EVAL_MEASURE_CLASS), None)


def run_evaluate(run_dir: Path, gt_dir: Path) -> dict:
    """Evaluate every source and fusion variant of `run_dir` against the ground truth at `gt_dir`
    (a folder or a COCO file, `groundtruth.read_ground_truth`); write
    RUN/outputs/evaluation/: variant_leaderboard.tsv and source_leaderboard.tsv (ranked by
    `EVAL_MEASURE` within each class, `columns.EVAL_COLUMNS`), per_page.tsv (the measure per
    page, name and kind), gt/<page_id>.json (`gt_layer`) and summary.json.

    Returns:
        {"pages": matched page count, "unscored": run page ids without ground truth (not in the
        numbers), "unmatched_gt": [...], "bad_gt": {file name: why}, "sources": ranked rows,
        "variants": ranked rows, "best_variant", "best_source", "recommended_variant" (fusion's),
        "recommended_rank" (its text rank here, None when not evaluated), "written": [paths]}; ground
        truth is named relative to `groundtruth.gt_root`.

    Raises:
        InputError: missing manifest or ground truth, or no page matches.
    """
    run_dir, gt_dir = Path(run_dir), Path(gt_dir)
    matched, unmatched, bad = match_pages(run_dir, gt_dir)
    for name, why in bad.items():
        log.warning("evaluate: ground truth %s: %s; skipped", gt_root(gt_dir) / name, why)
    if unmatched:   # one line, not one per file: ground truth of a whole collection against a few pages is common
        shown = ", ".join(unmatched[:_NAMED])
        log.warning("evaluate: %d ground-truth page(s) in %s match no run page (by the image they name, page id, "
                    "path, or file name without extension), skipped: %s%s", len(unmatched), gt_root(gt_dir), shown,
                    f" and {len(unmatched) - _NAMED} more" if len(unmatched) > _NAMED else "")
    out = rundir.evaluation_dir(run_dir)
    targets = [("source", s, rundir.sources_root(run_dir) / s) for s in discover_sources(run_dir)]
    targets += [("variant", v, rundir.fused_dir(run_dir, v)) for v in rundir.discover_fused(run_dir)]
    acc: dict[tuple, list[dict]] = {(kind, name, c): [] for kind, name, _ in targets for c in CLASSES}
    missing = dict.fromkeys(((kind, name) for kind, name, _ in targets), 0)
    log.info("evaluate: %d page(s) x %d source(s)/variant(s) against ground truth", len(matched), len(targets))
    # One step per page and name: a plain line every 50 of them or 60 s (a page alone is ~10 names).
    with track("evaluate", len(matched) * len(targets)) as tracker, atomic_text_file(out / "per_page.tsv") as fh:
        write = tsv_writer(fh, list(EVAL_PER_PAGE_COLUMNS))
        for rec, gt in matched:
            write_json(out / "gt" / f"{rec['page_id']}.json", gt_layer(rec, gt), durable=False)
            for kind, name, folder in targets:
                by_class, absent = page_metrics_by_class(folder, rec, gt)
                missing[(kind, name)] += absent
                for c, m in by_class.items():
                    acc[(kind, name, c)].append(m)
                value = by_class.get(EVAL_MEASURE_CLASS, {}).get(EVAL_MEASURE)
                write({"page_id": rec["page_id"], "name": name, "kind": kind,
                       EVAL_MEASURE: None if value is None or math.isnan(value) else value})
                tracker.advance("ok")
    rows = {"source": [], "variant": []}
    for (kind, name, c), measured in acc.items():
        if not measured:
            continue
        row = {"kind": kind, "name": name, "class": c, "n_pages": len(measured), "n_missing": missing[(kind, name)]}
        for k in EVAL_KEYS:
            vals = [m[k] for m in measured if not np.isnan(m[k])]
            row[k] = float(np.mean(vals)) if vals else None
        rows[kind].append(row)
    sources, variants = _ranked(rows["source"]), _ranked(rows["variant"])
    written = [out / "variant_leaderboard.tsv", out / "source_leaderboard.tsv", out / "per_page.tsv",
               out / "summary.json"]
    atomic_write_text(written[0], tsv_text(variants, list(EVAL_COLUMNS)))
    atomic_write_text(written[1], tsv_text(sources, list(EVAL_COLUMNS)))
    scored = {rec["page_id"] for rec, _ in matched}
    for layer in (out / "gt").glob("*.json"):   # pages an earlier call had ground truth for
        if layer.name[:-len(".json")] not in scored:
            layer.unlink()
    recommended = rundir.recommended_variant(run_dir)
    result = {"pages": len(matched), "unscored": [p for p in manifest.manifest_page_ids(run_dir) if p not in scored],
              "unmatched_gt": unmatched, "bad_gt": bad, "best_variant": _best(variants), "best_source": _best(sources),
              "recommended_variant": recommended,
              "recommended_rank": next((r["rank"] for r in variants if r["name"] == recommended
                                        and r["class"] == EVAL_MEASURE_CLASS), None)}
    write_json(written[3], {"tool": f"newsbag {__version__}", "gt_dir": str(gt_dir.resolve()), **result,
                            "measure": EVAL_MEASURE, "measure_class": EVAL_MEASURE_CLASS,
                            "unscored": len(result["unscored"])})
    return {**result, "sources": sources, "variants": variants, "written": [str(p) for p in written]}


SUMMARY_KEYS = ("pixel_f1", "b1x", "xcol", "over_merge", "n_pred")


def format_summary(result: dict) -> str:
    """The ranked rows of `run_evaluate` as aligned tables, variants then sources, and what
    each printed column means (`columns.COLUMNS`)."""
    head = ["rank", "name", "best", EVAL_MEASURE, "class", *SUMMARY_KEYS]
    lines = []
    for kind in ("variants", "sources"):
        if not result[kind]:
            continue
        lines.append(f"{kind}, ranked by {EVAL_MEASURE_CLASS} {EVAL_MEASURE} ({COLUMN[EVAL_MEASURE].direction}; "
                     "best marked yes):")
        lines += aligned_lines([head, *([str(r["rank"]), r["name"], r["best"] or "-", number_cell(r[EVAL_MEASURE]),
                                         r["class"], *(number_cell(r[k]) for k in SUMMARY_KEYS)] for r in result[kind])])
    if result.get("recommended_rank"):
        n = sum(r["class"] == EVAL_MEASURE_CLASS for r in result["variants"])
        lines.append(f"recommended variant {result['recommended_variant']}: rank {result['recommended_rank']} of {n} "
                     f"by {EVAL_MEASURE_CLASS} {EVAL_MEASURE} (best: {result['best_variant']})")
    lines += [f"  {c.name}: {c.meaning}" + (f" ({c.direction})" if c.direction else "")
              for c in COLUMNS if c.name in (EVAL_MEASURE, *SUMMARY_KEYS)]
    return "\n".join(lines)

