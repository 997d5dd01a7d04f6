"""Make the run's pages from its inputs: inspect the new and changed images and merge them into the manifest."""

from __future__ import annotations

import hashlib
import logging
import os
import time
from dataclasses import replace
from pathlib import Path
from typing import Iterable

from . import freshness, images
from .errors import InputError, utf8_text
from .images import InputLimits, copy_png, decode_page, passes_as_is, pixels_sha256
from .inputs import (Rejected, check_input_file, list_inputs, named_inputs, no_images_message, page_id_for,
                     select_ids)
from .io import atomic_write_bytes, hash_file
from .manifest import CACHE, PageRecord, changed_in_place, checkpoint, manifest_pages, merge, read_pages

__all__ = [
    "inspect_page",
    "build_pages",
    "refresh_pages",
    "planned_ids",
]

log = logging.getLogger(__name__)

# Inspected pages go into the manifest every this many pages or seconds, whichever comes first,
# so a call killed mid-inspection (a job's time limit, a preemption) keeps them: 100k scans on
# a network file system take hours to hash and decode. Each checkpoint rewrites the manifest.
CHECKPOINT_PAGES = 1000
CHECKPOINT_S = 60.0


def inspect_page(path: Path, root: Path | None, run_dir: Path, limits: InputLimits = InputLimits(),
                 page_id: str | None = None) -> PageRecord:
    """Record one page; odd formats and rotated pages get an 8-bit PNG copy under RUN/cache/images.

    Its id comes from its path under `root` (`page_id_for`), or is `page_id` when the page is
    already known (a manifest page whose image changed).

    The header is checked against `limits` before anything is decoded. A page with an EXIF
    or TIFF orientation is stored upright (as a viewer shows it): its recorded width and
    height, and so every box, are in that orientation (`images.decode_page`). The copy keeps
    the file's dpi.

    Raises:
        InputError: the file is missing, empty, not an image, truncated, too large or absurd
            for its size (message names it; ``.kind`` says which, for rejected.jsonl).
    """
    page_id = page_id or page_id_for(path, root)
    path = Path(os.path.abspath(path))  # not resolved: the manifest keeps a symlink's own path
    check_input_file(path)
    identity = freshness.file_identity(path)
    page = decode_page(path, None if identity is None else identity[0], limits)
    image_path, copy_sha256 = str(path), None
    if page.copy is not None:
        cached = (Path(run_dir) / CACHE / f"{page_id}.png").resolve()
        atomic_write_bytes(cached, copy_png(page), keep_same=True)  # the same copy again: its board stays current
        image_path, copy_sha256 = str(cached), pixels_sha256(page.copy)
    return PageRecord(
        page_id=page_id, path=os.path.relpath(path, os.path.abspath(run_dir)), image_path=image_path,
        width=page.width, height=page.height, note=page.note, identity=identity,
        sha256=hash_file(path, hashlib.sha256()) if page.data is None else hashlib.sha256(page.data).hexdigest(),
        orientation=page.orientation, conversion=images.CONVERSION_REVISION, copy_sha256=copy_sha256,
    )


def _still_passes(path: Path, record: PageRecord) -> bool:
    """`record`, a page an older conversion revision passed to the runners as it is, would be passed
    as it is today (`images.passes_as_is`). False for a page with a copy (made again by
    `inspect_page`) or one that cannot be read."""
    return record.copy_sha256 is None and record.image_path == os.path.abspath(path) and passes_as_is(path)


def build_pages(
    run_dir: Path,
    input_dirs: list[Path],
    manifest: Path | None,
    recursive: bool,
    max_pages: int | None,
    limits: InputLimits = InputLimits(),
    page_ids: Iterable[str] = (),
) -> tuple[list[PageRecord], list[Rejected]]:
    """Pages of this invocation that `page_ids` (``--pages``) selects, all merged into
    RUN/manifests/pages.jsonl; `input_dirs` are folders or single page images (`list_inputs`).

    `page_ids` must all be ids of the inputs (`select_ids`), checked before anything is
    written (an id whose image then proves unreadable is a rejected input, not a typo); every
    input still goes into the manifest.

    Known pages (same id and file size/mtime unchanged) are not re-hashed, and the manifest is
    rewritten only when a page is new or changed, so a rerun on a large collection starts at
    once. Every input that is skipped (broken symlink, symlink loop, unreadable, unsupported,
    not an image, over `limits`) is returned as `Rejected`, logged as an error (stderr) and
    recorded in manifests/rejected.jsonl; the rest go on.
    """
    known = {p.page_id: p for p in read_pages(run_dir)}
    candidates, ids, rejected = _inputs(run_dir, input_dirs, manifest, recursive, max_pages,
                                        {k: os.path.abspath(Path(run_dir) / p.path) for k, p in known.items()})
    for r in rejected:
        log.error("skipping input: %s", r.error)
    selected = set(select_ids(ids, page_ids))
    todo: dict[str, tuple] = {}
    for (path, _), page_id in zip(candidates, ids):
        todo.setdefault(page_id, (path, known.get(page_id), page_id))
    pages = _records(run_dir, list(todo.values()), limits, rejected)
    merge(run_dir, [p for p in pages if p is not known.get(p.page_id)], rejected,
           {utf8_text(str(p)) for p, _ in candidates})
    return [p for p in pages if p.page_id in selected], rejected


def planned_ids(run_dir: Path, input_dirs: list[Path], manifest: Path | None, recursive: bool,
                max_pages: int | None) -> list[str]:
    """The page ids a call would run, without opening an image or writing anything (`--dry-run`):
    its inputs' ids, or the manifest's when it names no inputs.

    Raises:
        InputError: where the call would refuse for want of pages (`build_pages`, `manifest_pages`).
    """
    if input_dirs or manifest:
        return _inputs(run_dir, input_dirs, manifest, recursive, max_pages)[1]
    return [p.page_id for p in manifest_pages(run_dir, max_pages)]


def _inputs(run_dir: Path, input_dirs: list[Path], manifest: Path | None, recursive: bool, max_pages: int | None,
            known: dict[str, str] | None = None) -> tuple[list[tuple[Path, Path]], list[str], list[Rejected]]:
    """`list_inputs` of a call naming inputs that get an id, their ids (`named_inputs`, against the run's
    `known` pages) and the entries skipped while listing and naming them.

    Raises:
        InputError: no input at all and no page in the run either: nothing to do, nothing
            written; two files under one id (`named_inputs`).
    """
    rejected: list[Rejected] = []
    candidates = list_inputs(input_dirs, manifest, recursive, max_pages, rejected)
    if not candidates and not rejected and not read_pages(run_dir):
        raise InputError(no_images_message(input_dirs, manifest, recursive))
    return *named_inputs(candidates, known, rejected), rejected


def refresh_pages(run_dir: Path, pages: list[PageRecord],
                  limits: InputLimits = InputLimits()) -> tuple[list[PageRecord], list[Rejected]]:
    """`pages` of the manifest as their images are now, for a call that runs from the manifest
    (cluster jobs after `newsbag pages`): a page whose image changed since it was hashed (size
    or mtime) is inspected again and its record replaced in the manifest, so its outputs go
    stale, as a call naming the inputs would do; one that cannot be read any more is rejected
    for this call (the manifest keeps it and its outputs). A page whose image is gone stays as
    the manifest has it: stages that need no image (fusion, export) go on, and a runner names
    the missing file. One stat per unchanged page.
    """
    todo = [(Path(os.path.abspath(Path(run_dir) / p.path)), p, p.page_id) for p in pages]
    rejected: list[Rejected] = []
    fresh = _records(run_dir, todo, limits, rejected, gone_ok=True)
    known = {p.page_id: p for p in pages}
    changed = [p for p in fresh if p is not known[p.page_id]]
    if changed or rejected:  # else no lock and no manifest write: every job of an array does this
        merge(run_dir, changed, rejected, {utf8_text(str(path)) for path, *_ in todo})
    return fresh, rejected


def _records(run_dir: Path, todo: list[tuple], limits: InputLimits, rejected: list[Rejected],
             gone_ok: bool = False) -> list[PageRecord]:
    """The record of each (image path, known record or None, page id) of `todo`: the
    known one while its image is unchanged (`_unchanged`, with `gone_ok`), else a new
    inspection; an image that cannot be read goes to `rejected` with its one line, and the
    rest go on. New inspections go into the manifest every `CHECKPOINT_PAGES` or `CHECKPOINT_S`
    (`manifest.checkpoint`): a rerun after a kill finds them unchanged and inspects only the rest."""
    pages: list[PageRecord] = []
    unsaved: list[PageRecord] = []
    saved_at = time.monotonic()
    for path, old, page_id in todo:
        if unsaved and (len(unsaved) >= CHECKPOINT_PAGES or time.monotonic() - saved_at >= CHECKPOINT_S):
            checkpoint(run_dir, unsaved)
            unsaved, saved_at = [], time.monotonic()
        if old is not None and _unchanged(run_dir, old, path, gone_ok):
            pages.append(old)
            continue
        if old is not None and (moved := _reanchored(run_dir, old, path)) is not None:
            pages.append(moved)
            unsaved.append(moved)
            continue
        reconverted = (replace(old, conversion=images.CONVERSION_REVISION)
                       if old is not None and old.converted_by_older_rule else None)
        if reconverted is not None and _unchanged(run_dir, reconverted, path) and _still_passes(path, reconverted):
            pages.append(reconverted)  # only its revision was old, and it still passes as it is
            continue
        try:
            record = inspect_page(path, None, run_dir, limits, page_id=page_id)
        except InputError as exc:
            rejected.append(Rejected(str(path), str(exc), getattr(exc, "kind", "unreadable")))
            log.error("skipping input: %s", rejected[-1].error)
            continue
        if record.note:
            log.warning("page %s (%s): %s", record.page_id, record.path, record.note)
        pages.append(record)
        unsaved.append(record)
    return pages


def _unchanged(run_dir: Path, record: PageRecord, path: Path, gone_ok: bool = False) -> bool:
    """`record` still describes the image at `path`: the same file, unchanged since it was
    hashed, converted by this `images.CONVERSION_REVISION`, and its 8-bit copy (if any) not older; with
    `gone_ok`, also when the file is gone (it cannot be converted again).
    One or two stat calls when the paths are spelt alike: every job of a 100k-page run asks
    this of each of its pages."""
    original = Path(os.path.abspath(Path(run_dir) / record.path))
    if original != Path(os.path.abspath(path)) and original.resolve() != Path(path).resolve():
        return False
    identity = freshness.file_identity(original)
    if identity is None:
        return gone_ok
    if changed_in_place(record, identity):
        return False  # hash it again, so its outputs become stale
    if record.converted_by_older_rule:
        return False  # converted by an older rule: convert it again (`_still_passes`, `PageRecord.image_sha256`)
    if record.image_path == str(original):
        return True
    cached = freshness.file_identity(Path(record.image_path))
    return cached is not None and cached[1] >= identity[1]


def _reanchored(run_dir: Path, record: PageRecord, path: Path) -> PageRecord | None:
    """`record` anchored at `path` when its original is gone from where the manifest says (a run
    moved or copied elsewhere: its run-relative path points nowhere now) and `path`, the input of
    this call with its page id, is that file: the same [size, mtime_ns] identity and content hash.
    None otherwise (inspected as a changed page). One hash, no decode: its outputs stay current."""
    if record.identity is None or record.converted_by_older_rule:
        return None
    if freshness.file_identity(os.path.abspath(Path(run_dir) / record.path)) is not None:
        return None
    if freshness.file_identity(path) != record.identity:
        return None
    try:
        if hash_file(path, hashlib.sha256()) != record.sha256:
            return None
    except OSError:
        return None
    where = os.path.abspath(path)
    return replace(record, path=os.path.relpath(where, os.path.abspath(run_dir)),
                   image_path=record.image_path if record.copy_sha256 else where)

