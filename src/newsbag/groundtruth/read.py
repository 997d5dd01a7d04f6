"""Find the ground-truth files under a path and read each with its format's reader."""

from __future__ import annotations

import logging
import os
from pathlib import Path

from ..errors import InputError, first_line
from ..io import read_json
from .alto import read_alto
from .coco import read_coco
from .model import GtError, GtPage, check_size
from .nzz import ANNOTATIONS, read_nzz_annotation
from .pagexml import read_page_xml
from .xmlfiles import local, parse_xml

__all__ = ["read_ground_truth", "gt_root", "FORMATS_HELP"]

log = logging.getLogger(__name__)

FORMATS_HELP = ("a folder of PAGE-XML or ALTO files (a Transkribus export with page/ folders too), "
                "a COCO JSON file, or the nzz format (a folder with annotations/)")
# XML files a tool exports beside its ground truth, skipped without a word.
_COMPANIONS = frozenset({"mets", "trpDocMetadata"})
_READERS = {"PcGts": read_page_xml, "alto": read_alto}


def gt_root(path: Path) -> Path:
    """The folder the names of `read_ground_truth(path)`'s pages and problems are relative to."""
    path = Path(path)
    if path.is_file():
        return path.parent
    return path / ANNOTATIONS if (path / ANNOTATIONS).is_dir() else path


def _files(folder: Path) -> list[Path]:
    """Every .xml and .json file under `folder`, sorted, without following links to folders."""
    found = []
    for top, dirs, files in os.walk(folder):
        dirs.sort()
        found += [Path(top, f) for f in sorted(files) if f.lower().endswith((".xml", ".json"))]
    return found


def _read_file(root: Path, path: Path) -> tuple[list[GtPage], dict[str, str]]:
    """The pages of one PAGE, ALTO or COCO file, and its problems (name -> why)."""
    name = path.relative_to(root).as_posix()
    try:
        if path.suffix.lower() == ".json":
            check_size(path)
            return read_coco(root, path, read_json(path))
        xml = parse_xml(path)
        kind = local(xml)
        if kind in _COMPANIONS:
            log.debug("evaluate: ground truth %s: a %s file, not ground truth; skipped", path, kind)
            return [], {}
        if kind not in _READERS:
            raise GtError(f"not PAGE-XML or ALTO (root element {kind or '?'})")
        return [_READERS[kind](root, path, xml)], {}
    except (OSError, ValueError) as exc:   # GtError is a ValueError, as are JSON errors
        return [], {name: first_line(exc)}


def read_ground_truth(path: Path) -> tuple[list[GtPage], dict[str, str]]:
    """The pages of the ground truth at `path`, and each file (or COCO image) that cannot be
    used, by name (relative to `gt_root`) -> why in one line; the rest is read.

    `path` is a COCO JSON file, a PAGE-XML or ALTO file, a folder with ``annotations/`` (the
    nzz format), or a folder of PAGE-XML, ALTO and COCO files at any depth (a Transkribus
    export keeps its PAGE-XML in ``page/`` folders). Other XML (METS, Transkribus metadata)
    is skipped; another kind of XML or JSON is a problem.

    Raises:
        InputError: `path` is missing, or holds no ground-truth file.
    """
    path = Path(path)
    root = gt_root(path)
    if not path.exists():
        raise InputError(f"{path}: no such ground truth file or folder")
    if root.name == ANNOTATIONS and root.parent == path:
        files = sorted(root.glob("*.json"))
        pages, problems = [], {}
        for file in files:
            try:
                pages.append(read_nzz_annotation(file))
            except (OSError, ValueError) as exc:
                problems[file.name] = first_line(exc)
    else:
        files = [path] if path.is_file() else _files(path)
        pages, problems = [], {}
        for file in files:
            found, bad = _read_file(root, file)
            pages += found
            problems.update(bad)
    if not files:
        raise InputError(f"{path}: no ground truth found: expected {FORMATS_HELP}")
    return pages, problems
