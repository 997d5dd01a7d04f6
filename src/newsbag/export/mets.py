"""METS file of a correction bundle, as OCR-D reads a workspace: one image and one PAGE-XML per physical page."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections import Counter
from dataclasses import dataclass

from .serialize import xml_bytes

__all__ = ["METS_NS", "MODS_NS", "IMAGE_GROUP", "PAGE_GROUP", "PAGE_MIMETYPE", "MetsPage", "bundle_mets"]

METS_NS = "http://www.loc.gov/METS/"
MODS_NS = "http://www.loc.gov/mods/v3"
_XLINK = "http://www.w3.org/1999/xlink"
_XSI = "http://www.w3.org/2001/XMLSchema-instance"
_SCHEMAS = f"{METS_NS} https://www.loc.gov/standards/mets/mets.xsd {MODS_NS} https://www.loc.gov/standards/mods/mods.xsd"
# OCR-D's fileGrp names (spec, mets.md): the source images, and block (region) segmentation
# meant to become ground truth once corrected.
IMAGE_GROUP = "OCR-D-IMG"
PAGE_GROUP = "OCR-D-GT-SEG-BLOCK"
PAGE_MIMETYPE = "application/vnd.prima.page+xml"


@dataclass(frozen=True)
class MetsPage:
    """One page of a bundle: its image and PAGE-XML file names (relative to the METS file), the
    image's media type, a label (the page id), and the PAGE-XML's ``pcGtsId`` (None: unknown)."""

    image: str
    mimetype: str
    xml: str
    label: str
    pcgts_id: str | None = None


def _q(tag: str, ns: str = METS_NS) -> str:
    return f"{{{ns}}}{tag}"


def _file(group: ET.Element, file_id: str, mimetype: str, href: str) -> None:
    el = ET.SubElement(group, _q("file"), ID=file_id, MIMETYPE=mimetype)
    # A local file, named relative to the METS file, as `ocrd workspace add` records one.
    ET.SubElement(el, _q("FLocat"), {"LOCTYPE": "OTHER", "OTHERLOCTYPE": "FILE", f"{{{_XLINK}}}href": href})


def bundle_mets(pages: list[MetsPage], *, created: str, creator: str, identifier: str) -> bytes:
    """METS bytes of a bundle: fileGrp OCR-D-IMG and OCR-D-GT-SEG-BLOCK with one file each per page
    (IDs ``<group>_0001``..., a PAGE-XML's its ``pcGtsId`` where known and unique, as OCR-D's
    validator asks), and one physical structMap whose ``physSequence`` holds a ``page`` div per
    page (IDs ``PHYS_0001``..., ORDER from 1) pointing at both files.

    Args:
        pages: the bundle's pages in order.
        created: ISO-8601 time of the bundle (metsHdr CREATEDATE).
        creator: the software that wrote it (the CREATOR agent).
        identifier: the document's ``mods:identifier``, a URN (OCR-D requires one of type purl,
            urn, doi or url).
    """
    for prefix, ns in (("mets", METS_NS), ("mods", MODS_NS), ("xlink", _XLINK), ("xsi", _XSI)):
        ET.register_namespace(prefix, ns)
    root = ET.Element(_q("mets"), {f"{{{_XSI}}}schemaLocation": _SCHEMAS})
    agent = ET.SubElement(ET.SubElement(root, _q("metsHdr"), CREATEDATE=created), _q("agent"),
                          TYPE="OTHER", OTHERTYPE="SOFTWARE", ROLE="CREATOR")
    ET.SubElement(agent, _q("name")).text = creator
    wrap = ET.SubElement(ET.SubElement(root, _q("dmdSec"), ID="DMDLOG_0001"), _q("mdWrap"), MDTYPE="MODS")
    mods = ET.SubElement(ET.SubElement(wrap, _q("xmlData")), _q("mods", MODS_NS))
    ET.SubElement(mods, _q("identifier", MODS_NS), type="urn").text = identifier
    files = ET.SubElement(root, _q("fileSec"))
    images = ET.SubElement(files, _q("fileGrp"), USE=IMAGE_GROUP)
    layouts = ET.SubElement(files, _q("fileGrp"), USE=PAGE_GROUP)
    sequence = ET.SubElement(ET.SubElement(root, _q("structMap"), TYPE="PHYSICAL"), _q("div"),
                             ID="PHYS_0000", TYPE="physSequence")
    given = Counter(p.pcgts_id for p in pages)
    for k, page in enumerate(pages, 1):
        own = page.pcgts_id if page.pcgts_id and given[page.pcgts_id] == 1 and not page.pcgts_id.startswith(
            ("OCR-D-", "PHYS_")) else None
        ids = (f"{IMAGE_GROUP}_{k:04d}", own or f"{PAGE_GROUP}_{k:04d}")
        _file(images, ids[0], page.mimetype, page.image)
        _file(layouts, ids[1], PAGE_MIMETYPE, page.xml)
        div = ET.SubElement(sequence, _q("div"), ID=f"PHYS_{k:04d}", TYPE="page", ORDER=str(k), LABEL=page.label)
        for file_id in ids:
            ET.SubElement(div, _q("fptr"), FILEID=file_id)
    return xml_bytes(root)
