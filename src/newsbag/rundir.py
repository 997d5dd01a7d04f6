"""The run directory's layout: where each output lives, finding outputs again, and which pages belong to the run.

Every stage, `status` and `evaluate` ask this module for paths instead of re-deriving folder
names; whether an output found there is current is `freshness`'s question.

    RUN/manifests/pages.jsonl           the run's membership: every page of every call
    RUN/config.resolved.json            the config each stage last ran with (`config_record`)
    RUN/recommended.json                the variant pinned as recommended, and by whom (`pin_path`)
    RUN/outputs/sources/<stage>/<variant>/<page_id>.json, _failed/<page_id>.json
    RUN/outputs/fusion/<variant>/<page_id>.json, _failed/<page_id>.json
    RUN/outputs/fusion/_metrics/<page_id>.json, _members/<page_id>.json, summary.json, *.tsv
    RUN/outputs/tuning/{trials,folds,pages}.tsv, summary.json   what `newsbag tune` tried and decided
    RUN/outputs/transcripts/<variant>/<page_id>.{json,txt}, transcripts.jsonl, _lines/, _plan/
    RUN/review/pages/<page_id>/{scan.*, thumb.jpg, data.js, info.json | failed.json}, index.html, scores.tsv
    RUN/exports/{page-xml,alto}/<layer>/<page_id>.xml, coco/<layer>.json
    RUN/outputs/_inputs/{export,transcription}/<layer>/<page_id>.json   what those outputs were made from
    RUN/outputs/_inputs/transcription/<variant>.index.json             the size transcripts.jsonl was written with
    RUN/logs/failures.jsonl             one line per page failure of any stage
    RUN/reports/run_<stages>.json       one report per kind of call
    RUN/cache/images/                   8-bit copies of pages the models cannot read as they are
    RUN/cache/scratch/<prefix><host>-<pid>-*/   one call's temporary files (`scratch.scratch_folder`)
"""

from __future__ import annotations

import functools
import os
import re
from pathlib import Path
from typing import Any, Callable, Iterable

from .io import read_json, write_json
from .locks import locked

__all__ = [
    "FAILED_DIR", "REVIEW_FAILED", "MANIFEST", "SHARED_DIR",
    "sources_root", "source_dir", "discover_sources", "page_files", "fusion_dir",
    "fused_dir", "discover_fused", "drop_shared_passes", "runner_folders", "evaluation_dir",
    "metrics_path", "members_table_path", "recommended_variant", "transcript_dir", "discover_transcripts", "review_dir", "review_page_dir",
    "reviewed_pages",
    "exports_dir", "inputs_record_path", "index_record_path", "logs_dir", "failures_ledger", "reports_dir", "gallery_path", "rejected_path",
    "config_record", "pin_path", "tuning_dir", "config_to_run", "update_config_record", "failure_path", "not_started_path",
    "is_run_dir", "has_run_state", "PAGE_ID_RULE", "is_page_id",
]

FAILED_DIR = "_failed"
REVIEW_FAILED = "failed.json"  # in review/pages/<page_id>/ while that page's last review failed
MANIFEST = Path("manifests") / "pages.jsonl"


# -- layout -------------------------------------------------------------------------------

def sources_root(run_dir: Path) -> Path:
    return Path(run_dir) / "outputs" / "sources"


def source_dir(run_dir: Path, stage: str, variant: str) -> Path:
    return sources_root(run_dir) / stage / variant


SHARED_DIR = "_shared"  # runners/_shared.py SHARED_DIR: one model pass shared by a stage's variants


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


# What `inputs.page_id_for` makes: one file name that is no other (not hidden, not a private
# `_folder`), short enough to take its suffixes. The manifest reader refuses any other id: a run dir
# received from someone else names its pages, and every stage writes files named by them.
PAGE_ID_RULE = "letters, digits, _ . -, not starting with . or _, at most 200 characters"
_PAGE_ID = re.compile(r"[A-Za-z0-9-][A-Za-z0-9_.-]{0,199}")


def is_page_id(page_id: Any) -> bool:
    """Whether `page_id` can name a page's files (`PAGE_ID_RULE`): never a path that leaves its folder."""
    return isinstance(page_id, str) and _PAGE_ID.fullmatch(page_id) is not None


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
    the file identity of each fused page as written (``outputs``: its index for `freshness.page_is_current`)."""
    return fusion_dir(run_dir) / "_metrics" / f"{page_id}.json"


def fusion_summary(run_dir: Path) -> dict:
    """The last fusion's summary.json ({} before fusion ran, or when it cannot be read)."""
    try:
        value = read_json(fusion_dir(run_dir) / "summary.json")
    except (OSError, ValueError):
        return {}
    return value if isinstance(value, dict) else {}


def recommended_variant(run_dir: Path, summary: dict | None = None) -> str | None:
    """The fused variant fusion's `summary` (read when not given) recommends, or None (no
    summary yet, or none chosen)."""
    value = (fusion_summary(run_dir) if summary is None else summary).get("recommended_variant")
    return value if isinstance(value, str) and value else None


def transcript_dir(run_dir: Path, variant: str) -> Path:
    """RUN/outputs/transcripts/<variant>/: transcripts of one fused variant."""
    return Path(run_dir) / "outputs" / "transcripts" / variant


def discover_transcripts(run_dir: Path) -> list[str]:
    """Names of the fused variants that have a transcript folder, sorted."""
    return [p.name for p in _subdirs(transcript_dir(run_dir, "_").parent)]


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
    """The `freshness.input_record` of one page's outputs of a stage whose outputs cannot hold it (export's
    files are handed on as they are; a transcript rewritten would redo its export)."""
    return Path(run_dir) / "outputs" / "_inputs" / stage / layer / f"{page_id}.json"


def index_record_path(run_dir: Path, stage: str, layer: str) -> Path:
    """What a stage's run-level output of a layer (transcripts.jsonl) was written as, beside its
    pages' input records (`inputs_record_path`): a page id names no file here."""
    return Path(run_dir) / "outputs" / "_inputs" / stage / f"{layer}.index.json"


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

    A call given no --config runs with it (`config_to_run`), and `status` checks outputs by it.
    """
    return Path(run_dir) / "config.resolved.json"


def pin_path(run_dir: Path) -> Path:
    """RUN/recommended.json: the fused variant ``recommend`` or ``tune`` pinned (`fusion.pin`)."""
    return Path(run_dir) / "recommended.json"


def tuning_dir(run_dir: Path) -> Path:
    """RUN/outputs/tuning/: every trial and fold of the last `newsbag tune`, and its decision."""
    return Path(run_dir) / "outputs" / "tuning"


def config_to_run(run_dir: Path, config_path: Path | None) -> Path | None:
    """The config file a call on `run_dir` runs with: `config_path` when given, else the run's
    record, else None (the embedded default: a new run).

    Without --config a resumed `newsbag run` (or a plain `newsbag fuse`) keeps the models and
    options the run was made with; the embedded bag would run other models into it and replace
    the record that fusion and status check every output by.
    """
    if config_path is not None:
        return Path(config_path)
    record = config_record(run_dir)
    return record if record.exists() else None


def update_config_record(run_dir: Path, change: Callable[[dict | None], dict]) -> None:
    """Replace the config record with ``change(the record now, or None)``, one call at a time
    (RUN/manifests/.config.lock): a fuse and a review recording at once each keep the other's entry."""
    with locked(Path(run_dir) / "manifests" / ".config.lock"):
        path = config_record(run_dir)
        try:
            now = read_json(path)
        except (OSError, ValueError):
            now = None
        write_json(path, change(now if isinstance(now, dict) else None), keep_same=True)


def failure_path(out_dir: Path, page_id: str) -> Path:
    """The failure record of one page in an output folder (a source or a fused variant)."""
    return Path(out_dir) / FAILED_DIR / f"{page_id}.json"


def not_started_path(run_dir: Path, stage: str, variant: str) -> Path:
    """Where a source's last call records why its runner could not run (beside its log, not in
    its output folder: a folder there is a source fusion and export take up)."""
    return logs_dir(run_dir) / f"{stage}.{variant}.not_started.json"


# -- membership ---------------------------------------------------------------------------

def is_run_dir(folder: Path) -> bool:
    """`folder` is a newsbag run directory (it has a manifest): what it holds is output, never input pages."""
    return (Path(folder) / MANIFEST).is_file()


def has_run_state(folder: Path) -> bool:
    """newsbag has written into `folder` as a run directory: its manifests (pages or rejected
    inputs), outputs, reports or Slurm job ledger. A folder without any of them (the parent of
    the runs, a scan folder) is not one, whatever `status` would count in it."""
    return any((Path(folder) / entry).exists() for entry in ("manifests", "outputs", "reports", "slurm"))
