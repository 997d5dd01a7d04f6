"""The review stage: each page's scan, thumbnail and box data, its review priority, full boards of the
top-N pages and the HTML gallery."""

from __future__ import annotations

import io
import os
import logging
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping

from PIL import Image, PngImagePlugin

from ..contract import Boxes, PageMeta, boxes_from_page
from .. import freshness, rundir
from ..builtin import Outputs
from ..columns import LEGEND, SCORE_NOTE
from ..errors import RunDirError, first_line, page_failure
from ..failures import record_failures
from ..io import atomic_write_bytes, atomic_write_text, read_json, write_json
from ..images import open_accepted_image
from ..manifest import read_pages
from ..page_reader import read_page
from ..parallel import page_map
from ..revisions import revision, why_stale
from .options import PANEL_MIN, ReviewParams, parse_review_cfg
from .gallery import DATA_JS, SCANS, THUMB, gallery_links_current, gallery_pages, page_layer, write_gallery, write_page_data
from . import reading
from .evaluation import EVALUATION_JS, write_evaluation_data
from .render import ARTICLE_COLOR, CLASS_COLORS, render_board
from .scan import SCAN_WIDTH, black_and_white, files_whole, fit_width, to_one_bit, write_scan, written_files
from .score import PageScore, score_page

__all__ = ["run_review", "board_status"]

log = logging.getLogger(__name__)

# Board panels are as wide as one row allows, but never below PANEL_MIN (a box and its label must be
# checkable one by one) nor above 1000 px.
_PANEL_MAX = 1000
# Boards are drawn for the top pages only (every page has the scan and data.js, which the page
# view draws its boxes from): a black-and-white page's as PNG of a 64-colour palette (0.4-0.7 MB
# for seven NZZ panels, where a JPEG of the sharp edges is ~2 MB), a grey page's as JPEG. zlib
# level 3 encodes ~2.7x faster than the default 6, and smaller.
_BOARD_EXTS = (".png", ".jpg")
_BOARD_OF = "newsbag-review"   # a board's PNG text key: the fingerprint of the page review it shows
_BOARD_COLOURS = 64
_BOARD_QUALITY = 70
_PNG_LEVEL = 3
_FAILED_LISTED = 200


class _PageError(Exception):
    """One-line reason a page cannot be reviewed (the batch goes on)."""


@dataclass
class _Outcome:
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
class _Plan:
    """What every board of the run is drawn from, besides its page's own files."""

    source_dirs: dict[str, Path]
    fused_dirs: dict[str, Path]    # the fused variants the board shows
    gallery_dirs: dict[str, Path]  # every fused variant: the gallery overlays them all
    recommended: str | None
    missing: list[str]             # fused variants asked for and not found
    options: dict                  # as info.json records them; part of every board's fingerprint


def _plan(run_dir: Path, params: ReviewParams) -> _Plan:
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
    return _Plan(sources, shown, found, recommended, [v for v in params.variants or () if v not in found], options)


def _load_page(path: Path, page_id: str) -> dict:
    try:
        return read_page(path, page_id)
    except ValueError as exc:
        raise _PageError(f"unreadable page {exc}") from None


def _read_sources(paths: dict[str, str], page_id: str) -> tuple[dict[str, dict], dict[str, str]]:
    """(readable source pages, one-line reason per unreadable one) by name: as in fusion, a bad
    source page is dropped from its board (and named), not the board failed with it."""
    pages, dropped = {}, {}
    for name, path in paths.items():
        try:
            pages[name] = read_page(path, page_id)
        except ValueError as exc:
            dropped[name] = first_line(exc)
    return pages, dropped


def _load_image(path: str, panel_width: int) -> Image.Image:
    try:
        with open_accepted_image(path) as im:
            # JPEG decodes at 1/2..1/8 scale for free; other formats ignore the hint.
            im.draft("RGB", (panel_width, max(1, panel_width * im.height // max(1, im.width))))
            # Box-reduce in the file's own mode before converting: an RGB copy of a full grey
            # broadsheet is 3x its pixels; the board's LANCZOS resize needs only ~2x panel width.
            factor = im.width // (2 * max(1, panel_width))
            if factor >= 2 and im.mode in ("L", "RGB", "RGBA"):
                return im.reduce(factor).convert("RGB")
            return im.convert("RGB")
    except (OSError, ValueError, Image.DecompressionBombError) as exc:
        raise _PageError(f"unreadable image {path}: {exc}") from None


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


def _panel_width(n_cells: int, max_board_width: int) -> int:
    one_row = (max_board_width - (n_cells + 1) * 10) // max(1, n_cells)
    return max(PANEL_MIN, min(_PANEL_MAX, one_row))


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
class _Inputs:
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


def _inputs(run_dir: Path, record, plan: _Plan, recorded: dict) -> _Inputs:
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
    return _Inputs(sources, failed_sources, fused, failed_fused, image_path, fingerprint,
                   {**source_paths, **fused_paths}, identities,
                   freshness.record_holds({**source_stats, **fused_stats}, known), on_disk is None)


def _board_state(run_dir: Path, record, plan: _Plan) -> tuple[_Inputs, dict, bool]:
    """(the board's inputs, its `_recorded_info`, whether the board is current: made from exactly them)."""
    recorded = _recorded_info(rundir.review_page_dir(run_dir, record.page_id))
    inputs = _inputs(run_dir, record, plan, recorded)
    return inputs, recorded, bool(recorded) and recorded.get("fingerprint") == inputs.fingerprint


def _review_page(run_dir: Path, record, plan: _Plan, params: ReviewParams, force: bool,
                 compute: bool = True) -> _Outcome:
    page_id = record.page_id
    page_dir = rundir.review_page_dir(run_dir, page_id)
    inputs, recorded, fresh = _board_state(run_dir, record, plan)
    if fresh and not force:
        # The common rerun: its inputs have the stats recorded (no stat again). Else a copied
        # run: the stats its inputs have now go into the record, so the next rerun reads no more.
        known = recorded.get("inputs") if inputs.record_holds else freshness.input_record(
            inputs.paths, inputs.identities, recorded.get("inputs"))
        if known != recorded.get("inputs"):
            recorded = {**recorded, "inputs": known}
            write_json(page_dir / "info.json", recorded)
        return _Outcome(page_id, "skipped", info=_listing(recorded), scan_gone=inputs.scan_gone)
    if not compute:
        # Not drawn by this call: a page whose last review failed stays listed as failed.
        try:
            return _Outcome(page_id, "failed", error=read_json(page_dir / rundir.REVIEW_FAILED)["error"])
        except (OSError, ValueError, KeyError, TypeError):
            return _Outcome(page_id, "absent")

    content = _page_content(record, plan, params, inputs)
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
    return _Outcome(page_id, "ok", info=_listing(info))


@dataclass(frozen=True)
class _Content:
    """One page as the review shows it: the scan, board panels, page-view layers and its priority."""

    image: Image.Image
    panels: list[tuple[str, Boxes]]
    panel_rows: list[dict]
    panel_width: int
    layers: list[dict]
    dropped: dict[str, str]
    reference: str | None
    priority: PageScore


def _page_content(record, plan: _Plan, params: ReviewParams, inputs: _Inputs) -> _Content:
    """Read one page's source and fused outputs and its image; raises `_PageError` on an unreadable
    image or fused page (an unreadable source page is dropped and named)."""
    page_id = record.page_id
    sources, failed_sources = inputs.sources, inputs.failed_sources
    fused, failed_fused = inputs.fused, inputs.failed_fused
    source_dirs, fused_dirs, gallery_dirs, recommended = (plan.source_dirs, plan.fused_dirs, plan.gallery_dirs,
                                                          plan.recommended)

    source_pages, dropped = _read_sources(sources, page_id)
    unusable = {*failed_sources, *dropped}  # sources that should have drawn the page and did not
    fused_pages = {name: _load_page(path, page_id) for name, path in fused.items()}
    source_boxes = {name: boxes_from_page(page, source=name) for name, page in source_pages.items()}
    fused_boxes = {name: boxes_from_page(page, source=f"fusion/{name}") for name, page in fused_pages.items()
                   if name in fused_dirs}
    panel_w = _panel_width(len(source_dirs) + len(fused_dirs), params.max_board_width)
    image = _load_image(str(inputs.image_path), max(panel_w, SCAN_WIDTH))

    meta = PageMeta(page_id=page_id, width=record.width, height=record.height)
    panels: list[tuple[str, Boxes]] = []
    panel_rows = []
    for name in source_dirs:
        if name in source_boxes:
            panels.append((name, source_boxes[name]))
        elif name in unusable:
            panels.append((f"{name} ({'UNREADABLE' if name in dropped else 'FAILED'})", Boxes.empty(meta)))
        else:
            continue
        panel_rows.append({"name": name, "regions": len(panels[-1][1]), "failed": name in unusable})
    pending = [name for name in fused_dirs if name not in fused_boxes and name not in failed_fused]
    for name in fused_dirs:
        tag = " (recommended)" if name == recommended else ""
        if name in fused_boxes:
            panels.append((f"fused {name}{tag}", fused_boxes[name]))
        else:
            state = "FAILED" if name in failed_fused else "NOT FUSED YET"
            panels.append((f"fused {name}{tag} ({state})", Boxes.empty(meta)))
        panel_rows.append({"name": f"fusion/{name}", "regions": len(panels[-1][1]), "failed": name in failed_fused}
                          | ({"pending": True} if name in pending else {}))

    reference = fused_boxes.get(recommended) if recommended else None
    if reference is None and fused_boxes:
        reference = fused_boxes[sorted(fused_boxes)[0]]
    score = score_page(source_boxes, reference, sorted(unusable),
                       fused_failed=[name for name in fused_dirs if name in failed_fused], fused_pending=pending)
    layers = [page_layer(name, "source", source_pages.get(name), failed=name in unusable)
              for name in source_dirs if name in sources or name in failed_sources]
    layers += [page_layer(f"fusion/{name}", "fused", fused_pages.get(name), failed=name in failed_fused,
                          pending=name not in fused and name not in failed_fused, recommended=name == recommended)
               for name in sorted(gallery_dirs)]
    return _Content(image, panels, panel_rows, panel_w, layers, dropped,
                    None if reference is None else reference.meta.source, score)


def _write_board(run_dir: Path, record, plan: _Plan, params: ReviewParams, outcome: _Outcome, top_dir: Path) -> str:
    """The full board of one of the top pages: a panel per source and shown fused variant, and why
    it is worth a look (the page view draws the same boxes for every page from data.js). Returns
    its file name in `top_dir`: a palette PNG of a black-and-white page, else a JPEG; either
    records the page review's fingerprint (`_board_made_from`)."""
    inputs = _inputs(run_dir, record, plan, {})
    content = _page_content(record, plan, params, inputs)
    image = content.image
    one_bit = black_and_white(image)
    if one_bit:   # drawn on the 1-bit page, the board's PNG is a third of the size
        image = to_one_bit(fit_width(image, content.panel_width)).convert("L")
    board = render_board(image, content.panels, max_panel_width=content.panel_width,
                         max_board_width=params.max_board_width, title=record.page_id,
                         note="why look: " + "; ".join(outcome.info["priority"]["reasons"]))
    made_from = outcome.info["fingerprint"]
    buf = io.BytesIO()
    if one_bit:
        note = PngImagePlugin.PngInfo()
        note.add_text(_BOARD_OF, made_from)
        board.quantize(_BOARD_COLOURS, method=Image.Quantize.FASTOCTREE).save(
            buf, format="PNG", compress_level=_PNG_LEVEL, pnginfo=note)
    else:
        fit_width(board, board.width).save(buf, format="JPEG", quality=_BOARD_QUALITY, comment=made_from)
    names = [f"{record.page_id}{ext}" for ext in _BOARD_EXTS]
    name = names[0] if one_bit else names[1]
    atomic_write_bytes(top_dir / name, buf.getvalue())
    for other in names:
        if other != name:
            (top_dir / other).unlink(missing_ok=True)
    return name


def _board_made_from(path: Path) -> str | None:
    """The page-review fingerprint a board records (PNG text chunk or JPEG comment); None when
    there is no board or it records none. Read from the header: no pixel is decoded."""
    try:
        with Image.open(path) as im:
            found = im.text.get(_BOARD_OF) if im.format == "PNG" else im.info.get("comment")
    except (OSError, ValueError, SyntaxError):
        return None
    return found.decode("ascii", "replace") if isinstance(found, bytes) else found


def _top_board(run_dir: Path, record, plan: _Plan, params: ReviewParams, outcome: _Outcome, top_dir: Path,
               force: bool) -> str | None:
    """A top page's board file name in `top_dir`, drawn unless one records the page's current review
    (current by that fingerprint, as every output is by its inputs, not by mtimes: a node whose
    clock runs ahead would stamp an old board newer); None, with one log line, when it cannot
    be drawn (its scan gone, say)."""
    for ext in _BOARD_EXTS:
        name = f"{outcome.page_id}{ext}"
        if not force and _board_made_from(top_dir / name) == outcome.info["fingerprint"]:
            return name
    try:
        if record is None:
            raise _PageError(f"not in {run_dir / rundir.MANIFEST}")
        return _write_board(run_dir, record, plan, params, outcome, top_dir)
    except RunDirError:   # not the page's fault: stop the stage with one line
        raise
    except Exception as exc:  # noqa: BLE001 - a board is one page's extra, not worth the stage
        log.error("review: page %s: board not drawn: %s", outcome.page_id,
                  exc if isinstance(exc, _PageError) else f"{type(exc).__name__}: {first_line(exc)}")
        return None


def _listing(info: dict) -> dict:
    """What the ranking, scores.tsv and gallery read of a page's info.json: a call holds it for
    every page of the run, so not the whole record (~5.7 KB a page parsed, ~0.6 GB at 100k pages)."""
    return {"priority": info["priority"], "path": info.get("path", ""), "fingerprint": info.get("fingerprint")}


def _review_task(task: tuple) -> _Outcome:
    """One page, in this process or a worker: any error but a full disk fails that page only
    (a `_PageError` with its own line, anything else with `errors.page_failure`'s)."""
    run_dir, page_id, record, plan, params, force, compute = task
    try:
        if record is None:
            raise _PageError(f"not in {run_dir / rundir.MANIFEST}")
        return _review_page(run_dir, record, plan, params, force, compute)
    except _PageError as exc:
        return _fail_page(run_dir, page_id, str(exc))
    except RunDirError:  # not this page's fault: stop the stage with one line
        raise
    except Exception as exc:  # noqa: BLE001 - the page boundary
        return _fail_page(run_dir, page_id, page_failure(page_id, exc))


def _fail_page(run_dir: Path, page_id: str, error: str) -> _Outcome:
    """A failed page keeps no board or gallery files that could pass as current, and a failure record."""
    page_dir = rundir.review_page_dir(run_dir, page_id)
    for stale in ("info.json", *SCANS, THUMB, DATA_JS):
        (page_dir / stale).unlink(missing_ok=True)
    write_json(page_dir / rundir.REVIEW_FAILED, {"page_id": page_id, "error": error})
    return _Outcome(page_id, "failed", error=error)


def _tsv_cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, list):
        value = "; ".join(map(str, value))
    return str(value).replace("\t", " ").replace("\n", " ")


# Page-list columns of the review priority: (key in info.json's "priority", label, definition,
# shown by default). The gallery shows the definitions in a legend: no tooltip reaches a touch screen.
_PRIORITY_COLUMNS = [
    ("review_priority", "priority", "how worth a look the page is (higher = look first; not a quality score): "
     "the sum of the next four", True),
    ("source_disagreement", "src Δ", "share of block boxes without a same-class partner between two sources "
     "(mean over source pairs)", True),
    ("fused_disagreement", "fused Δ", "share of boxes unmatched between the reference fused variant and each "
     "source", True),
    ("line_coverage", "lines", "share of text lines at least half inside one text region of the reference fused "
     "variant (low = text the layout misses; 1 - this enters the priority)", True),
    ("failed_share", "failed", "share of the sources that failed on the page", False),
]
# Pages whose layout scores (one per variant and source) the page view's strip plot can show:
# the highest-priority ones, so a 100k-page gallery stays small.
_STRIP_PAGES = 2000


def _gallery_context(run_dir: Path, ranked: list, failed: list, source_dirs: dict, gallery_dirs: dict,
                     recommended: str | None, top_name: str, *, absent: int, boards: Mapping[str, str | None] = {}
                     ) -> dict:
    """What index.html shows: leaderboards, one metrics row per reviewed page, failed pages, and
    how many pages of the run it leaves out (`absent`: not reviewed yet or out of date), so a
    partial or sharded review never reads as the whole run. `boards`: the file name of each full board."""
    reference = recommended or (sorted(gallery_dirs)[0] if gallery_dirs else None)
    metrics = reading.per_page_metrics(run_dir, reference)
    metric_keys = sorted({k for m in metrics.values() for k in m}, key=lambda k: (k != "score", k))
    columns = [{"key": k, "label": label, "definition": text, "extra": not shown}
               for k, label, text, shown in _PRIORITY_COLUMNS]
    columns += [{"key": f"v.{k}", "label": f"{reference} {k}" if k != "score" else f"{reference} score",
                 "definition": (f"layout score of fusion/{reference} on the page, without ground truth (higher = "
                                "better layout; the leaderboards' score)") if k == "score"
                 else f"fusion/{reference} per-page metric {k} (see the leaderboard legend)",
                 "extra": k != "score"} for k in metric_keys]
    transcripts = rundir.discover_transcripts(run_dir)
    leaderboards = [("Fusion variants", reading.leaderboard(rundir.fusion_dir(run_dir) / "variant_leaderboard.tsv")),
                    ("Sources", reading.leaderboard(rundir.fusion_dir(run_dir) / "source_leaderboard.tsv"))]
    strip_names, strip = reading.layout_scores(run_dir, {o.page_id for o in ranked[:_STRIP_PAGES]})
    rows = []
    for rank, o in enumerate(ranked, 1):
        s = o.info["priority"]
        row = [o.page_id, rank, *(s.get(k) for k, *_ in _PRIORITY_COLUMNS)]
        row += [metrics.get(o.page_id, {}).get(k) for k in metric_keys]
        row += [", ".join(s.get("failed_sources") or []), "; ".join(s.get("reasons") or []), o.info.get("path", ""),
                boards.get(o.page_id), reading.transcript_variants(run_dir, o.page_id, transcripts),
                strip.get(o.page_id)]
        rows.append(row)
    return {
        "run": {
            "name": run_dir.resolve().name, "pages_ok": len(ranked), "pages_failed": len(failed),
            "pages_absent": absent, "transcript_links": reading.transcript_links(run_dir, rundir.members(run_dir, [])),
            "sources": list(source_dirs), "fused": sorted(gallery_dirs), "recommended": recommended,
            "reference": reference,
        },
        "leaderboards": leaderboards,
        "data": {"columns": columns, "rows": rows, "pages_dir": "pages", "top_dir": f"{top_name}/pages",
                 "thumb": THUMB, "transcripts_dir": "../outputs/transcripts",
                 "strip": strip_names, "recommended": recommended, "reference": reference,
                 "fields": ["page_id", "rank", *(c["key"] for c in columns), "failed_sources", "reasons", "path",
                            "board", "transcripts", "layout"],
                 "colors": {k: f"rgb{v}" for k, v in CLASS_COLORS.items()}},
        "columns": columns,
        "leaderboard_legend": [c for c in LEGEND
                               if any(c["name"] in board["columns"] for _, board in leaderboards)],
        "score_note": SCORE_NOTE,
        "failed": [{"page_id": o.page_id, "error": o.error} for o in failed[:_FAILED_LISTED]],
        "colors": CLASS_COLORS,
        "article_color": ARTICLE_COLOR,
        "scores_tsv": "scores.tsv",
        "evaluation_js": EVALUATION_JS,
    }


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
        One `builtin.Outputs`, "boards" (a failed page keeps no board), whose note says whether
        the gallery holds every page: one of some pages, or a shard's written before the other
        shards drew their boards, is not ``whole``.

    Raises:
        ValueError: bad review options (one line).
    """
    params = parse_review_cfg(review_cfg)
    run_dir = Path(run_dir)
    plan = _plan(run_dir, params)
    counts = dict.fromkeys(("done", "stale", "failed", "pending"), 0)
    reasons: Counter = Counter()
    reviewed, done = rundir.reviewed_pages(run_dir), set()
    for record in records:
        if record.page_id not in reviewed:   # no board, no failure: nothing to check
            counts["pending"] += 1
            continue
        page_dir = rundir.review_page_dir(run_dir, record.page_id)
        _, recorded, current = _board_state(run_dir, record, plan)
        if current:
            counts["done"] += 1
            done.add(record.page_id)
        elif (page_dir / rundir.REVIEW_FAILED).is_file():
            counts["failed"] += 1
        elif (page_dir / "info.json").is_file():
            counts["stale"] += 1
            reasons[(why_stale("review", recorded.get("revision")) if recorded
                     else "its info.json, scan or gallery data is missing or cut short") or "its inputs or options changed"] += 1
        else:
            counts["pending"] += 1
    shown = gallery_pages(rundir.gallery_path(run_dir))
    whole = shown is not None and shown >= len(records)
    note = ("gallery no" if shown is None else "gallery yes" if whole
            else f"gallery {shown} of {len(records)} pages (rerun newsbag review)")
    if shown is not None and not gallery_links_current(run_dir, [r.page_id for r in records]):
        whole, note = False, f"{note}; transcript links out of date (rerun newsbag review)"
    inputs = (*(f"source:{s}" for s in plan.source_dirs), *(f"fusion:{v}" for v in plan.gallery_dirs))
    return [Outputs("boards", **counts, reasons=dict(reasons.most_common()), note=note, whole=whole, inputs=inputs,
                    done_pages=frozenset(done))]


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
    plan = _plan(run_dir, params)
    if plan.missing:
        log.warning("review: fused variant(s) %s not found under outputs/fusion; skipped", ", ".join(plan.missing))

    # Draw the selected pages; the ranking, scores.tsv, top-N pack and gallery cover every
    # page of the manifest, using the boards of the other pages that are still current.
    selected = set(page_ids)
    everyone = rundir.members(run_dir, page_ids)
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
    boards = _top_boards(run_dir, records, plan, params, top, top_dir, selected if force else set())
    scores_path = _write_scores(review_dir / "scores.tsv", ranked, failed)
    context = _gallery_context(run_dir, ranked, failed, plan.source_dirs, plan.gallery_dirs, plan.recommended,
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


def _review_pages(run_dir: Path, everyone: list[str], selected: set[str], records: dict, plan: _Plan,
                  params: ReviewParams, force: bool, workers: int,
                  progress: Callable[[str, str], None] | None) -> list[_Outcome]:
    """The outcome of every page of `everyone` in its order: the `selected` ones reviewed (drawn
    unless current, each reported to `progress`), the others as their last review left them
    (skipped when current, failed, or left out when neither)."""
    tasks = ((run_dir, page_id, records.get(page_id), plan, params, force and page_id in selected,
              page_id in selected)
             for page_id in everyone)
    outcomes: list[_Outcome] = []
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


def _top_boards(run_dir: Path, records: dict, plan: _Plan, params: ReviewParams, top: list[_Outcome],
                top_dir: Path, forced: set[str]) -> dict[str, str | None]:
    """Page id -> board file name (`_top_board`) of each `top` page, drawn again for the `forced`
    ones; `top_dir` keeps the boards of these pages only."""
    top_dir.mkdir(parents=True, exist_ok=True)
    keep = {f"{o.page_id}{ext}" for o in top for ext in _BOARD_EXTS}
    for old in top_dir.iterdir():
        if old.name not in keep:
            old.unlink()
    return {o.page_id: _top_board(run_dir, records.get(o.page_id), plan, params, o, top_dir, o.page_id in forced)
            for o in top}


def _write_scores(path: Path, ranked: list[_Outcome], failed: list[_Outcome]) -> Path:
    """scores.tsv at `path`: one row per ranked page, best first, then one per failed page."""
    columns = ["rank", "page_id", "status", *(k for k, *_ in _PRIORITY_COLUMNS), "failed_sources",
               "reasons_or_error"]
    lines = ["\t".join(columns)]
    for rank, o in enumerate(ranked, 1):
        s = o.info["priority"]
        lines.append("\t".join(_tsv_cell(v) for v in (
            rank, o.page_id, "ok", *(s[k] for k, *_ in _PRIORITY_COLUMNS), s["failed_sources"], s["reasons"])))
    for o in failed:
        lines.append("\t".join(_tsv_cell(v) for v in ("", o.page_id, "failed", *[""] * (len(columns) - 4), o.error)))
    atomic_write_text(path, "\n".join(lines) + "\n", keep_same=True)
    return path
