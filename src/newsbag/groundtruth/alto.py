"""ALTO ground truth (v2 to v4): the blocks of a page (TextBlock, Illustration, GraphicalElement;
a ComposedBlock as one region when its type is in the label table, else its blocks), their
reading order and their lines' text."""

from __future__ import annotations

from pathlib import Path

from .labels import CONTAINER, label_for
from .model import GtError, GtPage, check_count, gt_page
from .xmlfiles import children, image_path, local, stem_path

__all__ = ["read_alto", "UNITS"]

# MeasurementUnit values newsbag reads; mm10 and inch1200 are placed on the scan through the page's
# own WIDTH and HEIGHT in those units (scaled to the scan's pixels as any other ground truth).
UNITS = ("pixel", "mm10", "inch1200")
_BLOCKS = ("TextBlock", "Illustration", "GraphicalElement", CONTAINER)


def _float(el, key: str) -> float | None:
    try:
        return float(el.get(key))
    except (TypeError, ValueError):
        return None


def _box(el) -> list[float] | None:
    x, y, w, h = (_float(el, k) for k in ("HPOS", "VPOS", "WIDTH", "HEIGHT"))
    return None if None in (x, y, w, h) else [x, y, x + w, y + h]


def _descendants(el, name: str) -> list:
    return [] if el is None else [d for d in el.iter() if local(d) == name]


def _first(el, *path: str):
    for name in path:
        found = children(el, name) if el is not None else []
        el = found[0] if found else None
    return el


def _lines(block) -> list[dict]:
    out = []
    for line in children(block, "TextLine"):
        box = _box(line)
        if box is not None:
            out.append({"bbox_xyxy": box, "text": " ".join(s.get("CONTENT") or "" for s in children(line, "String"))})
    return out


def _regions(parent, tags: dict[str, str], order: dict[str, int]) -> list[dict]:
    """The regions of `parent`'s blocks (an untyped ComposedBlock's blocks in its place)."""
    out = []
    for el in parent:
        element = local(el)
        if element not in _BLOCKS:
            continue
        kinds = [tags[t] for t in (el.get("TAGREFS") or "").split() if t in tags]
        kind = next((k for k in kinds if label_for(None, k)), el.get("TYPE"))
        label = label_for(element, kind)
        if label is None:   # an untyped ComposedBlock: a container of blocks
            out += _regions(el, tags, order)
            continue
        box = _box(el)
        if box is None:
            continue
        lines = _lines(el) if element == "TextBlock" else []
        out.append({"bbox_xyxy": box, "label": label, "raw": f"{element}/{kind}" if kind else element,
                    "order": order.get(el.get("ID")), "text": "\n".join(ln["text"] for ln in lines) or None,
                    "lines": lines})
    return out


def read_alto(root_dir: Path, path: Path, root) -> GtPage:
    """The `GtPage` of one parsed ALTO document (`root`, its alto element): its first Page.

    Raises:
        GtError: no Page, a unit newsbag cannot place on the scan, or the page size missing.
    """
    measured = _first(root, "Description", "MeasurementUnit")
    unit = ((measured.text or "").strip() if measured is not None else "") or "pixel"
    if unit not in UNITS:
        raise GtError(f"ALTO MeasurementUnit {unit!r}: newsbag reads {', '.join(UNITS)}")
    page = _first(root, "Layout", "Page")
    if page is None:
        raise GtError("ALTO without a Layout/Page element")
    width, height = _float(page, "WIDTH"), _float(page, "HEIGHT")
    if width is None or height is None:
        raise GtError(f"ALTO Page without WIDTH and HEIGHT: regions in {unit} cannot be placed on the scan")
    file_name = _first(root, "Description", "sourceImageInformation", "fileName")
    tags = {t.get("ID"): t.get("LABEL") or "" for t in _descendants(_first(root, "Tags"), "LayoutTag") if t.get("ID")}
    refs = [r.get("REF") for r in _descendants(_first(root, "ReadingOrder"), "ElementRef")]
    order = {ref: k for k, ref in reversed(list(enumerate(refs)))}
    check_count(sum(local(d) in _BLOCKS for d in page.iter()))
    regions = [r for space in page for r in _regions(space, tags, order)]
    return gt_page(path.relative_to(root_dir).as_posix(),
                   image_path(root_dir, path, (file_name.text or "") if file_name is not None else ""),
                   width, height, regions, stem_path=stem_path(root_dir, path), where=path)
