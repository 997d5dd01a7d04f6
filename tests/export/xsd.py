"""Validate exported files against the official PAGE 2019-07-15 and ALTO 4.4 schemas (vendored, see schemas/README.md)."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from lxml import etree

SCHEMAS = Path(__file__).resolve().parent / "schemas"
_XLINK_URL = "http://www.loc.gov/standards/xlink/xlink.xsd"


class _LocalXlink(etree.Resolver):
    """ALTO imports xlink.xsd from loc.gov; serve the vendored copy (no network here or in CI)."""

    def resolve(self, url, pubid, context):
        if url == _XLINK_URL:
            return self.resolve_filename(str(SCHEMAS / "xlink.xsd"), context)
        return None


@lru_cache(maxsize=None)
def schema(name: str) -> etree.XMLSchema:
    parser = etree.XMLParser(no_network=True)
    parser.resolvers.add(_LocalXlink())
    return etree.XMLSchema(etree.parse(str(SCHEMAS / name), parser))


PAGE_XSD = "pagecontent-2019-07-15.xsd"
ALTO_XSD = "alto-4-4.xsd"


def validation_errors(path: Path, xsd: str) -> list[str]:
    """Schema errors of the XML file at `path` ("line N: message"); empty when valid."""
    doc = etree.parse(str(path))
    s = schema(xsd)
    if s.validate(doc):
        return []
    return [f"line {e.line}: {e.message}" for e in s.error_log]
