"""The one table from ground-truth region types to newsbag's canonical labels (and so coarse classes).

A region's label comes from its type name when the table knows it (a PAGE TextRegion's
``@type`` or OCR-D ``custom="structure {type:...;}"``, an ALTO block's ``TYPE`` or LayoutTag
``LABEL``, a COCO category name, an nzz label), else from its element (PAGE region, ALTO
block); a COCO category the table does not know is ``unknown`` and reported. The coarse class
is `labels.coarse_for` of the label; evaluation scores text (text, title, line), image and
table, so ``other`` regions (separators, headers, page numbers, ...) are read but not scored.
docs/ground-truth.md holds this table, as `label_table_markdown` writes it (tests/test_docs.py).
"""

from __future__ import annotations

from types import MappingProxyType

from ..labels import coarse_for

__all__ = ["ELEMENTS", "TYPES", "CONTAINER", "type_key", "label_for", "label_table_markdown"]

# The element of a ComposedBlock whose type names no label: its blocks are read one by one.
CONTAINER = "ComposedBlock"

# PAGE region elements and ALTO blocks -> label, when no type of theirs is in `TYPES`.
ELEMENTS: MappingProxyType[str, str] = MappingProxyType({
    "TextRegion": "text",
    "ImageRegion": "image",
    "GraphicRegion": "image",
    "LineDrawingRegion": "image",
    "ChartRegion": "image",
    "MapRegion": "image",
    "AdvertRegion": "advertisement",
    "TableRegion": "table",
    "MathsRegion": "formula",
    "ChemRegion": "formula",
    "SeparatorRegion": "separator",
    "MusicRegion": "unknown",
    "NoiseRegion": "unknown",
    "UnknownRegion": "unknown",
    "CustomRegion": "unknown",
    "TextBlock": "text",
    "Illustration": "image",
    "GraphicalElement": "separator",
})

# Type and category names (compared by `type_key`: lower case, "_" and " " as "-") -> label.
# newsbag's own canonical labels name themselves (its exports write them).
TYPES: MappingProxyType[str, str] = MappingProxyType({
    # PAGE TextRegion @type (2013 and 2019 schemas); "other" is left to the element (text)
    "paragraph": "text",
    "heading": "headline",
    "caption": "caption",
    "header": "header",
    "footer": "footer",
    "page-number": "page_number",
    "drop-capital": "text",
    "credit": "byline",
    "floating": "text",
    "signature-mark": "text",
    "catch-word": "text",
    "marginalia": "text",
    "footnote": "text",
    "footnote-continued": "text",
    "endnote": "text",
    "toc-entry": "text",
    "list-label": "text",
    # newsbag's canonical labels
    "text": "text",
    "byline": "byline",
    "headline": "headline",
    "title": "title",
    "image": "image",
    "advertisement": "advertisement",
    "table": "table",
    "masthead": "masthead",
    "formula": "formula",
    "separator": "separator",
    "unknown": "unknown",
    "text-line": "text_line",
    # other names ground truth uses (nzz, DocLayNet, PubLayNet, ALTO TYPE values)
    "graphic": "image",
    "figure": "image",
    "picture": "image",
    "photograph": "image",
    "illustration": "image",
    "chart": "image",
    "article": "text",
    "list": "text",
    "list-item": "text",
    "section-header": "headline",
    "page-header": "header",
    "page-footer": "footer",
    "equation": "formula",
})


def type_key(name: str) -> str:
    """How type and category names are compared: ``Page_Number`` and ``page-number`` are one."""
    return name.strip().lower().replace("_", "-").replace(" ", "-")


def label_for(element: str | None, kind: str | None) -> str | None:
    """The canonical label of a region: its type `kind` when `TYPES` knows it, else its `element`'s
    (`ELEMENTS`); None when neither says (a COCO category or an element the table does not know, or
    an untyped ComposedBlock, which is read as its blocks)."""
    if kind and (label := TYPES.get(type_key(kind))):
        return label
    return ELEMENTS.get(element or "")


def label_table_markdown() -> str:
    """The table as docs/ground-truth.md shows it: name, where it occurs, label, coarse class."""
    rows = ["| region element or type name | newsbag label | coarse class |", "|---|---|---|"]
    rows += [f"| `{name}` (element) | {label} | {coarse_for(label)} |" for name, label in ELEMENTS.items()]
    rows.append(f"| `{CONTAINER}` (element, no known type) | its blocks, one by one | |")
    rows += [f"| `{name}` | {label} | {coarse_for(label)} |" for name, label in TYPES.items()]
    return "\n".join(rows) + "\n"
