"""ALTO v4 writer: one document per page, pixel units, blocks typed from the canonical labels."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET

from .layout import ExportInfo, ExportRegion, compact_members, page_regions, reading_order
from .serialize import xml_bytes

__all__ = ["ALTO_NS", "ALTO_SCHEMA", "BLOCK_TYPES", "FILE_END", "alto_xml"]

ALTO_NS = "http://www.loc.gov/standards/alto/ns-v4#"
ALTO_SCHEMA = f"{ALTO_NS} http://www.loc.gov/standards/alto/v4/alto-4-4.xsd"
_XSI = "http://www.w3.org/2001/XMLSchema-instance"
_XLINK = "http://www.w3.org/1999/xlink"
# How every file `alto_xml` writes ends (`xml_bytes`): a file without it was cut short.
FILE_END = b"</alto>\n"

# canonical label -> (ALTO block element, its TYPE attribute or None). Text-like labels are
# TextBlocks (without lines: the layout has none); the label itself is a LayoutTag.
BLOCK_TYPES: dict[str, tuple[str, str | None]] = {
    "image": ("Illustration", "image"),
    "advertisement": ("Illustration", "advertisement"),
    "formula": ("Illustration", "formula"),
    "table": ("ComposedBlock", "table"),
    "separator": ("GraphicalElement", None),
}


def _q(tag: str) -> str:
    return f"{{{ALTO_NS}}}{tag}"


def _sub(parent: ET.Element, tag: str, text: str | None = None, **attrs: str | None) -> ET.Element:
    el = ET.SubElement(parent, _q(tag), {k: v for k, v in attrs.items() if v is not None})
    if text is not None:
        el.text = text
    return el


def _region_note(r: ExportRegion) -> str:
    """Label, score, support and members of a region as one JSON string (an OtherTag's DESCRIPTION)."""
    note = {"class": r.cls, "label": r.raw_label, "score": r.score}
    if r.support:
        note["support"] = list(r.support)
    if r.members:
        note["members"] = compact_members(r)
    return json.dumps(note, ensure_ascii=False, separators=(",", ":"))


def _geometry(xyxy: tuple[int, int, int, int]) -> dict[str, str]:
    x0, y0, x1, y1 = xyxy
    return {"HPOS": str(x0), "VPOS": str(y0), "WIDTH": str(x1 - x0), "HEIGHT": str(y1 - y0)}


def _block(parent: ET.Element, r: ExportRegion) -> None:
    element, kind = BLOCK_TYPES.get(r.cls, ("TextBlock", None))
    block = _sub(parent, element, ID=r.id, **_geometry(r.xyxy), TAGREFS=f"class_{r.cls} note_{r.id}", TYPE=kind)
    if element != "TextBlock":
        return
    for k, line in enumerate(r.lines):
        # A recogniser that boxed its words gives each String its box and confidence; one that
        # reads whole lines gives the line's words its confidence and no boxes of their own.
        words = [(w.text, w.xyxy, w.score) for w in line.words] or [(t, None, line.score) for t in line.text.split()]
        if not words:
            continue
        line_el = _sub(block, "TextLine", ID=f"{r.id}_l{k:03d}", **_geometry(line.xyxy))
        for n, (text, xyxy, score) in enumerate(words):
            if n:
                _sub(line_el, "SP")
            wc = None if score is None else f"{min(max(score, 0.0), 1.0):.4f}"
            _sub(line_el, "String", ID=f"{r.id}_l{k:03d}_w{n:03d}", CONTENT=text, WC=wc,
                 **(_geometry(xyxy) if xyxy else {}))


def alto_xml(page: dict, info: ExportInfo, transcript: dict | None = None) -> bytes:
    """ALTO 4.4 bytes of one fused or source page.

    Args:
        page: a page dict that passed `page_reader.read_page` (boxes in original image pixels).
        info: provenance (layer, method, tool, created, fingerprint, image file name).
        transcript: the page's transcript record, if any: TextBlocks get TextLines of
            Strings (one per word: its box and confidence where the recogniser gave them, else
            the line's confidence).

    Returns:
        UTF-8 XML, MeasurementUnit pixel; each block points (TAGREFS) at a LayoutTag naming
        its canonical class and an OtherTag holding label, score, support and members.
    """
    for prefix, ns in (("", ALTO_NS), ("xsi", _XSI), ("xlink", _XLINK)):
        ET.register_namespace(prefix, ns)
    root = ET.Element(_q("alto"), {f"{{{_XSI}}}schemaLocation": ALTO_SCHEMA, "SCHEMAVERSION": "4.4"})
    desc = _sub(root, "Description")
    _sub(desc, "MeasurementUnit", "pixel")
    _sub(_sub(desc, "sourceImageInformation"), "fileName", info.image_filename)
    proc = _sub(desc, "Processing", ID="proc_newsbag")
    _sub(proc, "processingCategory", "contentGeneration")
    _sub(proc, "processingDateTime", info.created)
    _sub(proc, "processingStepDescription", f"newsbag layout {info.layer} ({info.method}) of page {page['page_id']}")
    _sub(proc, "processingStepSettings", json.dumps({"layer": info.layer, "method": info.method,
                                                     "fingerprint": info.fingerprint}, separators=(",", ":")))
    soft = _sub(proc, "processingSoftware")
    _sub(soft, "softwareCreator", "newsbag")
    _sub(soft, "softwareName", "newsbag")
    _sub(soft, "softwareVersion", info.tool.split()[-1])

    regions = page_regions(page, transcript)
    tags = _sub(root, "Tags")
    for cls in sorted({r.cls for r in regions}):
        _sub(tags, "LayoutTag", ID=f"class_{cls}", LABEL=cls, TYPE="newsbag:class")
    for r in regions:
        _sub(tags, "OtherTag", ID=f"note_{r.id}", LABEL="newsbag:region", DESCRIPTION=_region_note(r))
    ordered = reading_order(regions)
    if ordered:
        group = _sub(_sub(root, "ReadingOrder"), "OrderedGroup", ID="ro_main")
        for r in ordered:
            _sub(group, "ElementRef", ID=f"ro_{r.id}", REF=r.id)

    width, height = str(int(page["image"]["width"])), str(int(page["image"]["height"]))
    page_el = _sub(_sub(root, "Layout"), "Page", ID="page_1", PHYSICAL_IMG_NR="1", WIDTH=width, HEIGHT=height,
                   PROCESSING="proc_newsbag")
    space = _sub(page_el, "PrintSpace", HPOS="0", VPOS="0", WIDTH=width, HEIGHT=height)
    for r in regions:
        _block(space, r)
    return xml_bytes(root)
