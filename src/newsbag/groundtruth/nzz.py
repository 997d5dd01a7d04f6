"""The nzz ground-truth format: a folder with ``annotations/*.json``, one page each
({"page_id", "image", "width", "height", "regions": [{"bbox_xyxy", "label", "order"?, "text"?, "lines"?}]})."""

from __future__ import annotations

import math
import posixpath
from pathlib import Path

from ..io import read_json
from .labels import label_for
from .model import GtError, GtPage, check_count, check_size, gt_page

__all__ = ["read_nzz_annotation", "ANNOTATIONS"]

ANNOTATIONS = "annotations"


def _is_number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def _check(ann) -> None:
    """Every field evaluation reads, checked: one line saying what is wrong."""
    if not isinstance(ann, dict):
        raise GtError(f"expected a JSON object, got {type(ann).__name__}")
    for key in ("width", "height"):
        if not (_is_number(ann.get(key)) and ann[key] > 0):
            raise GtError(f"{key} must be a positive number, got {ann.get(key)!r}")
    if not isinstance(ann.get("regions"), list):
        raise GtError(f"regions must be a list, got {ann.get('regions')!r}")
    check_count(len(ann["regions"]))
    for k, region in enumerate(ann["regions"]):
        region = region if isinstance(region, dict) else {}
        box = region.get("bbox_xyxy")
        if not (isinstance(box, list) and len(box) == 4 and all(map(_is_number, box))
                and box[0] <= box[2] and box[1] <= box[3]):
            raise GtError(f"region {k}: bbox_xyxy must be 4 finite numbers with x0 <= x1 and y0 <= y1, got {box!r}")
        if not isinstance(region.get("label"), str):
            raise GtError(f"region {k}: label must be a string, got {region.get('label')!r}")
        order = region.get("order")
        if order is not None and not (isinstance(order, int) and not isinstance(order, bool)):
            raise GtError(f"region {k}: order must be an integer or null, got {order!r}")
        if not isinstance(region.get("text"), (str, type(None))):
            raise GtError(f"region {k}: text must be a string or null, got {region.get('text')!r}")


def read_nzz_annotation(path: Path) -> GtPage:
    """The `GtPage` of one nzz annotation: its name is the file name; its image, which the file names
    relative to the folder holding ``annotations/``, relative to ``annotations/`` (``../images/...``).
    A label the table does not know is ``unknown``.

    Raises:
        GtError: one line saying what is wrong (not JSON, a field missing or bad, over the limits).
    """
    check_size(path)
    try:
        ann = read_json(path)
    except ValueError as exc:
        raise GtError(str(exc).splitlines()[0] if str(exc) else "not JSON") from None
    _check(ann)
    regions = [{"bbox_xyxy": r["bbox_xyxy"], "label": label_for(None, r["label"]) or "unknown", "raw": r["label"],
                "order": r.get("order"), "text": r.get("text"), "lines": r.get("lines") if isinstance(r.get("lines"), list) else []} for r in ann["regions"]]
    page_id = ann.get("page_id") if isinstance(ann.get("page_id"), str) else None
    image = str(ann.get("image", "")).replace("\\", "/")   # relative to the folder holding annotations/
    if image and not posixpath.isabs(image):
        image = posixpath.normpath(posixpath.join("..", image))
    return gt_page(path.name, image, ann["width"], ann["height"], regions, page_id=page_id,
                   where=path)
