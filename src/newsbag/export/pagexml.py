"""PAGE-XML 2019-07-15 writer: one PcGts document per page, regions typed from the canonical labels."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET

from .layout import ExportInfo, ExportRegion, compact_members, page_regions, reading_order
from .serialize import xml_bytes

__all__ = ["PAGE_NS", "PAGE_SCHEMA", "REGION_TYPES", "FILE_END", "page_xml"]

PAGE_NS = "http://schema.primaresearch.org/PAGE/gts/pagecontent/2019-07-15"
PAGE_SCHEMA = f"{PAGE_NS} {PAGE_NS}/pagecontent.xsd"
_XSI = "http://www.w3.org/2001/XMLSchema-instance"
# How every file `page_xml` writes ends (`xml_bytes`): a file without it was cut short.
FILE_END = b"</PcGts>\n"

# canonical label -> (PAGE region element, TextRegion @type or None). Labels PAGE has no
# word for keep it in custom="structure {type:...;}" (the OCR-D convention).
REGION_TYPES: dict[str, tuple[str, str | None]] = {
    "text": ("TextRegion", "paragraph"),
    "byline": ("TextRegion", "credit"),
    "caption": ("TextRegion", "caption"),
    "headline": ("TextRegion", "heading"),
    "title": ("TextRegion", "heading"),
    "image": ("ImageRegion", None),
    "advertisement": ("AdvertRegion", None),
    "table": ("TableRegion", None),
    "masthead": ("TextRegion", "heading"),
    "header": ("TextRegion", "header"),
    "footer": ("TextRegion", "footer"),
    "page_number": ("TextRegion", "page-number"),
    "formula": ("MathsRegion", None),
    "separator": ("SeparatorRegion", None),
    "unknown": ("UnknownRegion", None),
    "text_line": ("TextRegion", "other"),
}
# Labels whose PAGE type says less than the canonical label: the label goes into @custom.
_CUSTOM = {"byline", "headline", "title", "masthead", "text_line"}


def _q(tag: str) -> str:
    return f"{{{PAGE_NS}}}{tag}"


def _sub(parent: ET.Element, tag: str, text: str | None = None, **attrs: str) -> ET.Element:
    el = ET.SubElement(parent, _q(tag), {k: v for k, v in attrs.items() if v is not None})
    if text is not None:
        el.text = text
    return el


def _points(xyxy: tuple[int, int, int, int]) -> str:
    x0, y0, x1, y1 = xyxy
    return f"{x0},{y0} {x1},{y0} {x1},{y1} {x0},{y1}"


def _user_attr(parent: ET.Element, name: str, kind: str, value: str) -> None:
    _sub(parent, "UserAttribute", name=name, type=kind, value=value)


def _conf(score: float | None) -> str | None:
    return None if score is None else f"{min(max(score, 0.0), 1.0):.4f}"


def _region(parent: ET.Element, r: ExportRegion) -> None:
    element, text_type = REGION_TYPES[r.cls]
    el = _sub(parent, element, id=r.id, type=text_type,
              custom=f"structure {{type:{r.cls};}}" if r.cls in _CUSTOM else None)
    _sub(el, "Coords", points=_points(r.xyxy), conf=_conf(r.score))
    user = _sub(el, "UserDefined")
    _user_attr(user, "newsbag:class", "xsd:string", r.cls)
    _user_attr(user, "newsbag:label", "xsd:string", r.raw_label)
    if r.score is not None:
        _user_attr(user, "newsbag:score", "xsd:float", f"{r.score:.4f}")
    if r.support:
        _user_attr(user, "newsbag:support", "xsd:string", ",".join(r.support))
    if r.members:
        _user_attr(user, "newsbag:members", "xsd:string",
                   json.dumps(compact_members(r), ensure_ascii=False, separators=(",", ":")))
    if element == "TextRegion":
        for k, line in enumerate(r.lines):
            line_el = _sub(el, "TextLine", id=f"{r.id}_l{k:03d}")
            _sub(line_el, "Coords", points=_points(line.xyxy))
            _sub(_sub(line_el, "TextEquiv", conf=_conf(line.score)), "Unicode", line.text)
        if r.text:
            _sub(_sub(el, "TextEquiv"), "Unicode", r.text)


def page_xml(page: dict, info: ExportInfo, transcript: dict | None = None) -> bytes:
    """PAGE-XML bytes of one fused or source page.

    Args:
        page: a page dict that passed `page_reader.read_page` (boxes in original image pixels).
        info: provenance (layer, method, tool, created, fingerprint, image file name).
        transcript: the page's transcript record, if any: text regions get TextLine
            elements (Coords, TextEquiv with conf) and the region's TextEquiv.

    Returns:
        UTF-8 XML with an XML declaration; valid against the PAGE 2019-07-15 schema.
    """
    ET.register_namespace("", PAGE_NS)
    ET.register_namespace("xsi", _XSI)
    root = ET.Element(_q("PcGts"), {f"{{{_XSI}}}schemaLocation": PAGE_SCHEMA, "pcGtsId": f"pc_{info.fingerprint}"})
    meta = _sub(root, "Metadata")
    _sub(meta, "Creator", info.tool)
    _sub(meta, "Created", info.created)
    _sub(meta, "LastChange", info.created)
    _sub(meta, "Comments", f"newsbag layout {info.layer} ({info.method}) of page {page['page_id']}")
    item = _sub(meta, "MetadataItem", type="processingStep", name="layout-analysis", value=info.tool)
    labels = _sub(item, "Labels", externalModel="newsbag")
    for key, value in (("layer", info.layer), ("method", info.method), ("page_id", page["page_id"]),
                       ("fingerprint", info.fingerprint)):
        _sub(labels, "Label", type=key, value=value)

    regions = page_regions(page, transcript)
    page_el = _sub(root, "Page", imageFilename=info.image_filename,
                   imageWidth=str(int(page["image"]["width"])), imageHeight=str(int(page["image"]["height"])))
    ordered = reading_order(regions)
    if ordered:
        group = _sub(_sub(page_el, "ReadingOrder"), "OrderedGroup", id="ro_main", caption="newsbag reading order")
        for k, r in enumerate(ordered):
            _sub(group, "RegionRefIndexed", index=str(k), regionRef=r.id)
    for r in regions:
        _region(page_el, r)
    return xml_bytes(root)
