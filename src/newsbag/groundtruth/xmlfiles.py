"""Reading ground-truth XML safely, and where the image a file names lies."""

from __future__ import annotations

import os
import posixpath
from pathlib import Path

from .model import GtError, check_size

__all__ = ["parse_xml", "local", "children", "image_path", "stem_path", "TOOL_FOLDERS"]

# Folders correction tools put their XML in, beside the images (Transkribus ``page/``, ALTO ``alto/``).
TOOL_FOLDERS = frozenset({"page", "alto"})


def parse_xml(path: Path):
    """The root element of the XML file at `path`, read without resolving entities, loading a
    DTD or fetching anything (a ground-truth file from elsewhere may point at local files or
    URLs), and without lxml's huge-tree allowance.

    Raises:
        GtError: over the size limit, or not well-formed XML (the parser's first line).
    """
    from lxml import etree

    check_size(path)
    parser = etree.XMLParser(resolve_entities=False, no_network=True, huge_tree=False, load_dtd=False,
                             dtd_validation=False, remove_comments=True, remove_pis=True)
    try:
        return etree.parse(str(path), parser).getroot()
    except etree.XMLSyntaxError as exc:
        raise GtError(f"unreadable XML: {str(exc).splitlines()[0] if str(exc) else 'not well-formed'}") from None


def local(el) -> str:
    """An element's tag without its namespace (PAGE and ALTO versions differ only there)."""
    tag = el.tag
    return tag.rsplit("}", 1)[-1] if isinstance(tag, str) else ""


def children(el, name: str) -> list:
    """The child elements of `el` named `name`, whatever their namespace."""
    return [c for c in el if local(c) == name]


def _clean(name: str) -> str:
    """An image name as a path: Windows separators as ``/`` (Aletheia writes full Windows paths)."""
    return name.strip().replace("\\", "/")


def image_path(root: Path, file: Path, name: str) -> str:
    """The image `name` a ground-truth `file` names, relative to the ground-truth `root`.

    Tools resolve it against different folders: the file's own (eScriptorium, newsbag), the
    folder above a ``page/`` folder (Transkribus names the image bare), the workspace holding
    the file's folder (OCR-D: ``OCR-D-IMG/0001.tif``). The first of the file's folder and the
    folders above it, up to `root`, where the image exists is taken; when it exists nowhere,
    the file's folder (the one above a `TOOL_FOLDERS` folder). An absolute name stays absolute.
    """
    name = _clean(name)
    if not name:
        return ""
    if posixpath.isabs(name) or (len(name) > 1 and name[1] == ":"):
        return name
    folders = [file.parent, *file.parent.parents]
    folders = folders[:folders.index(root) + 1] if root in folders else folders[:1]
    default = file.parent.parent if file.parent.name.lower() in TOOL_FOLDERS else file.parent
    folder = next((f for f in folders if (f / name).is_file()), default)
    return Path(os.path.normpath(os.path.relpath(folder / name, root))).as_posix()


def stem_path(root: Path, file: Path) -> str:
    """`file`'s path relative to `root`, without its extension and without a `TOOL_FOLDERS` folder."""
    rel = file.relative_to(root).with_suffix("")
    parts = [p for p in rel.parts[:-1] if p.lower() not in TOOL_FOLDERS] + [rel.name]
    return "/".join(parts)
