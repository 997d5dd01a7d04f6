"""Fixtures for the review tests: a tiny synthetic run directory (2 sources, 1 fused variant, 3 pages).

Not a conftest.py: test modules import `from conftest import ...` and a second conftest
module would shadow tests/conftest.py in sys.modules.
"""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from PIL import Image

from nbtest import write_manifest

W, H = 240, 160
# Per page: boxes of source a/x, of source b/y and of fused v1 (None = broken JSON).
# p1: both sources agree; p2: they disagree completely; p3: its fused page is broken JSON
# (the board fails; a broken *source* page is only dropped from its board).
BOX_A = [10, 10, 110, 150]
BOX_B_FAR = [130, 10, 230, 150]
PAGES = {
    "p1": {"a/x": [BOX_A], "b/y": [BOX_A], "fusion/v1": [BOX_A]},
    "p2": {"a/x": [BOX_A], "b/y": [BOX_B_FAR], "fusion/v1": [BOX_A]},
    "p3": {"a/x": [BOX_A], "b/y": [BOX_A], "fusion/v1": None},
}


def page_json(page_id: str, stage: str, variant: str, boxes: list, label: str = "text") -> dict:
    return {
        "page_id": page_id, "image": {"path": f"images/{page_id}.png", "width": W, "height": H},
        "source": {"stage": stage, "variant": variant, "family": stage},
        "regions": [{"bbox_xyxy": b, "label": label, "class": label, "score": 0.9, "order": None, "text": None}
                    for b in boxes],
        "seconds": 0.01,
    }


def write_page_image(path: Path) -> None:
    """A white page with dark 'text' bars, so boards look like a page."""
    arr = np.full((H, W, 3), 250, np.uint8)
    for y in range(16, H - 10, 8):
        arr[y:y + 4, 14:106] = 40
        arr[y:y + 4, 134:226] = 40
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(arr).save(path)


def build_run(root: Path, pages: dict = PAGES, summary: dict | None = None) -> Path:
    run = root / "run"
    manifest = []
    for page_id, outputs in pages.items():
        image = run / "images" / f"{page_id}.png"
        write_page_image(image)
        manifest.append({"page_id": page_id, "path": f"images/{page_id}.png", "image_path": str(image),
                         "width": W, "height": H, "sha256": ""})
        for name, boxes in outputs.items():
            stage, variant = name.split("/")
            folder = run / "outputs" / ("fusion" if stage == "fusion" else f"sources/{stage}") / variant
            folder.mkdir(parents=True, exist_ok=True)
            if boxes is None:
                (folder / f"{page_id}.json").write_text('{"page_id": "' + page_id + '", "regions": [')
            else:
                (folder / f"{page_id}.json").write_text(json.dumps(page_json(page_id, stage, variant, boxes)))
    write_manifest(run, manifest)
    summary = {"recommended_variant": "v1"} if summary is None else summary
    if summary:
        (run / "outputs" / "fusion" / "summary.json").write_text(json.dumps(summary))
    for kind in ("variant", "source"):
        write_tsv(run / "outputs" / "fusion" / f"{kind}_leaderboard.tsv", summary.get(f"{kind}_leaderboard", []))
    return run


def write_evaluation(run: Path, measures: dict[str, dict[str, float]], scores: dict[str, dict[str, float]],
                     gt: dict[str, list]) -> None:
    """What `newsbag evaluate` and fusion leave for the gallery: outputs/evaluation/{summary.json,
    per_page.tsv (page_id, name, kind, iou_f1), gt/<page_id>.json} and fusion's per-page tables
    with the no-GT `score` (`measures` and `scores`: {page_id: {name: value}}, sources named
    stage/variant; `gt`: {page_id: [[x0, y0, x1, y1, class], ...]})."""
    kind = lambda name: "source" if "/" in name else "variant"  # noqa: E731
    folder = run / "outputs" / "evaluation"
    (folder / "gt").mkdir(parents=True, exist_ok=True)
    (folder / "summary.json").write_text(json.dumps({"measure": "iou_f1", "class": "text"}))
    write_tsv(folder / "per_page.tsv", [{"page_id": p, "name": n, "kind": kind(n), "iou_f1": v}
                                        for p, by in measures.items() for n, v in by.items()])
    for page_id, regions in gt.items():
        (folder / "gt" / f"{page_id}.json").write_text(json.dumps({
            "page_id": page_id, "image": {"width": W * 2, "height": H * 2},   # GT in its own image's pixels
            "regions": [{"bbox_xyxy": r[:4], "class": r[4]} for r in regions]}))
    fusion = run / "outputs" / "fusion"
    for k, file in (("variant", "per_page_variant_metrics.tsv"), ("source", "per_page_source_metrics.tsv")):
        write_tsv(fusion / file, [{"page_id": p, "name": n, "n_regions": 3, "score": v}
                                  for p, by in scores.items() for n, v in by.items() if kind(n) == k])


def write_tsv(path: Path, rows: list[dict]) -> None:
    """`rows` as a TSV with the union of their keys as header (nothing when there are none)."""
    if not rows:
        return
    header = list(dict.fromkeys(k for r in rows for k in r))
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\t".join(header) + "\n" + "".join(
        "\t".join("" if r.get(k) is None else str(r[k]) for k in header) + "\n" for r in rows))


@pytest.fixture
def review_run(tmp_path) -> Path:
    return build_run(tmp_path)


@pytest.fixture
def run_kit(tmp_path) -> SimpleNamespace:
    """The builder and its constants, for tests that vary the synthetic run."""
    return SimpleNamespace(build=lambda **kw: build_run(tmp_path, **kw), pages=PAGES, box_a=BOX_A,
                           box_b_far=BOX_B_FAR, width=W, height=H, page_json=page_json,
                           write_evaluation=write_evaluation)
