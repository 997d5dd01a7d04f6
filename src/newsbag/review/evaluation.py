"""RUN/review/evaluation.js: what `newsbag evaluate` found, for the gallery (its GT-vs-score plot,
ranking and ground-truth layer).

The gallery loads it with a <script> tag when it opens (file:// allows that, not fetch()), so
`evaluate` and `review` each rewrite this one file and the gallery shows the latest evaluation
without index.html or any page being drawn again.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from .. import rundir
from ..io import atomic_write_text, read_json
from .reading import number, tsv_rows

__all__ = ["EVALUATION_JS", "evaluation_data", "write_evaluation_data"]

EVALUATION_JS = "evaluation.js"
_KEYS = ("page_id", "name", "kind")


def _gt_page(path: Path) -> dict | None:
    """One page's ground truth as {"width", "height", "regions": [[x0, y0, x1, y1, class, label]]} in the
    pixels of its "image" size (the label is the annotation's own where evaluate kept it, else the
    class); None when unreadable."""
    try:
        gt = read_json(path)
        return {"width": gt["image"]["width"], "height": gt["image"]["height"],
                "regions": [[*map(float, r["bbox_xyxy"]), str(r["class"]), str(r.get("label", r["class"]))]
                            for r in gt["regions"]]}
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _layout_scores(run_dir: Path, pages: set[str]) -> dict[str, dict[str, float]]:
    """{page_id: {name: no-GT layout score}} of the evaluated pages, from fusion's per-page tables."""
    out: dict[str, dict[str, float]] = {}
    for file in ("per_page_variant_metrics.tsv", "per_page_source_metrics.tsv"):
        for row in tsv_rows(rundir.fusion_dir(run_dir) / file):
            value = number(row.get("score"))
            if row.get("page_id") in pages and isinstance(value, (int, float)):
                out.setdefault(row["page_id"], {})[row["name"]] = float(value)
    return out


def _tuning(run_dir: Path) -> dict | None:
    """What the last `newsbag tune` decided, for the gallery: its one-line verdict, the held-out
    gain and interval, each fold's held-out scores, and the ``line`` the gallery shows; None
    when tune has not run."""
    try:
        found = read_json(rundir.tuning_dir(run_dir) / "summary.json")
        folds = [{k: f[k] for k in ("fold", "test_pages", "tuned_iou_f1", "current_iou_f1")} for f in found["folds"]]
        line = (f"newsbag tune: {found['verdict']}. Held-out folds (text IoU-F1, tuned vs current): "
                + "; ".join(f"fold {f['fold']}, {f['test_pages']} pages: {f['tuned_iou_f1']:.3f} vs "
                            f"{f['current_iou_f1']:.3f}" for f in folds) + ".")
        return {"verdict": str(found["verdict"]), "gain": found["gain"], "pages": found["pages"],
                "adopted": bool(found["adopted"]), "folds": folds, "line": line}
    except (OSError, ValueError, KeyError, TypeError):
        return None


def evaluation_data(run_dir: Path) -> dict | None:
    """The evaluation as the gallery reads it; None when evaluate has not run (no per_page.tsv).

    Returns:
        {"measure": the GT measure's column name, "kinds": {name: variant|source}, "pages": {page_id:
        {name: GT measure}}, "scores": {page_id: {name: no-GT score}}, "gt": {page_id: ground truth},
        "tuning": the last `newsbag tune`'s verdict, gain and folds, or None}.
    """
    folder = rundir.evaluation_dir(run_dir)
    measure, pages, kinds = None, {}, {}
    for row in tsv_rows(folder / "per_page.tsv"):
        measure = measure or next((k for k in row if k not in _KEYS), None)
        value = number(row.get(measure)) if measure else None
        kinds[row["name"]] = row.get("kind")
        pages.setdefault(row["page_id"], {})[row["name"]] = value if isinstance(value, (int, float)) else None
    if measure is None:
        return None
    gt = {}
    for page_id in pages:
        found = _gt_page(folder / "gt" / f"{page_id}.json")
        if found is not None:
            gt[page_id] = found
    return {"measure": measure, "kinds": kinds, "pages": pages, "scores": _layout_scores(run_dir, set(pages)),
            "gt": gt, "tuning": _tuning(run_dir)}


def write_evaluation_data(run_dir: Path) -> Path | None:
    """Write RUN/review/evaluation.js from RUN/outputs/evaluation, or remove it when there is none
    (an evaluation deleted must not live on in the gallery). Nothing while the run has no
    review folder: `newsbag review` writes it with the gallery.

    Returns:
        The path written, None when nothing was.
    """
    if not rundir.review_dir(run_dir).is_dir():
        return None
    out = rundir.review_dir(run_dir) / EVALUATION_JS
    data = evaluation_data(run_dir)
    if data is None:
        try:
            os.remove(out)
        except FileNotFoundError:
            pass
        return None
    text = json.dumps(data, ensure_ascii=False, separators=(",", ":")).replace("</", "<\\/")
    atomic_write_text(out, f"newsbagEvaluation({text});\n", keep_same=True)
    return out
