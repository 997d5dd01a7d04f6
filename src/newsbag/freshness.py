"""Whether an output is current: fingerprints of what it is made from, file identities, input records."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any, Callable, Iterable

from .io import hash_file, read_json, write_json
from .page_reader import read_valid_page
from .reports import report_pages
from .rundir import FAILED_DIR

__all__ = [
    "FINGERPRINT_SCHEME", "fingerprint", "Fingerprint", "fingerprint_all", "source_fingerprinter",
    "file_identity", "file_digest", "head_of_whole", "file_sizes", "sizes_hold", "made_identity", "recorded_identity", "RecordedIdentities", "recorded_identities",
    "record_holds", "recorded_inputs", "input_record", "identify_by_record",
    "page_is_current", "current_source_pages", "page_identities", "remove_stale_page", "set_aside_invalid_page",
]

# The head of every fingerprint: the version of the fingerprint scheme itself, not of the
# package (a release alone redoes nothing; code changes redo their outputs through
# `revisions`). It is the package version the scheme began with, so the source pages of runs
# made since stay current; changing it redoes every output of every run.
FINGERPRINT_SCHEME = "newsbag 0.1.0"


def file_identity(path: str | os.PathLike) -> list[int] | None:
    """[size, mtime_ns] of a file, or None when it is missing: what an output was made from.

    Size and mtime rather than a content hash: a rerun over 50,000 pages must decide in
    stat calls, and every writer here replaces files atomically (a new inode, a new mtime).
    """
    try:
        st = os.stat(path)
    except OSError:
        return None
    return [st.st_size, st.st_mtime_ns]


def file_digest(path: str | os.PathLike) -> str | None:
    """A content hash of a file (blake2b, 32 hex digits), or None when it cannot be read."""
    try:
        return hash_file(path, hashlib.blake2b(digest_size=16))
    except OSError:
        return None


def head_of_whole(path: str | os.PathLike, size: int, ending: bytes) -> bytes | None:
    """The first `size` bytes of the file at `path` while it ends with `ending`, the bytes its
    writer ends every such file with (an XML root's end tag, COCO's categories); None when it is
    missing, unreadable or cut short.

    An interrupted ``cp`` or ``rsync --inplace`` leaves the head of a file, and with it the
    fingerprint an output records there: the head alone would pass it as current for ever.
    One read at each end, whatever the file's size.
    """
    try:
        with open(path, "rb") as fh:
            head = fh.read(max(size, len(ending)))
            if fh.read(1):   # longer than the head: its last bytes
                fh.seek(-len(ending), os.SEEK_END)
                tail = fh.read()
            else:
                tail = head
    except OSError:
        return None
    return head[:size] if tail.endswith(ending) else None


def file_sizes(folder: str | os.PathLike, names: Iterable[str]) -> dict[str, int]:
    """name -> size of each file `names` in `folder` has (just written): what a stage records
    beside outputs that hold no fingerprint of their own, to find them whole again (`sizes_hold`)."""
    return {name: identity[0] for name in names if (identity := file_identity(os.path.join(folder, name)))}


def sizes_hold(folder: str | os.PathLike, sizes: Any) -> bool:
    """Whether each file of `folder` that `sizes` (`file_sizes` when they were written) names still
    has that size: one cut short by an interrupted copy has not, one copied whole has (whatever
    its mtime). Stat calls only."""
    return isinstance(sizes, dict) and all(
        isinstance(size, int) and (now := file_identity(os.path.join(folder, name))) is not None and now[0] == size
        for name, size in sizes.items())


def _entry_ok(entry: Any) -> bool:
    return (isinstance(entry, list) and len(entry) == 4 and isinstance(entry[2], str)
            and all(isinstance(entry[k], int) for k in (0, 1, 3)))


def made_identity(entry: Any) -> list[int] | None:
    """The identity ([size, mtime_ns]) an `input_record` entry knew its input by when the output was
    made; None for anything that is no such entry."""
    return [entry[0], entry[3]] if _entry_ok(entry) else None


def recorded_identity(path: str | os.PathLike, now: list[int], entry: Any) -> list[int]:
    """The identity a stage knows an input by (and records it under): its `file_identity` `now`,
    or the one its `input_record` `entry` holds for it while the file holds the content recorded.

    A run copied without its mtimes (``cp -r``, ``scp -r``, zip, GNU tar's whole seconds) holds
    the same bytes under new mtimes: known by stat alone, fusion, review and export would redo
    every page. Same stat as recorded: no read; other stat, same size: one hash of the file.
    """
    if not _entry_ok(entry) or now[0] != entry[0]:
        return now
    if now[1] == entry[1] or file_digest(path) == entry[2]:
        return made_identity(entry)
    return now


class RecordedIdentities(dict):
    """`recorded_identities`: key -> identity, and ``holds``: whether the record they were taken
    from is still the `input_record` of these inputs (`record_holds`), so a stage that skips the
    page need not stat its inputs again to find that out."""

    holds: bool = False
    # `identify_by_record` found the inputs by the record, which a call then writes again with their
    # stats now (a run copied without its mtimes): work on a page that redoes no output
    rerecord: bool = False


def record_holds(stats: dict[str, list[int]], recorded: Any) -> bool:
    """Whether the `input_record` ``recorded`` names exactly these inputs, each with the
    `file_identity` it has now (``stats``): `input_record` would give it back as it is."""
    return (isinstance(recorded, dict) and recorded.keys() == stats.keys()
            and all(_entry_ok(e := recorded[k]) and stats[k] == e[:2] for k in stats))


def recorded_identities(paths: dict[str, str], recorded: Any) -> RecordedIdentities:
    """key -> `recorded_identity` of each path that exists; ``recorded``: the stage's `input_record`
    of these inputs when it made its output (anything else counts as none)."""
    recorded = recorded if isinstance(recorded, dict) else {}
    out, stats = RecordedIdentities(), {}
    for key, path in paths.items():
        if (now := file_identity(path)) is not None:
            stats[key] = now
            out[key] = recorded_identity(path, now, recorded.get(key))
    out.holds = record_holds(stats, recorded)
    return out


def recorded_inputs(path: str | os.PathLike) -> dict:
    """The `input_record` stored at `path` ({} when there is none or it cannot be read)."""
    try:
        recorded = read_json(path)
    except (OSError, ValueError):
        return {}
    return recorded if isinstance(recorded, dict) else {}


def input_record(paths: dict[str, str], identities: dict[str, list[int]], recorded: Any = None) -> dict[str, list]:
    """What a stage records beside its output of each input it knew by ``identities[key]``
    (`recorded_identities`), for `recorded_identity` to recognise the file under another mtime:
    ``[size, mtime_ns now, content digest, the recorded identity's mtime_ns]``.

    An entry of ``recorded`` (the stage's record so far) whose stat the file still has is kept
    as it is (no read); any other input is hashed (one read of a file the stage has just read).
    An input that changed since the stage identified it is left out: the next run identifies it anew.
    """
    recorded = recorded if isinstance(recorded, dict) else {}
    out = {}
    for key, path in paths.items():
        want, old, now = identities.get(key), recorded.get(key), file_identity(path)
        if want is None or now is None:
            continue
        as_recorded = made_identity(old) == want
        if as_recorded and now == old[:2]:
            out[key] = old
        elif (digest := file_digest(path)) is not None and file_identity(path) == now and (
                now == want or (as_recorded and digest == old[2])):
            out[key] = [*now, digest, want[1]]
    return out


def identify_by_record(paths: dict[str, str], record: Path, stale: Callable[[dict[str, list[int]]], Any],
                       write: bool = True) -> tuple[dict[str, list[int]], Any]:
    """(identities, ``stale(identities)``) of one page's inputs for a stage that keeps their
    `input_record` in a file of its own (`rundir.inputs_record_path`).

    Identified by stat calls while ``stale`` finds nothing (falsy) and the record exists: the
    common rerun reads no record. Otherwise identified again by the record (a run copied without its
    mtimes holds the same bytes), which then takes the inputs' stats now (``rerecord`` of the
    identities says whether that changes it; ``write=False``: what a call would write).
    """
    identities = recorded_identities(paths, None)
    left = stale(identities)
    if not left and os.path.exists(record):
        return identities, left
    recorded = recorded_inputs(record)
    identities = recorded_identities(paths, recorded)
    identities.rerecord = not identities.holds
    left = stale(identities)
    if write:   # `status` checks and records nothing
        write_json(record, input_record(paths, identities, recorded), durable=False, keep_same=True)
    return identities, left


def _encode(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def fingerprint(*parts: Any) -> str:
    """A short stable hash of JSON-able parts (sorted keys), headed by `FINGERPRINT_SCHEME`; a
    stage's parts hold its code revision (`revisions.revision`)."""
    return _digest(_encode([FINGERPRINT_SCHEME, *parts]))


class Fingerprint:
    """`fingerprint(*head, last)` as a function of `last`, the head encoded once.

    The fingerprints made for every page (100k pages, times the variants) share every part but
    the page's own (its image hash, its inputs' identities); encoding the shared parts again for
    each page was most of their cost. Same text, so the same value as `fingerprint`.
    """

    def __init__(self, *head: Any) -> None:
        self._prefix = _encode([FINGERPRINT_SCHEME, *head])[:-1] + ","   # the list, open for its last item

    def __call__(self, last: Any) -> str:
        return _digest(self._prefix + _encode(last) + "]")


def fingerprint_all(heads: Iterable[Fingerprint], last: Any) -> list[str]:
    """``[f(last) for f in heads]`` with `last` encoded once (fusion: one page's inputs, 13 recipes)."""
    tail = _encode(last) + "]"
    return [_digest(f._prefix + tail) for f in heads]


def source_fingerprinter(family: str, revision: int, params: dict, volatile: Iterable[str],
                         label_map: dict) -> Fingerprint:
    """What a source page of one runner variant is made from, as a function of the image's
    hash from the manifest (`pages.PageRecord.image_sha256`: the page's 8-bit copy when it has one): runner family and its output revision (``revision`` in its
    tool.json: bumped when the runner's code changes its output), the parameters that change its
    output (`volatile` ones such as batch size or threads do not) and the label table. The
    runner writes the value into the page (``source.fingerprint``)."""
    kept = {k: v for k, v in params.items() if k not in set(volatile)}
    return Fingerprint("source", family, revision, kept, label_map)


def page_is_current(out_dir: Path, page_id: str, expected: str, written: list[int] | None = None) -> bool:
    """The source or fused page exists, passes the contract and records the fingerprint computed now.

    ``written``: the page's `file_identity` that its stage recorded in its own index right after
    writing it with the fingerprint `expected`. While the file still has that identity it is
    that very file, so it is current without being opened: a rerun with nothing changed stats
    files instead of parsing them (fusion: 11 fused pages, ~60 ms per page before). Any other
    identity (rewritten, touched, replaced) falls back to opening and checking it.
    """
    path = os.path.join(out_dir, f"{page_id}.json")   # not a Path: one is built per page and variant
    if written is not None and file_identity(path) == list(written):
        return True
    try:
        page = read_valid_page(path, page_id)
    except ValueError:
        return False
    return page["source"].get("fingerprint") == expected


def page_identities(out_dir: Path, page_ids: Iterable[str]) -> dict[str, list[int]]:
    """page id -> `file_identity` of its page file in `out_dir`, for the pages that have one."""
    return {page_id: identity for page_id in page_ids
            if (identity := file_identity(os.path.join(out_dir, f"{page_id}.json"))) is not None}


def remove_stale_page(out_dir: Path, page_id: str, seen: list[int] | None) -> None:
    """Delete a page found not current while it still is the file that was checked (`seen`: its
    `file_identity` then; None: there was none).

    Another call running the source on the same page may have written it since: that is a
    fresh page, not the stale one, and deleting it would fail that call's page ("wrote no
    output"). Only the moment between this stat and the unlink is left open, not the plan.
    """
    _take_if_unchanged(Path(out_dir) / f"{page_id}.json", seen)


def set_aside_invalid_page(out_dir: Path, page_id: str, seen: list[int]) -> Path | None:
    """Move a page found invalid to ``_failed/<page id>.invalid.json`` (for a look, out of every
    reader's way) while it still is the file that was checked, as `remove_stale_page`.

    Returns:
        where it went; None when the page is no longer the file checked (another call's runner
        has replaced or removed it since): check what is there now instead.
    """
    bad = Path(out_dir) / FAILED_DIR / f"{page_id}.invalid.json"
    return bad if _take_if_unchanged(Path(out_dir) / f"{page_id}.json", seen, bad) else None


def _take_if_unchanged(path: Path, seen: list[int] | None, to: Path | None = None) -> bool:
    """Delete `path` (or move it to `to`) when its `file_identity` is still `seen`; whether it did."""
    if seen is None or file_identity(path) != seen:
        return False
    try:
        if to is None:
            path.unlink()
        else:
            to.parent.mkdir(parents=True, exist_ok=True)
            os.replace(path, to)
    except FileNotFoundError:  # removed in the moment since the stat
        return False
    return True


def current_source_pages(out_dir: Path, expected: dict[str, str], reports: list[dict] | None = None,
                         first: str | None = None, now: dict[str, list[int]] | None = None) -> set[str]:
    """The pages of `expected` (page id -> its `source_fingerprinter` value computed now) whose source page
    in `out_dir` is current (`page_is_current`): what a run skips and `status` counts as done.

    The runner records each page it writes in its run report with the fingerprint and file
    identity it wrote: a page whose file still has an identity a report records is that very
    file, checked against that fingerprint with one stat; any other is opened. The folder's reports
    are read one at a time, the one named `first` (the caller's own: a shard task's) before
    the others, and only while some existing page is not yet accounted for: a Slurm array
    task reads its own report, not every task's. ``reports``: the folder's `reports.source_reports`
    when the caller has read them already (`status` reads them once); ``now``: the pages'
    `page_identities` when the caller has statted them (a run, to remove stale pages by).
    """
    out_dir = Path(out_dir)
    now = page_identities(out_dir, expected) if now is None else now
    if not now:
        return set()
    made_with: dict[str, str] = {}  # page id -> the fingerprint its file was written with
    for pages in report_pages(out_dir, first) if reports is None else reports:
        for page_id, entry in pages.items():
            if (page_id in now and page_id not in made_with and isinstance(entry, dict)
                    and isinstance(entry.get("fingerprint"), str) and entry.get("identity") == now[page_id]):
                made_with[page_id] = entry["fingerprint"]
        if len(made_with) == len(now):
            break
    return {page_id for page_id in now
            if (expected[page_id] == made_with[page_id] if page_id in made_with
                else page_is_current(out_dir, page_id, expected[page_id]))}
