"""XML bytes of a writer's element tree, with every string made writable as XML 1.0."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

__all__ = ["xml_bytes"]

# Characters XML 1.0 cannot hold, not even as a character reference: C0 controls but tab,
# newline and carriage return, lone surrogates, U+FFFE and U+FFFF. ElementTree writes them
# anyway (a surrogate as "&#55349;"), and no XML reader opens the file then.
_NOT_XML = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def _xml_safe(text: str) -> str:
    """`text` with each character XML cannot hold replaced by U+FFFD, so the loss stays visible."""
    return _NOT_XML.sub("\ufffd", text)


def xml_bytes(root: ET.Element) -> bytes:
    """UTF-8 bytes with an XML declaration of the indented tree under `root`.

    Model text reaches the tree as it came (a "\\b" of a model's LaTeX read as a JSON escape
    is a backspace, "\\beta" becomes "\\x08eta"); one such character used to leave a file that
    every PAGE or ALTO reader refuses, exported as ok. Element text and attribute values are
    cleaned here, for every writer, whatever field the string came from.
    """
    for el in root.iter():
        if el.text:
            el.text = _xml_safe(el.text)
        for key, value in el.attrib.items():
            el.set(key, _xml_safe(value))
    ET.indent(root, space=" ")
    return ET.tostring(root, encoding="utf-8", xml_declaration=True) + b"\n"
