"""Exports of fused and source layouts to the formats other tools load: PAGE-XML, ALTO, COCO."""

__all__ = ["FORMATS"]

# Format name -> file suffix; COCO is one JSON per exported layer, the others one file per page.
# Each format's writer has its code revision in `revisions` ("export/<format>").
FORMATS = {"page-xml": ".xml", "alto": ".xml", "coco": ".json"}
