"""COCO ground truth: one JSON file of images, annotations (bbox ``[x, y, w, h]``) and categories,
each image one page."""

from __future__ import annotations

import logging
import math
from pathlib import Path

from ..io import read_json
from .labels import label_for
from .model import GtError, GtPage, check_count, check_size, gt_page
from .xmlfiles import image_path

__all__ = ["read_coco", "is_coco"]

log = logging.getLogger(__name__)


def is_coco(data) -> bool:
    """Whether parsed JSON is a COCO dataset (its images, annotations and categories lists)."""
    return isinstance(data, dict) and all(isinstance(data.get(k), list) for k in ("images", "annotations", "categories"))


def _finite(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def _region(ann: dict, categories: dict, unknown: set) -> dict:
    box = ann.get("bbox")
    if not (isinstance(box, list) and len(box) == 4 and all(map(_finite, box)) and box[2] >= 0 and box[3] >= 0):
        raise GtError(f"annotation {ann.get('id')!r}: bbox must be 4 finite numbers [x, y, w, h], w and h >= 0, "
                      f"got {box!r}")
    name = categories.get(ann.get("category_id"))
    if name is None:
        raise GtError(f"annotation {ann.get('id')!r}: category_id {ann.get('category_id')!r} is not in categories")
    label = label_for(None, name)
    if label is None:
        unknown.add(name)
    order = ann.get("order")
    x, y, w, h = box
    return {"bbox_xyxy": [x, y, x + w, y + h], "label": label or "unknown", "raw": name,
            "order": order if isinstance(order, int) and not isinstance(order, bool) and order >= 0 else None}


def _page(root: Path, path: Path, image: dict, anns: list, categories: dict, unknown: set) -> GtPage:
    file_name = image.get("file_name")
    if not isinstance(file_name, str) or not file_name:
        raise GtError(f"image id {image.get('id')!r} has no file_name")
    check_count(len(anns))
    regions = [_region(a, categories, unknown) for a in anns]
    name = f"{path.relative_to(root).as_posix()}:{file_name}"
    rel = image_path(root, path, file_name)
    page_id = image.get("page_id") if isinstance(image.get("page_id"), str) else None
    return gt_page(name, rel, image.get("width"), image.get("height"), regions, page_id=page_id,
                   stem_path=rel.rsplit(".", 1)[0] if "." in rel.rsplit("/", 1)[-1] else rel, where=path)


def read_coco(root: Path, path: Path, data=None) -> tuple[list[GtPage], dict[str, str]]:
    """The pages of the COCO file at `path` (`data`: its parsed JSON, if read already) and the
    images that cannot be used (``file:file_name`` -> why), each left out alone.

    Raises:
        GtError: the file is not a COCO dataset.
    """
    if data is None:
        check_size(path)
        data = read_json(path)
    if not is_coco(data):
        raise GtError("not a COCO file (expected images, annotations and categories lists)")
    categories = {c.get("id"): str(c.get("name")) for c in data["categories"] if isinstance(c, dict)}
    by_image: dict = {}
    for ann in data["annotations"]:
        if isinstance(ann, dict):
            by_image.setdefault(ann.get("image_id"), []).append(ann)
    pages, problems, unknown = [], {}, set()
    rel = path.relative_to(root).as_posix()
    for k, image in enumerate(data["images"]):
        image = image if isinstance(image, dict) else {}
        try:
            pages.append(_page(root, path, image, by_image.get(image.get("id"), []), categories, unknown))
        except GtError as exc:
            problems[f"{rel}:{image.get('file_name') or f'images[{k}]'}"] = str(exc)
    if unknown:
        log.warning("evaluate: ground truth %s: categories not in the label table, read as unknown (not scored): %s",
                    rel, ", ".join(sorted(unknown)))
    return pages, problems
