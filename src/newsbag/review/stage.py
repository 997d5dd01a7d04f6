"""The review stage: each page's scan, thumbnail and box data, its review priority, full boards of the
top-N pages and the HTML gallery; and the status of the boards. What a board is drawn from and
whether it is current is in `state`, the drawing in `boards`, the ranked listing in `listing`."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any, Callable, Mapping

from .. import freshness, rundir
from ..stage_protocol import Made, Outputs, Tally, stale_reason
from ..errors import RunDirError, page_failure
from ..failures import record_failures
from ..io import read_json, write_json
from ..manifest import members, read_pages
from ..parallel import page_map
from ..revisions import revision
from .options import ReviewParams, parse_review_cfg
from .gallery import DATA_JS, SCANS, THUMB, gallery_links_current, gallery_pages, write_gallery, write_page_data
from .boards import page_content, top_boards
from .evaluation import write_evaluation_data
from .listing import gallery_context, write_scores
from .scan import write_scan, written_files
from .state import Outcome, PageError, Plan, board_state, review_plan

__all__ = ["run_review", "board_status"]

log = logging.getLogger(__name__)


def _review_page(run_dir: Path, record, plan: Plan, params: ReviewParams, force: bool,
                 compute: bool = True) -> Outcome:
    page_id = record.page_id
    page_dir = rundir.review_page_dir(run_dir, page_id)
    inputs, recorded, fresh = board_state(run_dir, record, plan)
    if fresh and not force:
        # The common rerun: its inputs have the stats recorded (no stat again). Else a copied
        # run: the stats its inputs have now go into the record, so the next rerun reads no more.
        known = recorded.get("inputs") if inputs.record_holds else freshness.input_record(
            inputs.paths, inputs.identities, recorded.get("inputs"))
        if known != recorded.get("inputs"):
            recorded = {**recorded, "inputs": known}
            write_json(page_dir / "info.json", recorded)
        return Outcome(page_id, "skipped", info=_listing(recorded), scan_gone=inputs.scan_gone)
    if not compute:
        # Not drawn by this call: a page whose last review failed stays listed as failed.
        try:
            return Outcome(page_id, "failed", error=read_json(page_dir / rundir.REVIEW_FAILED)["error"])
        except (OSError, ValueError, KeyError, TypeError):
            return Outcome(page_id, "absent")

    content = page_content(record, plan, params, inputs)
    for name, why in content.dropped.items():
        log.warning("review: page %s: source %s dropped: %s", page_id, name, why)
    if content.priority.unscored:
        log.warning("review: page %s: %s", page_id, content.priority.unscored)
    scan = write_scan(content.image, page_dir)
    write_page_data(page_dir / DATA_JS, page_id, record.width, record.height, content.layers, scan)
    info = {
        "page_id": page_id, "status": "ok", "path": record.path, "scan": scan,
        "panels": content.panel_rows, "dropped_sources": content.dropped,
        "reference_fused": content.reference, "priority": content.priority.to_dict(), "params": plan.options,
        "fingerprint": inputs.fingerprint, "revision": revision("review"),
        "inputs": freshness.input_record(inputs.paths, inputs.identities, recorded.get("inputs")),
        "files": written_files(page_dir, scan),
    }
    write_json(page_dir / "info.json", info)
    (page_dir / rundir.REVIEW_FAILED).unlink(missing_ok=True)
    return Outcome(page_id, "ok", info=_listing(info))


def _listing(info: dict) -> dict:
    """What the ranking, scores.tsv and gallery read of a page's info.json: a call holds it for
    every page of the run, so not the whole record (~5.7 KB a page parsed, ~0.6 GB at 100k pages)."""
    return {"priority": info["priority"], "path": info.get("path", ""), "fingerprint": info.get("fingerprint")}


def _review_task(task: tuple) -> Outcome:
    """One page, in this process or a worker: any error but a full disk fails that page only
    (a `PageError` with its own line, anything else with `errors.page_failure`'s)."""
    run_dir, page_id, record, plan, params, force, compute = task
    try:
        if record is None:
            raise PageError(f"not in {run_dir / rundir.MANIFEST}")
        return _review_page(run_dir, record, plan, params, force, compute)
    except PageError as exc:
        return _fail_page(run_dir, page_id, str(exc))
    except RunDirError:  # not this page's fault: stop the stage with one line
        raise
    except Exception as exc:  # noqa: BLE001 - the page boundary
        return _fail_page(run_dir, page_id, page_failure(page_id, exc))


def _fail_page(run_dir: Path, page_id: str, error: str) -> Outcome:
    """A failed page keeps no board or gallery files that could pass as current, and a failure record."""
    page_dir = rundir.review_page_dir(run_dir, page_id)
    for stale in ("info.json", *SCANS, THUMB, DATA_JS):
        (page_dir / stale).unlink(missing_ok=True)
    write_json(page_dir / rundir.REVIEW_FAILED, {"page_id": page_id, "error": error})
    return Outcome(page_id, "failed", error=error)


def board_status(run_dir: Path, records: list, review_cfg: Mapping[str, Any]) -> list[Outputs]:
    """Boards that are current, stale, failed or not drawn yet (pending), by the rule `run_review`
    skips pages by (so what it counts stale is what the next review redraws).

    One listing of the review folder, then stat calls and the info.json of each page it holds:
    no image is opened and nothing is drawn.

    Args:
        run_dir: the run directory.
        records: the run's pages (`manifest.read_pages`).
        review_cfg: the review options the next review runs with.

    Returns:
        One `stage_protocol.Outputs`, "boards" (a failed page keeps no board), whose note says whether
        the gallery holds every page: one of some pages, or a shard's written before the other
        shards drew their boards, is not ``whole``.

    Raises:
        ValueError: bad review options (one line).
    """
    params = parse_review_cfg(review_cfg)
    run_dir = Path(run_dir)
    plan = review_plan(run_dir, params)
    tally, reviewed = Tally(), rundir.reviewed_pages(run_dir)
    for record in records:
        if record.page_id not in reviewed:   # no board, no failure: nothing to check
            continue
        page_dir = rundir.review_page_dir(run_dir, record.page_id)
        inputs, recorded, current = board_state(run_dir, record, plan)
        if current:
            tally.add(record.page_id, "done")
        elif (page_dir / rundir.REVIEW_FAILED).is_file():
            tally.add(record.page_id, "failed")
        elif (page_dir / "info.json").is_file():
            tally.add(record.page_id, "stale", _why_stale(recorded, inputs))
    shown = gallery_pages(rundir.gallery_path(run_dir))
    whole = shown is not None and shown >= len(records)
    note = ("gallery no" if shown is None else "gallery yes" if whole
            else f"gallery {shown} of {len(records)} pages (rerun newsbag review)")
    if shown is not None and not gallery_links_current(run_dir, [r.page_id for r in records]):
        whole, note = False, f"{note}; transcript links out of date (rerun newsbag review)"
    inputs = (*(f"source:{s}" for s in plan.source_dirs), *(f"fusion:{v}" for v in plan.gallery_dirs))
    return [tally.outputs("boards", len(records), note=note, whole=whole, inputs=inputs)]


def _input_name(key: str) -> str:
    """A board input as a reader knows it: "fake/v", "fusion/C", "fake/w (its failure record)"."""
    kind, _, name = key.partition(":")
    return {"source": name, "fused": f"fusion/{name}"}.get(kind, f"{name} (its failure record)")


def _why_stale(recorded: dict, inputs) -> str:
    """Why a board not current is stale, from its info.json (`recorded`; {} when missing or torn)
    and its inputs now (`state.Inputs`), by `stage_protocol.stale_reason`."""
    if not recorded:
        return "its info.json, scan or gallery data is missing or cut short"
    known = recorded.get("inputs") if isinstance(recorded.get("inputs"), dict) else {}
    drawn_from = {k: freshness.made_identity(e) or e for k, e in known.items()}
    made = Made(recorded.get("fingerprint"), drawn_from, {"review": recorded.get("revision")})
    return stale_reason(made, inputs.fingerprint, inputs.identities, named=_input_name,
                        options="its options, the fused variant it shows or its scan changed")


def run_review(
    run_dir: Path,
    page_ids: list[str],
    review_cfg: Mapping[str, Any],
    *,
    force: bool = False,
    workers: int = 1,
    progress: Callable[[str, str], None] | None = None,
) -> dict:
    """Review `page_ids`, rank the run's pages by review priority and write RUN/review/{pages,
    top<N>_informative (full boards of the top N), index.html, scores.tsv, evaluation.js}.

    A page whose review was made from its current inputs (and with the same options) is
    skipped unless `force`. An unreadable source page (broken, or refused by the contract) is
    dropped from its board, named there and in info.json; a page with an unreadable image or
    fused page is logged in one line, recorded as failed and the rest goes on.

    Args:
        run_dir: the run directory (manifest at RUN/manifests/pages.jsonl).
        page_ids: pages to review, in manifest order.
        review_cfg: the config's review stage dict (top_n, max_board_width, variants).
        force: redraw every board.
        workers: processes drawing boards (pages stream through the pool).
        progress: called as ``progress(page_id, status)`` with status done|skipped|failed.

    Returns:
        Counts (pages, done, skipped, failed), ``failures`` [{page_id, error}], ``top``
        (page ids, best first) and the paths of index.html, scores.tsv and the top folder.

    Raises:
        ValueError: unknown or bad review options.
    """
    params = parse_review_cfg(review_cfg)
    run_dir = Path(run_dir)
    records = {r.page_id: r for r in read_pages(run_dir)}
    plan = review_plan(run_dir, params)
    if plan.missing:
        log.warning("review: fused variant(s) %s not found under outputs/fusion; skipped", ", ".join(plan.missing))

    # Draw the selected pages; the ranking, scores.tsv, top-N pack and gallery cover every
    # page of the manifest, using the boards of the other pages that are still current.
    selected = set(page_ids)
    everyone = members(run_dir, page_ids)
    outcomes = _review_pages(run_dir, everyone, selected, records, plan, params, force, workers, progress)
    computed = [o for o in outcomes if o.page_id in selected]
    kept = [o.page_id for o in computed if o.scan_gone]
    if kept:
        log.warning("review: %d board(s) kept as drawn though their scan is gone (%s: %s); put the scans back "
                    "where the manifest says to redraw them", len(kept), kept[0], records[kept[0]].image_path)

    failed = [o for o in outcomes if o.status == "failed"]
    ranked = sorted((o for o in outcomes if o.status != "failed"),
                    key=lambda o: (-o.info["priority"]["review_priority"], o.page_id))
    top = ranked[: params.top_n]
    review_dir = rundir.review_dir(run_dir)
    top_name = f"top{params.top_n}_informative"
    top_dir = review_dir / top_name / "pages"
    boards = top_boards(run_dir, records, plan, params, top, top_dir, selected if force else set())
    scores_path = write_scores(review_dir / "scores.tsv", ranked, failed)
    context = gallery_context(run_dir, ranked, failed, plan.source_dirs, plan.gallery_dirs, plan.recommended,
                               top_name, absent=len(everyone) - len(outcomes), boards=boards)
    write_evaluation_data(run_dir)
    index = write_gallery(review_dir / "index.html", context)
    failures = [{"page_id": o.page_id, "error": o.error} for o in computed if o.status == "failed"]
    record_failures(run_dir, "review", failures)
    return {
        "pages": len(everyone),
        "selected": len(page_ids),
        "ok": sum(o.status == "ok" for o in computed),
        "skipped": sum(o.status == "skipped" for o in computed),
        "failed": len(failures),
        "failures": failures,
        "top": [o.page_id for o in top],
        "index": str(index),
        "scores": str(scores_path),
        "top_dir": str(top_dir),
    }


def _review_pages(run_dir: Path, everyone: list[str], selected: set[str], records: dict, plan: Plan,
                  params: ReviewParams, force: bool, workers: int,
                  progress: Callable[[str, str], None] | None) -> list[Outcome]:
    """The outcome of every page of `everyone` in its order: the `selected` ones reviewed (drawn
    unless current, each reported to `progress`), the others as their last review left them
    (skipped when current, failed, or left out when neither)."""
    tasks = ((run_dir, page_id, records.get(page_id), plan, params, force and page_id in selected,
              page_id in selected)
             for page_id in everyone)
    outcomes: list[Outcome] = []
    # Boards are independent and CPU bound (decode, draw, PNG encode).
    with page_map(workers) as run_map:
        for outcome in run_map(_review_task, tasks):
            if outcome.page_id not in selected:
                if outcome.status in ("skipped", "failed"):
                    outcomes.append(outcome)
                continue
            if outcome.status == "failed":
                log.error("review: page %s: %s", outcome.page_id, outcome.error)
            outcomes.append(outcome)
            if progress is not None:
                progress(outcome.page_id, outcome.status)
    order = {p: k for k, p in enumerate(everyone)}
    outcomes.sort(key=lambda o: order[o.page_id])
    return outcomes
