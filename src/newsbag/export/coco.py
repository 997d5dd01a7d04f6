"""COCO writer: one detection dataset per exported layer, one category per canonical label."""

from __future__ import annotations

import functools
import hashlib
import json
import shutil
import tempfile
from pathlib import Path
from typing import Callable, Iterable, Iterator

from ..io import atomic_text_file
from ..labels import CANONICAL, LABELS
from .layout import ExportInfo, page_regions

__all__ = ["CATEGORIES", "FILE_END", "coco_dataset", "coco_entries", "image_id_for", "write_coco"]

# Category id = position in labels.LABELS + 1 (COCO ids start at 1); the coarse class is the
# supercategory.
CATEGORIES: list[dict] = [{"id": k + 1, "name": name, "supercategory": CANONICAL[name]}
                          for k, name in enumerate(LABELS)]
_CATEGORY_ID = {c["name"]: c["id"] for c in CATEGORIES}
_dumps = functools.partial(json.dumps, ensure_ascii=False, separators=(",", ":"))
_COPY_CHUNK = 1 << 20
# How every file `write_coco` writes ends: a file without it was cut short.
FILE_END = f'],"categories":{_dumps(CATEGORIES)}}}\n'.encode()


def image_id_for(page_id: str) -> int:
    """COCO image id of a page: the first 52 bits of sha256(page_id).

    Stable across reruns, subsets and reorderings of the manifest (it depends on the page id
    only), and below 2**53 so every JSON reader keeps it exact.
    """
    return int(hashlib.sha256(page_id.encode("utf-8")).hexdigest()[:13], 16)


def coco_entries(pages: Iterable[tuple[dict, str]]) -> Iterator[tuple[dict, list[dict]]]:
    """The COCO image of each page of `pages` ((page dict, image file name) pairs, in manifest
    order) and its annotations, one page at a time; annotation ids run on across pages from 1.

    Boxes are ``[x, y, w, h]`` in original image pixels. Each annotation keeps ``score``
    (1.0 and ``score_missing`` when the model gave none, so COCOeval can rank it),
    ``raw_label``, ``order`` and, for fused layers, ``support`` and ``members`` (the
    member source names).

    Raises:
        ValueError: two page ids hash to the same image id.
    """
    seen: dict[int, str] = {}
    next_id = 1
    for page, file_name in pages:
        image_id = image_id_for(page["page_id"])
        if image_id in seen:
            raise ValueError(f"COCO image id collision: {seen[image_id]} and {page['page_id']}")
        seen[image_id] = page["page_id"]
        image = {"id": image_id, "file_name": file_name, "width": int(page["image"]["width"]),
                 "height": int(page["image"]["height"]), "page_id": page["page_id"]}
        annotations = []
        for r in page_regions(page):
            x0, y0, x1, y1 = r.xyxy
            w, h = x1 - x0, y1 - y0
            ann = {"id": next_id + len(annotations), "image_id": image_id, "category_id": _CATEGORY_ID[r.cls],
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
        next_id += len(annotations)
        yield image, annotations


def _info(info: ExportInfo) -> dict:
    return {"description": f"newsbag layout {info.layer} ({info.method})", "version": info.tool,
            "date_created": info.created, "newsbag_layer": info.layer, "newsbag_fingerprint": info.fingerprint}


def coco_dataset(pages: Iterable[tuple[dict, str]], info: ExportInfo) -> dict:
    """The COCO dict of `pages` (`coco_entries`) in memory: what the file `write_coco` streams parses to."""
    images, annotations = [], []
    for image, anns in coco_entries(pages):
        images.append(image)
        annotations += anns
    return {"info": _info(info), "licenses": [], "images": images, "annotations": annotations, "categories": CATEGORIES}


def write_coco(path: Path, pages: Iterable[tuple[dict, str]], info: Callable[[], ExportInfo]) -> None:
    """Write the COCO JSON of `pages` to `path` one page at a time, atomically: the bytes of
    `coco_dataset` as compact JSON, without it in memory (a 100k-page layer of ~300 regions
    a page is ~14 GB of JSON; built as one dict and one string it took ~1.2 MB of memory a page).

    Info comes first, so its fingerprint lies in the file's first bytes, and images before
    annotations, as in every COCO file; both lists go to unnamed temp files in the same folder
    while the pages are read, and are copied after `info()`, which is called once every page
    was read (so the provenance can leave out a page the caller could not read).

    Raises:
        ValueError: as `coco_entries`; errors.RunDirError: the disk cannot take the file.
    """
    path = Path(path)
    spill = functools.partial(tempfile.TemporaryFile, "w+", encoding="utf-8", dir=path.parent)
    with atomic_text_file(path) as fh, spill() as images, spill() as annotations:
        image_comma = annotation_comma = ""
        for image, anns in coco_entries(pages):
            images.write(image_comma + _dumps(image))
            image_comma = ","
            if anns:  # one list per page, its brackets cut: the items as json.dumps joins them
                annotations.write(annotation_comma + _dumps(anns)[1:-1])
                annotation_comma = ","
        fh.write(f'{{"info":{_dumps(_info(info()))},"licenses":[],"images":[')
        for part, close in ((images, '],"annotations":['), (annotations, FILE_END.decode())):
            part.seek(0)
            shutil.copyfileobj(part, fh, _COPY_CHUNK)
            fh.write(close)
