"""The run directory's rules in one place: layout, discovery, fingerprints, membership, failures, the manifest lock.

Every stage, `status` and `evaluate` ask this module for paths and for whether an output
is current, instead of re-deriving folder names and comparing mtimes.

    RUN/manifests/pages.jsonl           the run's membership: every page of every call
    RUN/config.resolved.json            the config each stage last ran with (`config_record`)
    RUN/outputs/sources/<stage>/<variant>/<page_id>.json, _failed/<page_id>.json
    RUN/outputs/fusion/<variant>/<page_id>.json, _failed/<page_id>.json
    RUN/outputs/fusion/_metrics/<page_id>.json, _members/<page_id>.json, summary.json, *.tsv
    RUN/outputs/transcripts/<variant>/<page_id>.{json,txt}, transcripts.jsonl, _lines/, _plan/
    RUN/review/pages/<page_id>/{scan.*, thumb.jpg, data.js, info.json | failed.json}, index.html, scores.tsv
    RUN/exports/{page-xml,alto}/<layer>/<page_id>.xml, coco/<layer>.json
    RUN/outputs/_inputs/{export,transcription}/<layer>/<page_id>.json   what those outputs were made from
    RUN/logs/failures.jsonl             one line per page failure of any stage
    RUN/reports/run_<stages>.json       one report per kind of call
    RUN/cache/images/                   8-bit copies of pages the models cannot read as they are
    RUN/cache/scratch/<prefix><host>-<pid>-*/   one call's temporary files (`scratch_folder`)
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import hashlib
import json
import logging
import os
import re
import shutil
import socket
import tempfile
import time
from datetime import datetime
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator

from . import __version__
from .io import append_jsonl, hash_file, jsonl_lines, read_json, read_valid_page, write_json, writer_gone

__all__ = [
    "FAILED_DIR", "REVIEW_FAILED", "MANIFEST", "TOOL", "FINGERPRINT_SCHEME",
    "FOLDER_NAME_RULE", "is_folder_name", "sources_root", "source_dir", "discover_sources", "page_files", "fusion_dir", "fused_dir", "discover_fused",
    "metrics_path", "members_table_path", "recommended_variant", "transcript_dir", "review_dir", "review_page_dir",
    "reviewed_pages",
    "exports_dir", "inputs_record_path", "logs_dir", "failures_ledger", "reports_dir", "gallery_path", "rejected_path",
    "config_record", "config_to_run", "update_config_record",
    "file_identity", "file_digest", "judged_identity", "Judged", "judged_identities", "record_holds", "recorded_inputs", "input_record",
    "judge_by_record",
    "fingerprint", "Fingerprint", "fingerprint_all", "source_fingerprinter",
    "page_is_current", "source_reports", "runners_said_running", "runner_folders", "mark_runner_killed", "page_identities", "remove_stale_page",
    "set_aside_invalid_page", "current_source_pages",
    "is_run_dir", "has_run_state", "manifest_page_ids", "members", "manifest_lock", "stage_lock", "scratch_folder",
    "failure_path", "record_failures", "STOPPED_THE_RUNNER", "previous_failure", "is_held", "not_started_path", "not_started",
]

log = logging.getLogger(__name__)

FAILED_DIR = "_failed"
REVIEW_FAILED = "failed.json"  # in review/pages/<page_id>/ while that page's last review failed
MANIFEST = Path("manifests") / "pages.jsonl"
TOOL = f"newsbag {__version__}"   # provenance written into outputs; no part of any fingerprint
# The head of every fingerprint: the version of the fingerprint scheme itself, not of the
# package (a release alone redoes nothing; code changes redo their outputs through
# `revisions`). It is the package version the scheme began with, so the source pages of runs
# made since stay current; changing it redoes every output of every run.
FINGERPRINT_SCHEME = "newsbag 0.1.0"


# -- layout -------------------------------------------------------------------------------

def sources_root(run_dir: Path) -> Path:
    return Path(run_dir) / "outputs" / "sources"


def source_dir(run_dir: Path, stage: str, variant: str) -> Path:
    return sources_root(run_dir) / stage / variant


SHARED_DIR = "_shared"  # runners/_loop.py SHARED_DIR: one model pass shared by a stage's variants


def drop_shared_passes(run_dir: Path, stage: str, page_ids: Iterable[str]) -> int:
    """Delete the stage's shared model-pass entries (``<stage>/_shared/<key>/<page_id>.json``)
    of these pages; returns how many there were.

    Called once every variant of the stage has run over the pages. A runner keeps an entry
    while a sibling's page is missing or older than it (that sibling is about to read it), so
    an entry outlives the stage where the sibling's page was current already (only one variant
    was redone) or the sibling failed. Nobody reads such an entry (a retry recomputes), and at
    collection scale it is the whole model output again. Only these pages' entries go: Slurm
    array tasks running the same stage on other pages keep theirs.
    """
    root = source_dir(run_dir, stage, SHARED_DIR)
    wanted = {f"{page_id}.json" for page_id in page_ids}
    dropped = 0
    for key_dir in (p for p in (root.iterdir() if root.is_dir() else ()) if p.is_dir()):
        with os.scandir(key_dir) as entries:
            names = [e.name for e in entries if e.name in wanted]
        for name in names:
            (key_dir / name).unlink(missing_ok=True)
        dropped += len(names)
    return dropped


def runner_folders(out_dir: Path) -> list[Path]:
    """The folders a runner writing `out_dir` writes into (its temp files included): `out_dir`
    (pages, run report), its `FAILED_DIR`, and each shared model-pass folder of its stage."""
    out_dir = Path(out_dir)
    return [out_dir, out_dir / FAILED_DIR, *_subdirs(out_dir.parent / SHARED_DIR)]


FOLDER_NAME_RULE = "letters, digits, _ . -, starting with a letter or digit"
_FOLDER_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")


def is_folder_name(name: Any) -> bool:
    """Whether `name` (a stage, a source or fused variant) can be its output folder: one path part
    that discovery (`_subdirs`) finds again, not hidden or private (`_failed`, `_shared`), and with
    no glob or comma, so source globs and ``--stages a,b`` can name it."""
    return isinstance(name, str) and _FOLDER_NAME.fullmatch(name) is not None


def _subdirs(folder: Path) -> list[Path]:
    if not folder.is_dir():
        return []
    return sorted(p for p in folder.iterdir() if p.is_dir() and not p.name.startswith((".", "_")))


def discover_sources(run_dir: Path) -> list[str]:
    """"<stage>/<variant>" of every source folder under RUN/outputs/sources, sorted."""
    return [f"{stage.name}/{variant.name}" for stage in _subdirs(sources_root(run_dir)) for variant in _subdirs(stage)]


def page_files(folder: Path) -> set[str]:
    """Stems of the ``*.json`` files in an output folder: the pages with an output there once
    matched against the manifest's ids (a run report's stem is no page id). One listing, no stat
    or path object per page (100k pages); hidden temporaries are left out, a visible page is
    complete (every writer replaces atomically)."""
    try:
        with os.scandir(folder) as entries:
            return {e.name[:-5] for e in entries if e.name.endswith(".json") and not e.name.startswith(".")
                    and e.is_file()}
    except (FileNotFoundError, NotADirectoryError):
        return set()


def fusion_dir(run_dir: Path) -> Path:
    return Path(run_dir) / "outputs" / "fusion"


def evaluation_dir(run_dir: Path) -> Path:
    """RUN/outputs/evaluation/: `newsbag evaluate`'s leaderboards, GT layers and summary."""
    return Path(run_dir) / "outputs" / "evaluation"


@functools.lru_cache(maxsize=1024)
def fused_dir(run_dir: Path, variant: str) -> Path:
    """Cached: asked for every page and variant (status, fusion's skip: 12 x 100k Paths built)."""
    return fusion_dir(run_dir) / variant


def discover_fused(run_dir: Path) -> list[str]:
    """Names of the fused variants that have an output folder, sorted."""
    return [p.name for p in _subdirs(fusion_dir(run_dir))]


def metrics_path(run_dir: Path, page_id: str) -> Path:
    """Fusion's per-page record: source and variant metrics, the fingerprints they were made from, and
    the file identity of each fused page as written (``outputs``: its index for `page_is_current`)."""
    return fusion_dir(run_dir) / "_metrics" / f"{page_id}.json"


def recommended_variant(run_dir: Path) -> str | None:
    """The fused variant fusion's summary recommends, or None (no summary yet, or none chosen)."""
    try:
        value = read_json(fusion_dir(run_dir) / "summary.json").get("recommended_variant")
    except (OSError, ValueError, AttributeError):
        return None
    return value if isinstance(value, str) and value else None


def transcript_dir(run_dir: Path, variant: str) -> Path:
    """RUN/outputs/transcripts/<variant>/: transcripts of one fused variant."""
    return Path(run_dir) / "outputs" / "transcripts" / variant


def members_table_path(run_dir: Path, page_id: str) -> Path:
    """Fusion's per-page member table: every source box of the page once; fused regions index it."""
    return fusion_dir(run_dir) / "_members" / f"{page_id}.json"


def review_dir(run_dir: Path) -> Path:
    return Path(run_dir) / "review"


def review_page_dir(run_dir: Path, page_id: str) -> Path:
    return review_dir(run_dir) / "pages" / page_id


def reviewed_pages(run_dir: Path) -> set[str]:
    """Page ids with a folder under RUN/review/pages (a board or a failure): one listing."""
    try:
        with os.scandir(review_dir(run_dir) / "pages") as entries:
            return {e.name for e in entries if e.is_dir()}
    except (FileNotFoundError, NotADirectoryError):
        return set()


def exports_dir(run_dir: Path) -> Path:
    """Exports: <format>/<layer>/<page_id>.xml, coco/<layer>.json (layer = fusion/<variant> | sources/<stage>/<variant>)."""
    return Path(run_dir) / "exports"


def inputs_record_path(run_dir: Path, stage: str, layer: str, page_id: str) -> Path:
    """The `input_record` of one page's outputs of a stage whose outputs cannot hold it (export's
    files are handed on as they are; a transcript rewritten would redo its export)."""
    return Path(run_dir) / "outputs" / "_inputs" / stage / layer / f"{page_id}.json"


def logs_dir(run_dir: Path) -> Path:
    return Path(run_dir) / "logs"


def failures_ledger(run_dir: Path) -> Path:
    return logs_dir(run_dir) / "failures.jsonl"


def gallery_path(run_dir: Path) -> Path:
    return review_dir(run_dir) / "index.html"


def rejected_path(run_dir: Path) -> Path:
    return Path(run_dir) / "manifests" / "rejected.jsonl"


def reports_dir(run_dir: Path) -> Path:
    return Path(run_dir) / "reports"


def config_record(run_dir: Path) -> Path:
    """RUN/config.resolved.json: the config ($VARs expanded) the run's stages last ran with.

    A call given no --config runs with it (`config_to_run`), and `status` judges outputs by it.
    """
    return Path(run_dir) / "config.resolved.json"


def config_to_run(run_dir: Path, config_path: Path | None) -> Path | None:
    """The config file a call on `run_dir` runs with: `config_path` when given, else the run's
    record, else None (the embedded default: a new run).

    Without --config a resumed `newsbag run` (or a plain `newsbag fuse`) keeps the models and
    options the run was made with; the embedded bag would run other models into it and replace
    the record that fusion and status judge every output by.
    """
    if config_path is not None:
        return Path(config_path)
    record = config_record(run_dir)
    return record if record.exists() else None


def update_config_record(run_dir: Path, change: Callable[[dict | None], dict]) -> None:
    """Replace the config record with ``change(the record now, or None)``, one call at a time
    (RUN/manifests/.config.lock): a fuse and a review recording at once each keep the other's entry."""
    with _locked(Path(run_dir) / "manifests" / ".config.lock"):
        path = config_record(run_dir)
        try:
            now = read_json(path)
        except (OSError, ValueError):
            now = None
        write_json(path, change(now if isinstance(now, dict) else None), keep_same=True)


def failure_path(out_dir: Path, page_id: str) -> Path:
    """The failure record of one page in an output folder (a source or a fused variant)."""
    return Path(out_dir) / FAILED_DIR / f"{page_id}.json"


# Failure classes of a page that killed or stalled its runner: retried only on request.
STOPPED_THE_RUNNER = ("RunnerCrash", "Timeout")


def previous_failure(out_dir: Path, page_id: str) -> dict | None:
    """The page's failure record in `out_dir`, None when it has none (or it is unreadable)."""
    try:
        with open(failure_path(out_dir, page_id), encoding="utf-8") as fh:
            record = json.load(fh)
    except (OSError, ValueError):
        return None
    return record if isinstance(record, dict) else None


def not_started_path(run_dir: Path, stage: str, variant: str) -> Path:
    """Where a source's last call records why its runner could not run (beside its log, not in
    its output folder: a folder there is a source fusion and export take up)."""
    return logs_dir(run_dir) / f"{stage}.{variant}.not_started.json"


def not_started(run_dir: Path, stage: str, variant: str) -> dict | None:
    """What the source's last call recorded when its runner could not run (it died or hung before
    its first page, its env or device was missing): ``error``, ``error_class``, ``log``
    (run-relative), ``started`` (some page was done first), ``at``. None once a call ran it."""
    try:
        record = read_json(not_started_path(run_dir, stage, variant))
    except (OSError, ValueError):
        return None
    return record if isinstance(record, dict) else None


def is_held(record: dict | None, fingerprint: str) -> bool:
    """Whether a page with this failure record is left failed by a rerun without --retry-failed:
    it crashed or hung the runner, and with the same inputs (`fingerprint`) it would again. The
    orchestrator skips it, and a Slurm resubmit plans no job for it."""
    return (record is not None and record.get("error_class") in STOPPED_THE_RUNNER
            and record.get("fingerprint") == fingerprint)


# -- freshness ----------------------------------------------------------------------------

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


def _entry_ok(entry: Any) -> bool:
    return (isinstance(entry, list) and len(entry) == 4 and isinstance(entry[2], str)
            and all(isinstance(entry[k], int) for k in (0, 1, 3)))


def judged_identity(path: str | os.PathLike, now: list[int], entry: Any) -> list[int]:
    """The identity a stage judges an input by: its `file_identity` `now`, or the one its
    `input_record` `entry` says the stage judged it by while the file holds the content recorded.

    A run copied without its mtimes (``cp -r``, ``scp -r``, zip, GNU tar's whole seconds) holds
    the same bytes under new mtimes: judged by stat alone, fusion, review and export would redo
    every page. Same stat as recorded: no read; other stat, same size: one hash of the file.
    """
    if not _entry_ok(entry) or now[0] != entry[0]:
        return now
    if now[1] == entry[1] or file_digest(path) == entry[2]:
        return [entry[0], entry[3]]
    return now


class Judged(dict):
    """`judged_identities`: key -> identity, and ``holds``: whether the record they were judged
    by is still the `input_record` of these inputs (`record_holds`), so a stage that skips the
    page need not stat its inputs again to find that out."""

    holds: bool = False


def record_holds(stats: dict[str, list[int]], recorded: Any) -> bool:
    """Whether the `input_record` ``recorded`` names exactly these inputs, each with the
    `file_identity` it has now (``stats``): `input_record` would give it back as it is."""
    return (isinstance(recorded, dict) and recorded.keys() == stats.keys()
            and all(_entry_ok(e := recorded[k]) and stats[k] == e[:2] for k in stats))


def judged_identities(paths: dict[str, str], recorded: Any) -> Judged:
    """key -> `judged_identity` of each path that exists; ``recorded``: the stage's `input_record`
    of these inputs when it made its output (anything else counts as none)."""
    recorded = recorded if isinstance(recorded, dict) else {}
    out, stats = Judged(), {}
    for key, path in paths.items():
        if (now := file_identity(path)) is not None:
            stats[key] = now
            out[key] = judged_identity(path, now, recorded.get(key))
    out.holds = record_holds(stats, recorded)
    return out


def recorded_inputs(path: str | os.PathLike) -> dict:
    """The `input_record` stored at `path` ({} when there is none or it cannot be read)."""
    try:
        recorded = read_json(path)
    except (OSError, ValueError):
        return {}
    return recorded if isinstance(recorded, dict) else {}


def input_record(paths: dict[str, str], judged: dict[str, list[int]], recorded: Any = None) -> dict[str, list]:
    """What a stage records beside its output of each input it judged by ``judged[key]``
    (`judged_identities`), for `judged_identity` to recognise the file under another mtime:
    ``[size, mtime_ns now, content digest, the judged mtime_ns]``.

    An entry of ``recorded`` (the stage's record so far) whose stat the file still has is kept
    as it is (no read); any other input is hashed (one read of a file the stage has just read).
    An input that changed since it was judged is left out: the next run judges it anew.
    """
    recorded = recorded if isinstance(recorded, dict) else {}
    out = {}
    for key, path in paths.items():
        want, old, now = judged.get(key), recorded.get(key), file_identity(path)
        if want is None or now is None:
            continue
        judged_as_recorded = _entry_ok(old) and [old[0], old[3]] == want
        if judged_as_recorded and now == old[:2]:
            out[key] = old
        elif (digest := file_digest(path)) is not None and file_identity(path) == now and (
                now == want or (judged_as_recorded and digest == old[2])):
            out[key] = [*now, digest, want[1]]
    return out


def judge_by_record(paths: dict[str, str], record: Path, stale: Callable[[dict[str, list[int]]], Any],
                    write: bool = True) -> tuple[dict[str, list[int]], Any]:
    """(identities, ``stale(identities)``) of one page's inputs for a stage that keeps their
    `input_record` in a file of its own (`inputs_record_path`).

    Judged by stat calls while ``stale`` finds nothing (falsy) and the record exists: the common
    rerun reads no record. Otherwise judged again by the record (a run copied without its
    mtimes holds the same bytes), which then takes the inputs' stats now.
    """
    judged = judged_identities(paths, None)
    left = stale(judged)
    if not left and os.path.exists(record):
        return judged, left
    recorded = recorded_inputs(record)
    judged = judged_identities(paths, recorded)
    left = stale(judged)
    if write:   # `status` judges and records nothing
        write_json(record, input_record(paths, judged, recorded), durable=False, keep_same=True)
    return judged, left


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
    hash from the manifest (`manifest.PageRecord.image_sha256`: the page's 8-bit copy when it has one): runner family and its output revision (``revision`` in its
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


def source_reports(out_dir: Path) -> dict[str, dict]:
    """Each run report in a source folder (``run_report.json``, one per shard
    ``run_report.shard-K-of-N.json``) by file name, in name order, its ``pages`` a dict;
    unreadable ones are left out."""
    return {path.name: report for path in sorted(Path(out_dir).glob("run_report*.json"))
            if (report := _read_report(path)) is not None}


def _report_pages(out_dir: Path, first: str | None = None) -> Iterator[dict]:
    """The ``pages`` of `source_reports` one at a time, the report named `first` (if any) before
    the others, which are looked for only when asked for (listing a folder of 100k pages to
    find them was most of what a shard task's check cost)."""
    if first is not None and (report := _read_report(Path(out_dir) / first)) is not None:
        yield report["pages"]
    for path in sorted(Path(out_dir).glob("run_report*.json")):
        if path.name != first and (report := _read_report(path)) is not None:
            yield report["pages"]


def _read_report(path: Path) -> dict | None:
    """One run report, its ``pages`` a dict ({} when it has none); None when it cannot be read."""
    try:
        report = read_json(path)
    except (OSError, ValueError):
        return None
    if not isinstance(report, dict):
        return None
    return {**report, "pages": report["pages"] if isinstance(report.get("pages"), dict) else {}}


def _report_time(stamp: object) -> float | None:
    """A run report's ``%Y-%m-%dT%H:%M:%S%z`` time as epoch seconds (None when it is none)."""
    try:
        return datetime.strptime(str(stamp), "%Y-%m-%dT%H:%M:%S%z").timestamp()
    except ValueError:
        return None


def runners_said_running(reports: dict[str, dict], now: float) -> list[dict]:
    """The runners `reports` (`source_reports`) say are ``running``, each judged by `io.writer_gone`:
    ``state`` "running", or "died" when its pid is gone on this host (or, on another host, its
    report was last written a day ago).

    A runner killed together with newsbag (kill -9 of the job, the OOM killer taking both, a
    node reboot) cannot write its end, and no one is left to `mark_runner_killed` it: its report
    says ``running`` until a later call starts that runner again.
    """
    found = []
    for name, report in reports.items():
        pid, host = report.get("pid"), report.get("host")
        if report.get("state") != "running" or not isinstance(pid, int) or not isinstance(host, str):
            continue
        updated = report.get("updated") or report.get("started")
        gone = writer_gone(host, pid, _report_time(updated), now)
        found.append({"report": name, "state": "died" if gone else "running", "pid": pid, "host": host,
                      "started": report.get("started"), "updated": updated})
    return found


def page_identities(out_dir: Path, page_ids: Iterable[str]) -> dict[str, list[int]]:
    """page id -> `file_identity` of its page file in `out_dir`, for the pages that have one."""
    return {page_id: identity for page_id in page_ids
            if (identity := file_identity(os.path.join(out_dir, f"{page_id}.json"))) is not None}


def remove_stale_page(out_dir: Path, page_id: str, judged: list[int] | None) -> None:
    """Delete a page judged not current while it still is the file that was judged (`judged`: its
    `file_identity` then; None: there was none).

    Another call running the source on the same page may have written it since: that is a
    fresh page, not the stale one, and deleting it would fail that call's page ("wrote no
    output"). Only the moment between this stat and the unlink is left open, not the plan.
    """
    _take_if_judged(Path(out_dir) / f"{page_id}.json", judged)


def set_aside_invalid_page(out_dir: Path, page_id: str, judged: list[int]) -> Path | None:
    """Move a page judged invalid to ``_failed/<page id>.invalid.json`` (for a look, out of every
    reader's way) while it still is the file that was judged, as `remove_stale_page`.

    Returns:
        where it went; None when the page is no longer the file judged (another call's runner
        has replaced or removed it since): judge what is there now instead.
    """
    bad = Path(out_dir) / FAILED_DIR / f"{page_id}.invalid.json"
    return bad if _take_if_judged(Path(out_dir) / f"{page_id}.json", judged, bad) else None


def _take_if_judged(path: Path, judged: list[int] | None, to: Path | None = None) -> bool:
    """Delete `path` (or move it to `to`) when its `file_identity` is still `judged`; whether it did."""
    if judged is None or file_identity(path) != judged:
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
    file, judged by that fingerprint with one stat; any other is opened. The folder's reports
    are read one at a time, the one named `first` (the caller's own: a shard task's) before
    the others, and only while some existing page is not yet accounted for: a Slurm array
    task reads its own report, not every task's. ``reports``: the folder's `source_reports`
    when the caller has read them already (`status` reads them once); ``now``: the pages'
    `page_identities` when the caller has statted them (a run, to remove stale pages by).
    """
    out_dir = Path(out_dir)
    now = page_identities(out_dir, expected) if now is None else now
    if not now:
        return set()
    made_with: dict[str, str] = {}  # page id -> the fingerprint its file was written with
    for pages in _report_pages(out_dir, first) if reports is None else reports:
        for page_id, entry in pages.items():
            if (page_id in now and page_id not in made_with and isinstance(entry, dict)
                    and isinstance(entry.get("fingerprint"), str) and entry.get("identity") == now[page_id]):
                made_with[page_id] = entry["fingerprint"]
        if len(made_with) == len(now):
            break
    return {page_id for page_id in now
            if (expected[page_id] == made_with[page_id] if page_id in made_with
                else page_is_current(out_dir, page_id, expected[page_id]))}


def mark_runner_killed(out_dir: Path, report_name: str, pid: int, how: str) -> None:
    """Record in a source's run report that its runner `pid` died without finishing
    (``state: killed``, ``killed`` at, ``killed_by`` `how`), if the report still says that
    runner is running.

    A runner writes ``running`` once set up and ``finished`` at its end; killed in between
    (SIGKILL, the OOM killer, newsbag stopping it on Ctrl-C or a timeout) it cannot write
    again, and its report would say ``running`` until some later run. A report another runner
    wrote since (a call on other pages of the variant, a restart) keeps that runner's state.
    Read and replaced under the runner's own report lock (runners/_loop.py `_report_lock`).
    """
    path = Path(out_dir) / report_name
    if not path.is_file():
        return
    with _locked(path.with_name(f".{report_name}.lock")):
        try:
            report = read_json(path)
        except (OSError, ValueError):
            return
        if (isinstance(report, dict) and report.get("state") == "running" and report.get("pid") == pid
                and report.get("host") == socket.gethostname()):
            write_json(path, {**report, "state": "killed", "killed": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
                              "killed_by": how})


# -- membership ---------------------------------------------------------------------------

def is_run_dir(folder: Path) -> bool:
    """`folder` is a newsbag run directory (it has a manifest): what it holds is output, never input pages."""
    return (Path(folder) / MANIFEST).is_file()


def has_run_state(folder: Path) -> bool:
    """newsbag has written into `folder` as a run directory: its manifests (pages or rejected
    inputs), outputs, reports or Slurm job ledger. A folder without any of them (the parent of
    the runs, a scan folder) is not one, whatever `status` would count in it."""
    return any((Path(folder) / entry).exists() for entry in ("manifests", "outputs", "reports", "slurm"))


def manifest_page_ids(run_dir: Path) -> list[str]:
    """Page ids of RUN/manifests/pages.jsonl in manifest order ([] when there is none)."""
    return [json.loads(line)["page_id"] for _, line in jsonl_lines(Path(run_dir) / MANIFEST)]


def members(run_dir: Path, selected: Iterable[str]) -> list[str]:
    """The pages a stage aggregates over: every manifest page, then any selected page not in it.

    A call computes only its selected pages (--pages, --shard, --max-pages), but leaderboards,
    summaries, scores and galleries always describe the whole run.
    """
    out = manifest_page_ids(run_dir)
    known = set(out)
    out += [p for p in selected if p not in known and not known.add(p)]
    return out


@contextlib.contextmanager
def manifest_lock(run_dir: Path) -> Iterator[None]:
    """Hold the run's manifest lock (RUN/manifests/.lock) while reading, merging and replacing the manifest.

    A POSIX record lock (``fcntl.lockf``), not ``flock`` and not an O_EXCL file: it serialises
    jobs on one node, and across nodes on NFS (the client sends it to the server's lock
    manager; Linux NFS clients turn ``flock`` into the same kind of lock anyway), Lustre
    mounted with ``-o flock`` and GPFS. The kernel drops it when the holder dies, so a killed
    job never leaves a stale lock behind, as an O_EXCL lock file would.
    """
    with _locked(Path(run_dir) / "manifests" / ".lock"):
        yield


@contextlib.contextmanager
def stage_lock(run_dir: Path, kind: str) -> Iterator[None]:
    """Hold the run's lock of one builtin stage kind (RUN/manifests/.<kind>.lock) for a whole call.

    A builtin stage computes its selected pages, then aggregates every page of the run from
    what is on disk (leaderboards, summary, gallery, COCO). Two calls at once (two shards)
    would each aggregate before the other's pages were there, and the one writing last would
    drop them; one call at a time, the later one sees every page the earlier one wrote.
    Slurm runs fusion and review as one job after the model arrays, so nothing waits there.
    """
    path = Path(run_dir) / "manifests" / f".{kind}.lock"
    with _locked(path, on_wait=lambda: log.info("%s: waiting for another call's %s on %s to finish (%s)",
                                                   kind, kind, run_dir, path)):
        yield


@contextlib.contextmanager
def _locked(path: Path, on_wait: Callable[[], None] = lambda: None) -> Iterator[None]:
    """An exclusive POSIX record lock on `path` (created if missing) while the block runs;
    `on_wait` is called once when another process holds it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
    try:
        try:
            fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            on_wait()
            fcntl.lockf(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing the descriptor releases the lock


SCRATCH = Path("cache") / "scratch"


@contextlib.contextmanager
def scratch_folder(run_dir: Path, prefix: str) -> Iterator[Path]:
    """A private folder under RUN/cache/scratch for one call's temporary files, removed with
    them when the call ends or fails.

    In the run directory, next to the outputs, not in $TMPDIR: /tmp is RAM (tmpfs) on many
    desktops. The call holds a record lock on the folder's ``.lock`` (as `manifest_lock`, so
    across nodes too); a folder of this prefix whose lock nobody holds (its process was
    killed) is removed by the next call.
    """
    root = Path(run_dir) / SCRATCH
    root.mkdir(parents=True, exist_ok=True)
    mine = f"{prefix}{socket.gethostname()}-{os.getpid()}-"
    for folder in root.glob(f"{prefix}*"):
        if not folder.name.startswith(mine):
            _drop_if_abandoned(folder)
    # Locked before it gets its name, so another call never sees it unlocked.
    making = Path(tempfile.mkdtemp(prefix=".new-", dir=root))
    fd = os.open(making / ".lock", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.lockf(fd, fcntl.LOCK_EX)
        path = Path(tempfile.mkdtemp(prefix=mine, dir=root))
        os.replace(making, path)
        try:
            yield path
        finally:
            shutil.rmtree(path, ignore_errors=True)
    finally:
        shutil.rmtree(making, ignore_errors=True)
        os.close(fd)


def _drop_if_abandoned(folder: Path) -> None:
    try:
        fd = os.open(folder / ".lock", os.O_RDWR)
    except OSError:   # gone meanwhile, or not a scratch folder: not ours to judge
        return
    try:
        fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:   # its call is alive
        return
    else:
        shutil.rmtree(folder, ignore_errors=True)
    finally:
        os.close(fd)


# -- failures -----------------------------------------------------------------------------

def record_failures(run_dir: Path, stage: str, failures: list[dict], **extra: Any) -> None:
    """Append page failures of one stage to RUN/logs/failures.jsonl (one line each)."""
    if failures:
        at = time.strftime("%Y-%m-%dT%H:%M:%S%z")
        append_jsonl(failures_ledger(run_dir), [{"stage": stage, **extra, **f, "at": at} for f in failures])
