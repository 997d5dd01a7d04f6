"""Exports of fused and source layouts to the formats other tools load: PAGE-XML, ALTO, COCO."""

__all__ = ["FORMATS", "REVISIONS"]

# Format name -> file suffix; COCO is one JSON per exported layer, the others one file per page.
FORMATS = {"page-xml": ".xml", "alto": ".xml", "coco": ".json"}
# Format name -> its writer's output revision, hashed into every file's fingerprint. Bump a
# format's by one when a change to its writer (or to layout.py / serialize.py, which it uses)
# makes it write something else for the same page: the next export redoes that format's files
# and no other's. 1: XML-safe text, transcripts of an earlier layout dropped (page-xml, alto);
# unreadable pages left out of the fingerprint (coco). 2: integer boxes cover the float box
# (no zero-width box from round-half-even).
REVISIONS = {"page-xml": 2, "alto": 2, "coco": 2}
