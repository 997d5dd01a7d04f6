"""The run's manifests: its page records and rejected inputs, read, merged and written."""

from __future__ import annotations

import functools
import json
import logging
import os
from dataclasses import asdict, dataclass, field
from itertools import islice
from pathlib import Path
from typing import Iterable

from . import freshness, images, locks, rundir
from .errors import InputError, first_line
from .inputs import Rejected
from .io import atomic_write_text, dumps_strict
from .jsontext import jsonl_lines

log = logging.getLogger(__name__)

__all__ = [
    "RUN_FORMAT",
    "MANIFEST",
    "CACHE",
    "PageRecord",
    "read_pages",
    "manifest_rows",
    "manifest_page_ids",
    "members",
    "write_pages",
    "manifest_pages",
    "select_shard",
    "merge",
    "checkpoint",
    "read_rejected",
    "changed_in_place",
    "scan_changes",
]

# The layout of a run directory's records, written on every manifest line: a newsbag reads only
# runs of its own format and refuses any other in one line (`_parse_lines`), rather than guess what
# another version meant. Bump it when a record changes meaning or a field newsbag needs goes.
RUN_FORMAT = 1
MANIFEST = rundir.MANIFEST
CACHE = Path("cache") / "images"   # the pages' 8-bit copies (`pages.inspect_page`)


@dataclass(frozen=True)
class PageRecord:
    """One page of the run, as its manifest line holds it (`write_pages`, `read_pages`)."""

    page_id: str
    path: str          # the original image, relative to the run dir (moves with the run)
    image_path: str    # absolute path runners read: the original or an 8-bit cached copy (stored run-relative)
    width: int
    height: int
    sha256: str
    note: str = ""     # e.g. "multi-page TIFF (3 frames): first page used"
    identity: list | None = None  # [size, mtime_ns] of the original when sha256 was taken
    orientation: int = 1  # the original's EXIF/TIFF Orientation; not 1: image_path is the upright copy boxes fit
    conversion: int = field(kw_only=True)  # the CONVERSION_REVISION that converted it: made its copy, or passed it as is
    copy_sha256: str | None = None  # sha256 of that copy's pixels (`images.pixels_sha256`)

    @property
    def image_sha256(self) -> str:
        """The hash of what the runners read, which every output of the page is fingerprinted by:
        the copy's pixels when the page has one, else the file's content. A copy remade under a new
        rule with the same pixels leaves the outputs current; one with other pixels makes them stale."""
        return self.copy_sha256 or self.sha256

    @property
    def converted_by_older_rule(self) -> bool:
        """An older CONVERSION_REVISION converted the page: the next call naming it converts it again
        (`pages._unchanged`), and only then is it known whether its outputs stay."""
        return self.conversion != images.CONVERSION_REVISION


def read_pages(run_dir: Path) -> list[PageRecord]:
    """Every page of RUN/manifests/pages.jsonl, in order ([] when there is none)."""
    path = Path(run_dir) / MANIFEST
    return _parse_lines(run_dir, jsonl_lines(path))


def _parse_lines(run_dir: Path, lines: Iterable[tuple[int, str]]) -> list[PageRecord]:
    """The records of manifest lines, a run-relative ``image_path`` (`write_pages`) made absolute
    from the run dir resolved, as `pages.inspect_page` names a copy and `write_pages` recognises one.
    A page on two lines is one page, at its first line with the later record, as `_merge_pages`
    would write it, and a warning names the line.

    Raises:
        InputError: a line that is not a record, one of another run format (`RUN_FORMAT`), or one
            whose page id is no file name (`rundir.is_page_id`).
    """
    root = Path(run_dir).resolve()
    out: dict[str, PageRecord] = {}
    first: dict[str, int] = {}
    for n, line in lines:
        fields = _fields(run_dir, n, line)
        try:
            if isinstance(fields.get("image_path"), str) and not os.path.isabs(fields["image_path"]):
                fields["image_path"] = os.path.join(root, fields["image_path"])
            record = PageRecord(**fields)
        except (ValueError, TypeError, AttributeError) as exc:
            raise InputError(f"{Path(run_dir) / MANIFEST}:{n}: bad manifest line: {exc}") from None
        if first.setdefault(record.page_id, n) != n:
            _say_repeated(str(Path(run_dir) / MANIFEST), n, record.page_id, first[record.page_id])
        out[record.page_id] = record
    return list(out.values())


@functools.cache
def _say_repeated(where: str, n: int, page_id: str, first: int) -> None:
    """Warn of a page on two manifest lines once a call: each stage of a `run` reads the manifest."""
    log.warning("%s:%d: page %s is on line %d too; counted once, with this line's record", where, n, page_id, first)


def _fields(run_dir: Path, n: int, line: str, run_format: bool = True) -> dict:
    """The fields of manifest line `n` but its run format (checked to be this newsbag's unless
    `run_format` is false), with a page id that names files in the run dir and nowhere else
    (`rundir.is_page_id`): a run dir received from someone else decides the ids, and every stage
    writes files named by them.

    Raises:
        InputError: naming the line.
    """
    where = Path(run_dir) / MANIFEST
    try:
        fields = json.loads(line)
        made_by = fields.pop("run_format", None)
    except (ValueError, TypeError, AttributeError, RecursionError) as exc:
        raise InputError(f"{where}:{n}: bad manifest line: {first_line(exc)}") from None
    if run_format and made_by != RUN_FORMAT:
        raise InputError(f"{run_dir} was made by an incompatible newsbag (run format "
                         f"{'none' if made_by is None else made_by}, this newsbag writes {RUN_FORMAT}): "
                         "start a new --run-dir, or run it with the newsbag that made it")
    if not rundir.is_page_id(fields.get("page_id")):
        raise InputError(f"{where}:{n}: bad page id {fields.get('page_id')!r} (a page id is {rundir.PAGE_ID_RULE})")
    return fields


def manifest_rows(run_dir: Path) -> list[dict]:
    """The lines of RUN/manifests/pages.jsonl as fields, page ids checked as `read_pages` checks
    them and each page once, in manifest order ([] when there is none), without making records:
    what a reader of a few fields of every page needs (ids, paths)."""
    rows: dict[str, dict] = {}
    for n, line in jsonl_lines(Path(run_dir) / MANIFEST):
        fields = _fields(run_dir, n, line, False)
        rows[fields["page_id"]] = fields
    return list(rows.values())


def manifest_page_ids(run_dir: Path) -> list[str]:
    """Page ids of RUN/manifests/pages.jsonl in manifest order, each once (`manifest_rows`)."""
    return [row["page_id"] for row in manifest_rows(run_dir)]


def members(run_dir: Path, selected: Iterable[str]) -> list[str]:
    """The pages a stage aggregates over: every manifest page, then any selected page not in it.

    A call computes only its selected pages (--pages, --shard, --max-pages), but leaderboards,
    summaries, scores and galleries always describe the whole run.
    """
    out = manifest_page_ids(run_dir)
    known = set(out)
    out += [p for p in selected if p not in known and not known.add(p)]
    return out


def write_pages(run_dir: Path, pages: Iterable[PageRecord]) -> None:
    """Replace the manifest. An 8-bit copy in the run's own cache is named relative to the run
    dir, so a run moved or copied (the original purged) still reads it."""
    cache = os.path.join(Path(run_dir).resolve(), CACHE, "")

    def stored(p: PageRecord) -> dict:
        fields = {"run_format": RUN_FORMAT, **asdict(p)}
        if p.image_path.startswith(cache):
            fields["image_path"] = os.path.join(str(CACHE), p.image_path[len(cache):])
        return fields

    atomic_write_text(Path(run_dir) / MANIFEST, "".join(dumps_strict(stored(p)) + "\n" for p in pages))


def manifest_pages(run_dir: Path, max_pages: int | None, shard: tuple[int, int] | None = None) -> list[PageRecord]:
    """The manifest's first `max_pages` pages (all with None), then shard K of N of them
    (`select_shard`): a call that names no inputs.

    Only the shard's lines are parsed and kept: each task of a Slurm array reads its slice of
    the run's manifest (parsing all 100k lines took 0.6 s in every task, holding them 80 MB).

    Raises:
        InputError: the run dir has no manifest, or an empty one.
    """
    path = Path(run_dir) / MANIFEST
    pages = _parse_lines(run_dir, select_shard(islice(jsonl_lines(path), max_pages), shard))
    if not pages and not any(islice(jsonl_lines(path), max_pages)):
        raise InputError(f"no pages: give --input-dir or --manifest (no manifest in {Path(run_dir) / 'manifests'})")
    return pages


def select_shard(pages: Iterable, shard: tuple[int, int] | None) -> list:
    """Pages of shard K of N: every N-th manifest line starting at K (balanced, stable), taken
    as they come (a manifest read line by line is held only for the shard's lines)."""
    if shard is None:
        return list(pages)
    k, n = shard
    return list(islice(pages, k, None, n))


def merge(run_dir: Path, pages: list[PageRecord], rejected: list[Rejected], listed: set[str]) -> None:
    """`pages` into the manifest and `rejected` into rejected.jsonl (`_merge_rejected`; `listed`:
    the inputs this call looked at). The manifest is read again under the lock: another job may
    have added pages while this one inspected its images, and a merge from an earlier read would
    drop them."""
    with locks.manifest_lock(run_dir):
        _merge_pages(run_dir, pages)
        _merge_rejected(run_dir, rejected, listed)


def checkpoint(run_dir: Path, pages: list[PageRecord]) -> None:
    """`pages` inspected so far into the manifest, as `merge` puts them there at the end."""
    with locks.manifest_lock(run_dir):
        _merge_pages(run_dir, pages)


def _merge_pages(run_dir: Path, pages: list[PageRecord]) -> None:
    """`pages` into the manifest read again (the caller holds the manifest lock): a page it has keeps its place."""
    if pages:  # none (nothing new or changed, or every input rejected): the manifest stays as it is
        merged = {p.page_id: p for p in read_pages(run_dir)}
        merged.update({p.page_id: p for p in pages})
        write_pages(run_dir, merged.values())


def read_rejected(run_dir: Path) -> list[Rejected]:
    """The inputs the run skipped, with their reasons (RUN/manifests/rejected.jsonl). A damaged
    line (not a row, not UTF-8) is a warning and left out: the list only informs, and the next
    merge writes it whole again."""
    path = rundir.rejected_path(run_dir)
    out = []
    try:
        for n, line in jsonl_lines(path):
            try:
                row = json.loads(line)
                out.append(Rejected(str(row["path"]), str(row["error"]), str(row.get("kind", "unreadable"))))
            except (ValueError, TypeError, KeyError, RecursionError):
                log.warning("%s:%d: not a rejected input's row; left out", path, n)
    except InputError as exc:
        log.warning("%s; the rejected inputs from there on are left out", exc)
    return out


def _merge_rejected(run_dir: Path, rejected: list[Rejected], listed: set[str]) -> None:
    """Rewrite rejected.jsonl: this call's rejections replace its inputs' old rows; rows of
    inputs another call listed stay, unless the path is gone or was accepted since."""
    previous = read_rejected(run_dir)
    if not previous and not rejected:
        return
    now = {r.path for r in rejected}
    keep = [r for r in previous
            if r.path not in now and r.path not in listed and os.path.lexists(r.path)]
    rows = sorted(keep + rejected, key=lambda r: r.path)
    atomic_write_text(rundir.rejected_path(run_dir), "".join(dumps_strict(asdict(r)) + "\n" for r in rows))


def changed_in_place(record: PageRecord, identity: list[int] | None) -> bool:
    """The original's [size, mtime_ns] `identity` is not the one its hash was taken at (a record
    without one, its file gone as it was inspected, is not known to have changed; a file gone has
    none: not changed)."""
    return None not in (record.identity, identity) and record.identity != identity


def scan_changes(run_dir: Path, records: Iterable[PageRecord]) -> tuple[list[str], list[str]]:
    """Ids of the pages whose original was replaced on disk since it was inspected (the next call
    naming them hashes them again (`pages._unchanged`) and redoes their outputs if what runners read
    changed), and of those whose original is gone (a run moved or copied without its scans: its
    outputs stay, but no board, transcript or model pass can be made of them again).
    One stat a page and no hashing: `status` asks it of every page of a 100k-page run."""
    changed, missing = [], []
    for p in records:
        identity = freshness.file_identity(os.path.abspath(Path(run_dir) / p.path))
        if identity is None:
            missing.append(p.page_id)
        elif changed_in_place(p, identity):
            changed.append(p.page_id)
    return changed, missing

