"""Label vocabularies: raw model label -> canonical label -> coarse class (DESIGN §4).

Every family has an explicit table; nothing is guessed from substrings. A raw label that
is not in its family's table maps to ``unknown`` and is reported, never silently to text.
"""

from __future__ import annotations

from types import MappingProxyType

__all__ = [
    "CANONICAL",
    "LABELS",
    "COARSE_CLASSES",
    "FAMILY_TABLES",
    "canonical_for",
    "coarse_for",
    "label_code",
]

# canonical label -> coarse class. Order fixes the int8 codes used by `Boxes.label`.
CANONICAL: MappingProxyType[str, str] = MappingProxyType({
    "text": "text",
    "byline": "text",
    "caption": "text",
    "headline": "title",
    "title": "title",
    "image": "image",
    "advertisement": "image",
    "table": "table",
    "masthead": "other",
    "header": "other",
    "footer": "other",
    "page_number": "other",
    "formula": "other",
    "separator": "other",
    "unknown": "other",
    # A detected text line is evidence of text, not a region: its own coarse class keeps it
    # out of block matching while metrics can still use it.
    "text_line": "line",
})
LABELS: tuple[str, ...] = tuple(CANONICAL)
COARSE_CLASSES: tuple[str, ...] = ("text", "title", "image", "table", "other", "line")

_PP_DOCLAYOUT_V2V3 = {
    "abstract": "text", "algorithm": "text", "aside_text": "text", "chart": "image",
    "content": "text", "display_formula": "formula", "doc_title": "headline",
    "figure_title": "caption", "footer": "footer", "footer_image": "footer",
    "footnote": "text", "formula_number": "formula", "header": "header",
    "header_image": "header", "image": "image", "inline_formula": "formula",
    "number": "page_number", "paragraph_title": "title", "reference": "text",
    "reference_content": "text", "seal": "image", "table": "table", "text": "text",
    "vertical_text": "text", "vision_footnote": "caption",
}
_PP_DOCLAYOUT_PLUS_L = {
    "paragraph_title": "title", "image": "image", "text": "text", "number": "page_number",
    "abstract": "text", "content": "text", "figure_title": "caption", "formula": "formula",
    "table": "table", "reference": "text", "doc_title": "headline", "footnote": "text",
    "header": "header", "algorithm": "text", "footer": "footer", "seal": "image",
    "chart": "image", "formula_number": "formula", "aside_text": "text",
    "reference_content": "text",
}
_CDLA = {
    "text": "text", "title": "title", "figure": "image", "figure_caption": "caption",
    "table": "table", "table_caption": "caption", "header": "header", "footer": "footer",
    "reference": "text", "equation": "formula",
}
_DELL = {
    "article": "text", "author": "byline", "cartoon_or_advertisement": "advertisement",
    "headline": "headline", "image_caption": "caption", "masthead": "masthead",
    "newspaper_header": "header", "page_number": "page_number", "photograph": "image",
    "table": "table",
}
_MINERU = {
    "text": "text", "title": "title", "doc_title": "headline", "paragraph_title": "title",
    "table": "table", "equation": "formula", "formula_number": "formula", "code": "text",
    "algorithm": "text", "aside_text": "text", "ref_text": "text", "index": "text",
    "phonetic": "text", "list_item": "text", "caption": "caption",
    "table_caption": "caption", "image_caption": "caption", "code_caption": "caption",
    "footnote": "text", "table_footnote": "text", "image_footnote": "caption",
    "header": "header", "footer": "footer", "page_number": "page_number",
    "page_footnote": "text", "image": "image", "chart": "image", "list": "text",
    "image_block": "image", "equation_block": "formula", "unknown": "unknown",
}
# PaddleOCR-VL 1.5 layout labels are the PP-DocLayoutV2/V3 set; its parsing blocks reuse them.
_TESSERACT = {
    "unknown": "unknown", "flowing_text": "text", "heading_text": "headline",
    "pullout_text": "text", "equation": "formula", "inline_equation": "formula",
    "table": "table", "vertical_text": "text", "caption_text": "caption",
    "flowing_image": "image", "heading_image": "image", "pullout_image": "image",
    "horz_line": "separator", "vert_line": "separator", "noise": "unknown",
    "paragraph": "text",
}
_TEXT_LINES = {"text_line": "text_line", "text_block": "text"}

FAMILY_TABLES: MappingProxyType[str, MappingProxyType[str, str]] = MappingProxyType({
    name: MappingProxyType(table)
    for name, table in {
        "paddle_layout": {**_PP_DOCLAYOUT_PLUS_L, **_PP_DOCLAYOUT_V2V3, **_CDLA},
        "paddle_vl15": _PP_DOCLAYOUT_V2V3,
        "dell": _DELL,
        "mineru": _MINERU,
        "tesseract": _TESSERACT,
        "text_lines": _TEXT_LINES,
        "recognize": {"text_line": "text_line"},
    }.items()
})


def canonical_for(family: str, raw_label: str) -> str:
    """Canonical label of `raw_label` in `family`'s table; ``unknown`` when absent."""
    table = FAMILY_TABLES.get(family)
    if table is None:
        return "unknown"
    return table.get(raw_label, "unknown")


def coarse_for(canonical: str) -> str:
    return CANONICAL.get(canonical, "other")


def label_code(canonical: str) -> int:
    """int8 code of a canonical label (``unknown`` for anything else)."""
    try:
        return LABELS.index(canonical)
    except ValueError:
        return LABELS.index("unknown")
