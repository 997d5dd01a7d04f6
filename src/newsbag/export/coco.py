"""COCO writer: one detection dataset per exported layer, one category per canonical label."""

from __future__ import annotations

import hashlib

from ..labels import CANONICAL, LABELS
from .layout import ExportInfo, page_regions

__all__ = ["CATEGORIES", "coco_dataset", "image_id_for"]

# Category id = position in labels.LABELS + 1 (COCO ids start at 1); the coarse class is the
# supercategory.
CATEGORIES: list[dict] = [{"id": k + 1, "name": name, "supercategory": CANONICAL[name]}
                          for k, name in enumerate(LABELS)]
_CATEGORY_ID = {c["name"]: c["id"] for c in CATEGORIES}


def image_id_for(page_id: str) -> int:
    """COCO image id of a page: the first 52 bits of sha256(page_id).

    Stable across reruns, subsets and reorderings of the manifest (it depends on the page id
    only), and below 2**53 so every JSON reader keeps it exact.
    """
    return int(hashlib.sha256(page_id.encode("utf-8")).hexdigest()[:13], 16)


def coco_dataset(pages: list[tuple[dict, str]], info: ExportInfo) -> dict:
    """A COCO dict of `pages` ((page dict, image file name) pairs, in manifest order).

    Boxes are ``[x, y, w, h]`` in original image pixels. Each annotation keeps ``score``
    (1.0 and ``score_missing`` when the model gave none, so COCOeval can rank it),
    ``raw_label``, ``order`` and, for fused layers, ``support`` and ``members`` (the
    member source names).

    Raises:
        ValueError: two page ids hash to the same image id.
    """
    images, annotations, seen = [], [], {}
    for page, file_name in pages:
        image_id = image_id_for(page["page_id"])
        if image_id in seen:
            raise ValueError(f"COCO image id collision: {seen[image_id]} and {page['page_id']}")
        seen[image_id] = page["page_id"]
        images.append({"id": image_id, "file_name": file_name, "width": int(page["image"]["width"]),
                        "height": int(page["image"]["height"]), "page_id": page["page_id"]})
        for r in page_regions(page):
            x0, y0, x1, y1 = r.xyxy
            w, h = x1 - x0, y1 - y0
            ann = {"id": len(annotations) + 1, "image_id": image_id, "category_id": _CATEGORY_ID[r.cls],
                   "bbox": [x0, y0, w, h], "area": w * h, "iscrowd": 0,
                   "segmentation": [[x0, y0, x1, y0, x1, y1, x0, y1]],
                   "score": 1.0 if r.score is None else round(r.score, 4), "raw_label": r.raw_label,
                   "order": r.order, "region_id": r.id}
            if r.score is None:
                ann["score_missing"] = True
            if r.support:
                ann["support"] = list(r.support)
            if r.members:
                ann["members"] = sorted({str(m.get("source")) for m in r.members})
            annotations.append(ann)
    return {
        "info": {"description": f"newsbag layout {info.layer} ({info.method})", "version": info.tool,
                 "date_created": info.created, "newsbag_layer": info.layer, "newsbag_fingerprint": info.fingerprint},
        "licenses": [],
        "images": images,
        "annotations": annotations,
        "categories": CATEGORIES,
    }
