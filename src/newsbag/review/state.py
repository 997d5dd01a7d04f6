"""What each page's board is drawn from (the run's variant folders, the page's output files and
their fingerprint) and whether its recorded review is still theirs: the rule by which `run_review`
skips a page and `board_status` counts it done."""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass, field
from pathlib import Path

from .. import freshness, rundir
from ..io import read_json
from ..revisions import revision
from .options import ReviewParams
from .scan import files_whole
from .gallery import SCANS


class PageError(Exception):
    """One-line reason a page cannot be reviewed (the batch goes on)."""


@dataclass
class Outcome:
    """How reviewing one page went, and what the ranking, scores.tsv and gallery list of it."""

    page_id: str
    status: str  # done | skipped | failed
    error: str = ""
    info: dict = field(default_factory=dict)
    scan_gone: bool = False  # skipped: its board is kept, its scan is gone


def _variant_dirs(root: Path, depth: int) -> dict[str, Path]:
    """Output folders `depth` levels under `root`, named by their relative posix path."""
    if not root.is_dir():
        return {}
    pattern = "/".join(["*"] * depth)
    return {
        p.relative_to(root).as_posix(): p
        for p in sorted(root.glob(pattern))
        if p.is_dir() and not any(part.startswith(("_", ".")) for part in p.relative_to(root).parts)
    }


@dataclass(frozen=True)
class Plan:
    """What every board of the run is drawn from, besides its page's own files."""

    source_dirs: dict[str, Path]
    fused_dirs: dict[str, Path]    # the fused variants the board shows
    gallery_dirs: dict[str, Path]  # every fused variant: the gallery overlays them all
    recommended: str | None
    missing: list[str]             # fused variants asked for and not found
    options: dict                  # as info.json records them; part of every board's fingerprint


def review_plan(run_dir: Path, params: ReviewParams) -> Plan:
    """The run's source and fused variant folders, and which fused variants boards show (`params.variants`,
    else the recommended one, else all)."""
    sources = _variant_dirs(rundir.sources_root(run_dir), 2)
    found = _variant_dirs(rundir.fusion_dir(run_dir), 1)
    recommended = rundir.recommended_variant(run_dir)
    if params.variants is not None:
        shown = {v: found[v] for v in params.variants if v in found}
    elif recommended in found:
        shown = {recommended: found[recommended]}
    else:
        shown, recommended = found, None
    options = {**asdict(params), "variants": list(params.variants) if params.variants else None,
               "shown_fused": sorted(shown)}
    return Plan(sources, shown, found, recommended, [v for v in params.variants or () if v not in found], options)


def _page_files(page_id: str, dirs: dict[str, Path], kind: str, recorded: dict
                ) -> tuple[dict[str, str], dict[str, str], dict, dict[str, str], dict[str, list[int]]]:
    """(outputs, failure records) per name for one page, absent names did not run it, and the
    `freshness.recorded_identity` (by the ``recorded`` `freshness.input_record` of the board), path and stat of
    each by ``"<kind>:<name>"`` / ``"failed_<kind>:<name>"``: one stat a file while it keeps its
    recorded stat, no Path built (status checks 100k boards)."""
    done, failed, identities, paths, stats = {}, {}, {}, {}, {}
    file = f"{page_id}.json"
    for name, folder in dirs.items():
        for key, found, out in ((f"{kind}:{name}", done, os.path.join(folder, file)),
                                (f"failed_{kind}:{name}", failed, os.path.join(folder, rundir.FAILED_DIR, file))):
            if (now := freshness.file_identity(out)) is not None:
                found[name], paths[key], stats[key] = out, out, now
                identities[key] = freshness.recorded_identity(out, now, recorded.get(key))
                break
    return done, failed, identities, paths, stats


def _recorded_info(page_dir: Path) -> dict:
    """The page's info.json when it says scan, thumbnail and gallery data were made successfully
    and they are whole (`scan.files_whole`); else {}. Read once: a rerun with every board current
    skips each page on it, and lists it from it."""
    try:
        recorded = read_json(page_dir / "info.json")
    except (OSError, ValueError):
        return {}
    if not (isinstance(recorded, dict) and recorded.get("status") == "ok" and recorded.get("scan") in SCANS):
        return {}
    return recorded if files_whole(page_dir, recorded) else {}


@dataclass(frozen=True)
class Inputs:
    """One page's board inputs (outputs and failure records by name) and their fingerprint."""

    sources: dict[str, str]
    failed_sources: dict[str, str]
    fused: dict[str, str]          # of every gallery variant
    failed_fused: dict[str, str]
    image_path: Path
    fingerprint: str
    paths: dict[str, str]          # each input file by its key in `identities`
    identities: dict[str, list[int]]
    record_holds: bool             # the board's input record is still theirs (`freshness.record_holds`)
    scan_gone: bool                # the page image is not on disk (the board can be kept, not drawn)


def board_inputs(record, plan: Plan, recorded: dict) -> Inputs:
    """What the board of `record`'s page is drawn from, found by stat calls only (no file is
    opened while each keeps the stat its board's ``recorded`` info.json has for it)."""
    page_id = record.page_id
    known = recorded.get("inputs")
    known = known if isinstance(known, dict) else {}
    sources, failed_sources, source_ids, source_paths, source_stats = _page_files(
        page_id, plan.source_dirs, "source", known)
    fused, failed_fused, fused_ids, fused_paths, fused_stats = _page_files(page_id, plan.gallery_dirs, "fused", known)
    image_path = Path(record.image_path)
    # What the board is drawn from: not summary.json's mtime (fusion rewrites it on every
    # call) but the recommended variant it names, the files shown and the options; the scan
    # by its content as the manifest records it (and how it was read: the note), as the
    # sources are, so a scan touched, copied without its mtime or gone (purged from scratch,
    # archived) redraws nothing: its board is still of that scan.
    on_disk = freshness.file_identity(image_path)
    scan = [record.image_sha256, record.note] if record.sha256 else on_disk  # the copy's pixels where there is one
    identities = {**source_ids, **fused_ids}
    fingerprint = freshness.fingerprint("review", revision("review"), plan.options, plan.recommended,
                                     sorted(plan.source_dirs), scan, identities)
    return Inputs(sources, failed_sources, fused, failed_fused, image_path, fingerprint,
                   {**source_paths, **fused_paths}, identities,
                   freshness.record_holds({**source_stats, **fused_stats}, known), on_disk is None)


def board_state(run_dir: Path, record, plan: Plan) -> tuple[Inputs, dict, bool]:
    """(the board's inputs, its `_recorded_info`, whether the board is current: made from exactly them)."""
    recorded = _recorded_info(rundir.review_page_dir(run_dir, record.page_id))
    inputs = board_inputs(record, plan, recorded)
    return inputs, recorded, bool(recorded) and recorded.get("fingerprint") == inputs.fingerprint
