"""PAGE-XML ground truth (any schema version: 2010, 2013, 2019), as Transkribus, eScriptorium,
Aletheia and OCR-D write it: one page per file, its top-level regions with their polygons'
bounding boxes, reading order, and text (TextLine TextEquiv, else the region's own)."""

from __future__ import annotations

import re
from pathlib import Path

from .labels import label_for
from .model import GtError, GtPage, check_count, gt_page
from .xmlfiles import children, image_path, local, stem_path

__all__ = ["read_page_xml", "points_xyxy"]

_STRUCTURE = re.compile(r"structure\s*\{[^}]*?\btype\s*:\s*([^;}\s]+)")
_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")


def points_xyxy(points: str | None) -> list[float] | None:
    """The bounding box [x0, y0, x1, y1] of a PAGE ``points`` string ("x,y x,y ..."); None without two numbers."""
    values = [float(v) for v in _NUMBER.findall(points or "")]
    if len(values) < 2 or len(values) % 2:
        return None
    xs, ys = values[0::2], values[1::2]
    return [min(xs), min(ys), max(xs), max(ys)]


def _coords(el) -> list[float] | None:
    coords = children(el, "Coords")
    return points_xyxy(coords[0].get("points")) if coords else None


def _unicode(el) -> str | None:
    """The text of an element's first TextEquiv (its Unicode), None without one."""
    for equiv in children(el, "TextEquiv"):
        for uni in children(equiv, "Unicode"):
            return uni.text or ""
    return None


def _order(page) -> dict[str, int]:
    """Region id -> position in the page's reading order (groups flattened, indexed children by @index)."""
    found: list[str] = []

    def walk(group) -> None:
        items = [c for c in group if local(c)]
        if any(c.get("index") is not None for c in items):
            items.sort(key=lambda c: int(c.get("index")) if (c.get("index") or "").lstrip("-").isdigit() else 0)
        for c in items:
            if c.get("regionRef"):
                found.append(c.get("regionRef"))
            walk(c)

    for ro in children(page, "ReadingOrder"):
        walk(ro)
    return {ref: k for k, ref in reversed(list(enumerate(found)))}


def _region(el, order: dict[str, int]) -> dict | None:
    element = local(el)
    structure = _STRUCTURE.search(el.get("custom") or "")
    kind = structure.group(1) if structure else el.get("type")
    label = label_for(element, kind)
    box = _coords(el)
    if label is None or box is None:
        return None
    lines = [{"bbox_xyxy": lb, "text": _unicode(ln) or ""} for ln in children(el, "TextLine")
             if (lb := _coords(ln)) is not None and _unicode(ln) is not None]
    text = "\n".join(ln["text"] for ln in lines) if lines else _unicode(el)
    return {"bbox_xyxy": box, "label": label, "raw": f"{element}/{kind}" if kind else element,
            "order": order.get(el.get("id")), "text": text, "lines": lines}


def read_page_xml(root_dir: Path, path: Path, root) -> GtPage:
    """The `GtPage` of one parsed PAGE-XML document (`root`, its PcGts element).

    Raises:
        GtError: no Page element, or its size missing.
    """
    pages = children(root, "Page")
    if not pages:
        raise GtError("PAGE-XML without a Page element")
    page = pages[0]
    width, height = (_number(page.get(k)) for k in ("imageWidth", "imageHeight"))
    check_count(sum(local(el).endswith("Region") for el in page))
    order = _order(page)
    regions = [r for el in page if local(el).endswith("Region") and (r := _region(el, order))]
    return gt_page(path.relative_to(root_dir).as_posix(), image_path(root_dir, path, page.get("imageFilename") or ""),
                   width, height, regions, stem_path=stem_path(root_dir, path), where=path)


def _number(text: str | None):
    try:
        return float(text) if text is not None else None
    except ValueError:
        return text
