"""A correction bundle: each page's image and the PAGE-XML of one layout side by side under one
basename, a METS file and list.tsv: the folder Transkribus, eScriptorium, Aletheia and OCR-D import."""

from __future__ import annotations

import hashlib
import logging
import mimetypes
import os
import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Mapping

from .. import freshness, rundir
from ..errors import InputError, first_line
from ..inputs import safe_name
from ..io import atomic_write_bytes, atomic_write_text
from ..manifest import PageRecord, read_pages
from ..page_reader import read_page
from ..progress import track
from ..review.reading import tsv_rows
from ..revisions import revision
from ..tables import tsv_text
from .layout import ExportInfo
from .mets import MetsPage, bundle_mets
from .pagexml import page_xml
from .stage import _TOOL, _created

__all__ = ["LIST_COLUMNS", "BundleResult", "bundle_basenames", "bundle_image", "write_bundle"]

log = logging.getLogger(__name__)

METS_NAME, LIST_NAME = "mets.xml", "list.tsv"
# list.tsv: one row per page. The facts columns are filled where the caller has them (suggest);
# xml_sha256 is the PAGE-XML as newsbag wrote it, so a later write knows a file corrected since.
LIST_COLUMNS = ("rank", "page_id", "image", "xml", "disagreement", "issue", "year", "layout", "gain", "xml_sha256")
_RESERVED = {Path(METS_NAME).stem.casefold(), Path(LIST_NAME).stem.casefold()}
_PCGTS_ID = re.compile(rb'pcGtsId="([A-Za-z_][\w.-]*)"')
_HEAD_BYTES = 4096
_MIMETYPES = {".png": "image/png", ".jpg": "image/jpeg", ".jpeg": "image/jpeg", ".tif": "image/tiff",
              ".tiff": "image/tiff"}


@dataclass
class BundleResult:
    """What one write of a bundle did: the folder, its list.tsv rows, pages written, pages whose
    PAGE-XML was corrected since newsbag wrote it (kept as they are), failures [{page_id, error}]."""

    folder: Path
    rows: list[dict] = field(default_factory=list)
    written: int = 0
    kept: list[str] = field(default_factory=list)
    failures: list[dict] = field(default_factory=list)


def bundle_basenames(records: Iterable[PageRecord]) -> dict[str, str]:
    """page id -> the basename of its image and PAGE-XML in a bundle.

    The original file's stem (its characters outside ``A-Za-z0-9_.-`` made ``_``) where no other
    page of the run has it, so a corrected file matches its scan by stem; else the readable part
    of the page id (its folders joined by ``__``) where that is unique; else the page id. Names
    compare case-blind (a bundle unpacked on macOS or Windows), and never ``mets`` or ``list``.
    Taken over the whole run, so `suggest` and `export --bundle` give a page the same name.
    """
    records = list(records)
    levels = [[safe_name(Path(r.path).stem) for r in records],
              [r.page_id.rsplit("-", 1)[0] for r in records],
              [r.page_id for r in records]]
    counts = [Counter(n.casefold() for n in names) for names in levels]
    out: dict[str, str] = {}
    used: set[str] = set()
    for k, r in enumerate(records):
        name = next((names[k] for names, seen in zip(levels, counts)
                     if seen[names[k].casefold()] == 1 and names[k].casefold() not in used | _RESERVED), r.page_id)
        used.add(name.casefold())
        out[r.page_id] = name
    return out


def bundle_image(run_dir: Path, record: PageRecord) -> Path:
    """The file a bundle copies for a page: the run's 8-bit or upright copy when it made one (the
    original is in a format the correction tools may not read, or stored turned: the boxes fit the
    copy), else the original (`PageRecord.path`, run-relative), or the path the runners read when
    the original is not where the run says."""
    if record.copy_sha256 is not None or record.orientation != 1:
        return Path(record.image_path)
    original = Path(record.path)
    original = original if original.is_absolute() else Path(run_dir) / original
    return original if original.exists() else Path(record.image_path)


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _written_before(folder: Path) -> tuple[dict[str, str], dict[str, str]]:
    """(xml file name -> sha256 of the PAGE-XML newsbag wrote there last, xml file name -> its
    image's file name), from the old list.tsv."""
    rows = [r for r in tsv_rows(folder / LIST_NAME) if r.get("xml")]
    return {r["xml"]: r.get("xml_sha256", "") for r in rows}, {r["xml"]: r.get("image") for r in rows}


def _untouched(path: Path, sha: str | None) -> bool:
    """Whether the file at `path` is missing or still holds what newsbag wrote (sha256 `sha`)."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return True
    return sha is not None and _sha256(data) == sha


def _copy_image(src: Path, dst: Path) -> None:
    """Copy `src` to `dst` atomically, with its modification time, unless `dst` already has its
    size and modification time: a rerun of a 100k-page bundle reads no image twice."""
    st = src.stat()
    try:
        have = dst.stat()
        if (have.st_size, have.st_mtime_ns) == (st.st_size, st.st_mtime_ns):
            return
    except FileNotFoundError:
        pass
    atomic_write_bytes(dst, src.read_bytes())
    os.utime(dst, ns=(st.st_atime_ns, st.st_mtime_ns))


def _write_page(run_dir: Path, folder: Path, record: PageRecord, name: str, variant: str, method: str,
                before: Mapping[str, str], result: BundleResult) -> dict:
    """Copy one page's image and write its PAGE-XML into `folder`: its list.tsv row (without facts)."""
    src = rundir.fused_dir(run_dir, variant) / f"{record.page_id}.json"
    page = read_page(src, record.page_id)
    image = bundle_image(run_dir, record)
    image_name = name + image.suffix.lower()
    layer = f"fusion/{variant}"
    info = ExportInfo(layer=layer, method=method, tool=_TOOL, created=_created(src),
                      fingerprint=freshness.fingerprint("export", "bundle", revision("export/page-xml"), layer,
                                                        record.page_id, freshness.file_identity(src)),
                      image_filename=image_name)
    data = page_xml(page, info)
    xml = folder / f"{name}.xml"
    sha = _sha256(data)
    if _untouched(xml, before.get(xml.name)):
        atomic_write_bytes(xml, data, keep_same=True)
        result.written += 1
    else:   # corrected since newsbag wrote it (or not newsbag's): the correction is the point
        sha = before.get(xml.name, "")
        result.kept.append(record.page_id)
        log.warning("bundle: %s: changed since newsbag wrote it; kept as it is", xml)
    _copy_image(image, folder / image_name)
    return {"page_id": record.page_id, "image": image_name, "xml": xml.name, "xml_sha256": sha,
            "created": info.created}


def _pcgts_id(path: Path) -> str | None:
    """The ``pcGtsId`` of the PAGE-XML at `path` (from its first bytes, where the root element is), or None."""
    try:
        with open(path, "rb") as fh:
            found = _PCGTS_ID.search(fh.read(_HEAD_BYTES))
    except OSError:
        return None
    return found.group(1).decode("utf-8", "replace") if found else None


def _drop_stale(folder: Path, before: Mapping[str, str], images: Mapping[str, str | None], rows: list[dict]) -> None:
    """Remove the files of pages an earlier write put in `folder` (`_written_before`) that this one
    has not, unless corrected since."""
    now = {r["xml"] for r in rows}
    for xml, sha in before.items():
        if xml in now:
            continue
        if not _untouched(folder / xml, sha):
            log.warning("bundle: %s: no longer suggested, but changed since newsbag wrote it; kept", folder / xml)
            continue
        (folder / xml).unlink(missing_ok=True)
        if images.get(xml):
            (folder / images[xml]).unlink(missing_ok=True)


def write_bundle(run_dir: Path, folder: Path, page_ids: list[str], facts: Mapping[str, dict] | None = None,
                 variant: str | None = None) -> BundleResult:
    """Write the pages `page_ids` of fused `variant` (default: the recommended one) as a correction
    bundle in `folder`: ``<name>.<ext>`` (the image's own bytes, `bundle_image`) beside
    ``<name>.xml`` (PAGE-XML 2019 whose imageFilename is that bare file name; `bundle_basenames`),
    ``mets.xml`` (`mets.bundle_mets`) and ``list.tsv`` (`LIST_COLUMNS`, `facts`' columns per page).

    Every write is atomic and a file that holds the same bytes is left alone. A PAGE-XML changed
    since newsbag wrote it (a correction made in place) is never overwritten or removed; the files
    of pages an earlier write put there and this one has not are removed. A page that cannot be
    read is named in one line and left out; the rest is written.

    Raises:
        InputError: the run has no such fused variant (or no recommendation).
    """
    run_dir, folder = Path(run_dir), Path(folder)
    summary = rundir.fusion_summary(run_dir)
    variant = variant or rundir.recommended_variant(run_dir, summary)
    if variant is None or variant not in rundir.discover_fused(run_dir):
        raise InputError(f"{run_dir}: no fused layout {variant or '(no recommended variant)'} to bundle; "
                         "run newsbag fuse first")
    method = str(((summary.get("variants") or {}).get(variant) or {}).get("method", "fusion"))
    records = read_pages(run_dir)
    names = bundle_basenames(records)
    by_id = {r.page_id: r for r in records}
    folder.mkdir(parents=True, exist_ok=True)
    before, images_before = _written_before(folder)
    result = BundleResult(folder)
    with track("bundle", len(page_ids)) as tracker:
        for page_id in page_ids:
            try:
                if page_id not in by_id:
                    raise ValueError("not in the run's manifest")
                row = _write_page(run_dir, folder, by_id[page_id], names[page_id], variant, method, before, result)
            except (OSError, ValueError) as exc:
                error = f"page {page_id}: {first_line(exc)}"
                log.error("bundle: %s; left out", error)
                result.failures.append({"page_id": page_id, "error": error})
                tracker.advance("failed")
                continue
            result.rows.append({**(facts or {}).get(page_id, {}), **row})
            tracker.advance("ok")
    _drop_stale(folder, before, images_before, result.rows)
    # The newest layout's time, not the clock: a rerun with nothing changed writes the same METS.
    created = max((r["created"] for r in result.rows), default="1970-01-01T00:00:00Z")
    pages = [MetsPage(r["image"], _MIMETYPES.get(Path(r["image"]).suffix)
                      or mimetypes.guess_type(r["image"])[0] or "application/octet-stream", r["xml"], r["page_id"],
                      _pcgts_id(folder / r["xml"]))
             for r in result.rows]
    identifier = f"urn:newsbag:{safe_name(run_dir.resolve().name)}:{safe_name(variant)}"
    atomic_write_bytes(folder / METS_NAME, bundle_mets(pages, created=created, creator=_TOOL, identifier=identifier),
                       keep_same=True)
    atomic_write_text(folder / LIST_NAME, tsv_text(result.rows, list(LIST_COLUMNS)), keep_same=True)
    return result
