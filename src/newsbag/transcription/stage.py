"""The transcription stage: the text of each page's fused text and title regions, in reading order, as articles.

For every selected page it plans crops from the chosen fused variant: its text regions (or
their column parts) for a recogniser that finds their lines (Tesseract), else the run's
text-line source cut to them (no second detection); has the recogniser runner read them in
its own env (one model load per job, GPU first, resumable, crash-isolated like every model
stage), and writes ``outputs/transcripts/<variant>/<page_id>.json`` and ``.txt``. The run-level
``transcripts.jsonl`` (one line per article) always covers every page of the manifest.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterable, Mapping

import numpy as np

from .. import freshness, rundir
from . import files
from ..stage_protocol import Outputs, Tally
from ..errors import InputError, RunDirError, first_line, page_failure
from ..failures import record_failures
from ..config import ModelStage
from ..contract import boxes_from_page
from ..io import read_json, read_json_object, write_json
from ..manifest import read_pages
from ..page_reader import read_page
from ..revisions import revision
from .bag import BagStage, bag_stages, read_lines, recognizer_record
from .cascade import NOISE, noise_lines
from .options import TranscriptionParams, cascade_rule, crop_unit, parse_transcription_options
from ..fusion.grid import spans_columns
from .recognizer_choice import fallback, usable_recognizer
from .resolution import ResolutionCheck
from .transcript import (assemble, column_pieces, crop_plan, inside_larger, line_rows, plan_page, plan_regions,
                         take_block_text)

if TYPE_CHECKING:
    from ..page_outcomes import PageOutcome

__all__ = ["recognizer_stages", "run_transcription", "transcript_status"]

log = logging.getLogger(__name__)

_READ_CLASSES = ("text", "title")
# What a recogniser may tell of a line besides its text and score: word boxes with their
# confidences, the model that read it (the per-page choice between several); and a bag's
# winner and every member's reading (`bag.voted_lines`); the reading of a line left out as noise.
_LINE_EXTRAS = ("words", "model", "won", "readings", NOISE)


def recognizer_stages(options: Mapping[str, Any] | TranscriptionParams) -> list[ModelStage]:
    """Each recogniser runner (one, or a bag's members) as a model stage (`bag.bag_stages`), as
    `newsbag doctor` checks them (no plan folder)."""
    params = options if isinstance(options, TranscriptionParams) else parse_transcription_options(options)
    return [b.stage for b in bag_stages(params)]


@dataclass(frozen=True)
class _Regions:
    """What a page's transcript reads, one piece per text/title region, or per column part where
    the reading order cuts text fused across a gutter (`transcript.column_pieces`)."""

    page: dict               # the fused page
    idx: np.ndarray          # (P,) each piece's index into the page's regions
    xyxy: np.ndarray         # (P, 4) its box, pixels
    rank: np.ndarray         # (P,) its reading rank
    article: np.ndarray      # (P,) its article
    is_title: np.ndarray     # (P,) bool
    bbox: list               # its box for the transcript: None, the region's own; a column part's otherwise


def _read_regions(fused_path: Path, page_id: str, lines: np.ndarray | None) -> _Regions:
    """The fused page and what its transcript reads."""
    page = read_page(fused_path, page_id)
    boxes = boxes_from_page(page)
    coarse = boxes.coarse
    read = np.isin(coarse, _READ_CLASSES)
    # Running text more than half inside a larger region read is read with it, not again; a
    # title stays, as its article's headline.
    within = np.zeros(len(read), dtype=bool)
    within[read] = inside_larger(boxes.xyxy[read])
    idx = np.flatnonzero(read & ~(within & (coarse == "text")))
    order = boxes.data["order"][idx]
    rank = np.where(order >= 0, order, order.max(initial=0) + 1 + np.arange(idx.size))  # unordered ones last
    # Fusion writes every region's article; `boxes_from_page` makes no column of a page without regions.
    article = boxes.data["article"][idx] if idx.size else np.zeros(0, np.int64)
    xyxy, of, rank, is_part = column_pieces(boxes.xyxy, coarse == "text", idx, rank, lines,
                                            boxes.meta.width, boxes.meta.height)
    bbox = [np.round(b, 2).tolist() if part else None for b, part in zip(xyxy, is_part)]
    return _Regions(page, idx[of], xyxy, rank, article[of], coarse[idx][of] == "title", bbox)


def _lines(lines_path: Path | None, page_id: str) -> np.ndarray | None:
    if lines_path is None or not lines_path.exists():
        return None
    return boxes_from_page(read_page(lines_path, page_id)).xyxy


def _transcript(plan: dict, line_regions: list[dict], variant: str) -> dict:
    """The per-page transcript record of a `_plan_record` and the lines read for its crops:
    regions (with lines) in reading order, articles, page text.

    Pieces that took block text have no recognised lines. A region read as column parts
    appears once per part (same `region`, the part's `bbox_xyxy`).
    """
    pieces = plan["pieces"]
    # A line's `order` is its crop's index in the plan: the runner drops a crop under 1 px (its
    # output cleaning), so pairing by position would move every later line one region back.
    region_of = [plan["region_of"][line["order"]] for line in line_regions]
    texts, joins = assemble(len(pieces), np.asarray(region_of, dtype=np.intp),
                            [r.get("text") or "" for r in line_regions])
    by_region: list[list[dict]] = [[] for _ in pieces]
    for r, line, join in zip(region_of, line_regions, joins):
        by_region[r].append({"bbox_xyxy": line["bbox_xyxy"], "text": line.get("text") or "", "score": line.get("score"),
                             **{k: line[k] for k in _LINE_EXTRAS if k in line}, **({"hyphen": join} if join else {})})
    for k, piece in enumerate(pieces):
        if piece["blocks"]:
            by_region[k] = piece["blocks"]
            texts[k] = "\n".join(b["text"] for b in piece["blocks"])
    regions, by_article = [], {}
    for k in np.argsort([piece["rank"] for piece in pieces], kind="stable"):
        piece = pieces[k]
        regions.append({"region": piece["region"], "bbox_xyxy": piece["bbox_xyxy"], "class": piece["class"],
                        "order": piece["order"], "article": piece["article"], "text": texts[k],
                        "lines": by_region[k]})
        entry = by_article.setdefault(piece["article"], {"article": piece["article"], "regions": [], "headline": "",
                                                         "texts": []})
        if piece["region"] not in entry["regions"]:   # a region read in parts is one region of its article
            entry["regions"].append(piece["region"])
        if piece["is_title"] and texts[k] and entry["headline"] == "" and len(entry["texts"]) == 0:
            entry["headline"] = texts[k].replace("\n", " ")
        if texts[k]:
            entry["texts"].append(texts[k])
    # An article is one paragraph per region (its headline first where it has one); the page
    # text, the .txt, is its articles with a blank line between them.
    arts = [{"article": a["article"], "regions": a["regions"], "headline": a["headline"],
             "text": "\n".join(t.replace("\n", " ") for t in a["texts"])}
            for a in sorted(by_article.values(), key=lambda a: a["article"])]
    models = sorted({line["model"] for line in line_regions if "model" in line})
    return {"page_id": plan["page_id"], "image": plan["image"], "variant": variant, "fingerprint": plan["fingerprint"],
            "revision": plan.get("revision"), **({"models": models} if models else {}), "regions": regions,
            "articles": arts, "text": "\n\n".join(a["text"] for a in arts if a["text"])}


def _block_text(block_dirs: list[tuple[str, Path]], page_id: str) -> tuple[np.ndarray, list[dict]]:
    """Text regions of the block sources, (name, folder) pairs, on this page: (B, 4) boxes and their line records."""
    records = []
    for name, folder in block_dirs:
        path = folder / f"{page_id}.json"
        if not path.exists():
            continue
        for region in read_page(path, page_id)["regions"]:
            text = (region.get("text") or "").strip()
            if text:
                records.append({"bbox_xyxy": region["bbox_xyxy"], "text": text, "score": region.get("score"),
                                "source": name})
    xyxy = np.array([r["bbox_xyxy"] for r in records], dtype=np.float64).reshape(-1, 4)
    return xyxy, records


def _take_blocks(region_xyxy: np.ndarray, crops: np.ndarray, region_of: np.ndarray, block_xyxy: np.ndarray,
                 block_records: list[dict]) -> tuple[np.ndarray, list[list[dict]]]:
    """Regions that take block text (`transcript.take_block_text`) and each region's blocks in reading order."""
    taken, block_region = take_block_text(region_xyxy, crops, region_of, block_xyxy)
    per_region: list[list[dict]] = [[] for _ in range(region_xyxy.shape[0])]
    for r in np.flatnonzero(taken):
        mine = np.flatnonzero(block_region == r)
        per_region[r] = [block_records[b] for b in mine[line_rows(block_xyxy[mine])]]
    return taken, per_region


@dataclass(frozen=True)
class _PagePlan:
    """How a page is read: its pieces, the crops left for the recogniser and the block text taken."""

    regions: _Regions
    crops: np.ndarray                # (K, 4) in reading order
    region_of: np.ndarray            # (K,) each crop's piece
    block_lines: list[list[dict]]    # per piece, the blocks whose text it took from a page-reading model
    units: list[str]                 # (K,) what each crop is: "region" or "line" (runners/_plan.py)
    sample: np.ndarray               # (S, 4) the page's lines for a choice between models (none: the crops are lines)
    crop_lines: list[list[int]]      # (K,) a region crop's lines in `sample` (runners/_plan.py)


def _plan_crops(inputs: _PageInputs, page_id: str, unit: str, block_dirs: list[tuple[str, Path]]) -> _PagePlan:
    """Read a page's regions, plan its crops and let the pieces that can take block text; the
    crops of those are not read again."""
    lines = _lines(inputs.lines_path, page_id)
    regions = _read_regions(inputs.fused_path, page_id, lines)
    line_crops, line_of = plan_page(regions.xyxy, regions.rank, lines)
    if unit == "region":   # a title is one line: whole even where it spans columns
        whole = regions.is_title | ~spans_columns(regions.xyxy, regions.page["image"]["width"], lines)
        crops, region_of, is_region = plan_regions(regions.xyxy, regions.rank, line_crops, line_of, whole)
    else:
        crops, region_of, is_region = line_crops, line_of, np.zeros(len(line_crops), bool)
    taken, block_lines = _take_blocks(regions.xyxy, crops, region_of, *_block_text(block_dirs, page_id))
    read = ~taken[region_of]
    units = np.where(is_region[read], "region", "line").tolist()
    kept = ~taken[line_of]
    sample, sample_of = (line_crops[kept], line_of[kept]) if is_region[read].any() else (np.zeros((0, 4)), line_of[:0])
    crop_lines = [np.flatnonzero(sample_of == r).tolist() if whole else []
                  for r, whole in zip(region_of[read], is_region[read])]
    return _PagePlan(regions, crops[read], region_of[read], block_lines, units, sample, crop_lines)


def _plan_record(plan: _PagePlan, fingerprint: str) -> dict:
    """What a page's transcript is made of besides its recognised lines, as JSON: one piece per
    region read (or column part), the crops' piece index and the fingerprint. It waits for the
    recogniser in the page's plan file, so a call over 100k pages holds no fused page in memory
    (each ~1 MB with its members)."""
    r = plan.regions
    pieces = []
    for k, i in enumerate(r.idx.tolist()):
        region = r.page["regions"][i]
        pieces.append({"region": i, "bbox_xyxy": region["bbox_xyxy"] if r.bbox[k] is None else r.bbox[k],
                       "class": region.get("class"), "order": region.get("order"), "article": int(r.article[k]),
                       "is_title": bool(r.is_title[k]), "rank": r.rank[k].item(), "blocks": plan.block_lines[k]})
    return {"page_id": r.page["page_id"], "image": r.page["image"], "fingerprint": fingerprint,
            "revision": revision("transcription"), "region_of": np.asarray(plan.region_of).tolist(), "pieces": pieces}


def _page_error(page_id: str, exc: Exception) -> str:
    """The one-line failure of a page: a page file that cannot be read names itself; anything
    else is an error nobody foresaw (`errors.page_failure`)."""
    if isinstance(exc, (OSError, ValueError)):
        return f"page {page_id}: {first_line(exc)}"
    return page_failure(page_id, exc)


def _block_dirs(run_dir: Path, params: TranscriptionParams) -> list[tuple[str, Path]]:
    """(name, folder) of each block text source."""
    return [(name, rundir.source_dir(run_dir, *name.split("/"))) for name in params.block_text_sources]


@dataclass(frozen=True)
class _PageInputs:
    """What a page's transcript is read from, and whether the one it has is current."""

    fused_path: Path
    lines_path: Path | None          # None without a lines source
    fused_identity: list[int] | None  # None: fusion failed on the page or never ran
    fingerprint: str
    current: bool                    # never with ``force``
    record: dict | None              # the transcript record, when current
    rerecord: bool = False           # its input record a call writes again (`freshness.identify_by_record`)


def _page_inputs(run_dir: Path, variant: str, params: TranscriptionParams, stages: list[BagStage]
                 ) -> Callable[..., _PageInputs]:
    """A page's `_PageInputs` by page id: the one rule `run_transcription` skips pages by and
    `transcript_status` counts them by (``write=False``: it records nothing).

    Inputs are identified by `freshness.identify_by_record`: by their stats, or, where those changed (a run
    copied without its mtimes), by the content recorded in the page's `rundir.inputs_record_path`.
    """
    params_rec = {"lines_source": params.lines_source, "unit": crop_unit(params), **recognizer_record(params, stages)}
    if params.drop_below:   # only then, so fingerprints of runs without it stay the same
        params_rec["drop_below"] = params.drop_below
    if params.block_text_sources:   # only then, so fingerprints of runs without it stay the same
        params_rec["block_text_sources"] = list(params.block_text_sources)
    fused_dir = rundir.fused_dir(run_dir, variant)
    out_dir = rundir.transcript_dir(run_dir, variant)
    lines_dir = rundir.source_dir(run_dir, *params.lines_source.split("/")) if params.lines_source else None
    block_dirs = _block_dirs(run_dir, params)

    def made_from(idents: dict) -> str:
        """The fingerprint of a transcript made from inputs of these (`freshness.recorded_identities`)."""
        return freshness.fingerprint("transcription", revision("transcription"), params_rec, idents.get("fused"),
                                  idents.get("lines"),
                                  *(idents.get(f"block:{name}") for name, _ in block_dirs))

    def inputs(page_id: str, *, force: bool = False, write: bool = True) -> _PageInputs:
        fused_path = fused_dir / f"{page_id}.json"
        lines_path = lines_dir / f"{page_id}.json" if lines_dir else None
        paths = {"fused": str(fused_path), **({"lines": str(lines_path)} if lines_path else {}),
                 **{f"block:{name}": str(folder / f"{page_id}.json") for name, folder in block_dirs}}
        found: dict = {}

        def stale(idents: dict) -> bool:
            found["record"] = None if force else read_json_object(out_dir / f"{page_id}.json")
            return found["record"] is None or found["record"].get("fingerprint") != made_from(idents)

        idents, left = freshness.identify_by_record(
            paths, rundir.inputs_record_path(run_dir, "transcription", variant, page_id), stale, write=write)
        return _PageInputs(fused_path, lines_path, idents.get("fused"), made_from(idents), not left,
                           None if left else found["record"], idents.rerecord)

    return inputs


def transcript_status(run_dir: Path, records: list, options: Mapping[str, Any]) -> list[Outputs]:
    """Transcripts that are current, stale, failed or not read yet (pending), by the rule
    `run_transcription` skips pages by (what it counts stale is what the next call reads again).

    A page is done while its record is current and its ``.txt`` whole; the variant's outputs are
    ``whole`` while transcripts.jsonl is (`files.index_is_current`).

    Returns:
        One `stage_protocol.Outputs`, named by the variant read; none when the stage has no transcript
        folder (it is opt-in and never ran) or no variant to read.

    Raises:
        ValueError: bad transcription options (one line).
    """
    params = parse_transcription_options(options)
    variant = rundir.recommended_variant(run_dir) if params.variant == "recommended" else params.variant
    out_dir = rundir.transcript_dir(run_dir, variant) if variant else None
    if out_dir is None or not out_dir.is_dir():
        return []
    # Read by the configured recogniser, or by the one a call falls back to on a machine without
    # its weights (`recognizer_choice`): either is current, and status probes nothing to know which.
    readers = [_page_inputs(run_dir, variant, p, bag_stages(p, out_dir / "_plan"))
               for p in (params, fallback(params)) if p is not None]

    def inputs(page_id: str, write: bool) -> _PageInputs:
        first = None
        for read in readers:   # the configured recogniser first: most pages stop there
            page = read(page_id, write=write)
            if page.current:
                return page
            first = first or page
        return first

    written, failed = rundir.page_files(out_dir), rundir.page_files(out_dir / rundir.FAILED_DIR)
    tally, ids = Tally(), [r.page_id for r in records]
    for page_id in ids:
        page = inputs(page_id, write=False) if page_id in written else None
        if page is not None and page.current and files.text_holds(out_dir, page_id, page.record):
            tally.add(page_id, "done", rerecord=page.rerecord)
        elif page_id in failed:
            tally.add(page_id, "failed")
        elif page is not None:
            tally.add(page_id, "stale", files.TEXT_LOST if page.current
                      else files.why_stale_record(out_dir / f"{page_id}.json"))
    whole = files.index_is_current(run_dir, variant, ids)
    read_from = (f"fusion:{variant}", *(f"source:{s}" for s in (params.lines_source, *params.block_text_sources) if s))
    return [tally.outputs(variant, len(ids), whole=whole, inputs=read_from,
                          note="" if whole else f"{files.INDEX} out of date (rerun newsbag transcribe)")]


def _write_transcript(out_dir: Path, page_id: str, plan: dict, lines: list[dict], variant: str) -> None:
    files.write_transcript(out_dir, page_id, _transcript(plan, lines, variant))


class _Transcription:
    """One call of the stage over one fused variant: its pages' plans, outcomes and search index."""

    def __init__(self, run_dir: Path, variant: str, params: TranscriptionParams,
                 progress: Callable[[str, str], None] | None):
        self.run_dir, self.variant, self.progress = run_dir, variant, progress
        self.summary: dict = {"ok": 0, "skipped": 0, "failed": 0, "failures": [], "variant": variant}
        self.out_dir = rundir.transcript_dir(run_dir, variant)
        self.plan_dir = self.out_dir / "_plan"
        self.stages, self.vote = bag_stages(params, self.plan_dir), params.vote
        self.cascade, self.drop_below = cascade_rule(params), params.drop_below
        self.inputs = _page_inputs(run_dir, variant, params, self.stages)
        self.block_dirs = _block_dirs(run_dir, params)
        self.unit = crop_unit(params)
        self.dropped = False   # a transcript was removed: the search index changes
        self.resolution = ResolutionCheck.for_family(self.stages[0].stage.family)   # a bag's first member

    def settle(self, page_id: str, error: str | None, shown: bool = True) -> None:
        """Count a page's outcome; a failed page keeps a failure record (`transcript_status`) until it is read."""
        self.summary["ok" if error is None else "failed"] += 1
        if error is None:
            rundir.failure_path(self.out_dir, page_id).unlink(missing_ok=True)
        else:
            self.summary["failures"].append({"page_id": page_id, "error": error})
            write_json(rundir.failure_path(self.out_dir, page_id), {"page_id": page_id, "error": error})
        if self.progress and shown:
            self.progress(page_id, "ok" if error is None else "failed")

    def plan(self, page_id: str, force: bool) -> bool:
        """Plan a page whose transcript is not current; whether it waits for the recogniser (a
        page with nothing left to recognise is written, a page that cannot be planned failed)."""
        inputs = self.inputs(page_id, force=force)
        if inputs.current:
            files.restore_text(self.out_dir, page_id, inputs.record)
            self.summary["skipped"] += 1
            if self.progress:
                self.progress(page_id, "skipped")
            return False
        try:
            page_plan = _plan_crops(inputs, page_id, self.unit, self.block_dirs)
        except RunDirError:  # not this page's fault: stop the stage with one line
            raise
        except Exception as exc:  # noqa: BLE001 - the page boundary
            # fusion failed (or never ran): no text of an older layout passes as current
            if inputs.fused_identity is None:
                self.dropped = files.drop_transcript(self.out_dir, page_id) or self.dropped
            self.settle(page_id, _page_error(page_id, exc))
            return False
        plan = _plan_record(page_plan, inputs.fingerprint)
        self.resolution.check(page_id, page_plan.crops, page_plan.units, page_plan.sample)
        if len(page_plan.crops) == 0:   # nothing left to recognise: no runner call for this page
            _write_transcript(self.out_dir, page_id, plan, [], self.variant)
            self.settle(page_id, None)
            return False
        # The runner reads the crops, what each is and the page size they are in (runners/_plan.py);
        # the rest waits here for its answer.
        image = page_plan.regions.page["image"]
        write_json(self.plan_dir / f"{page_id}.json",
                   {**crop_plan(page_plan.crops, page_plan.units, [image["width"], image["height"]], page_plan.sample,
                                page_plan.crop_lines), "transcript": plan}, compact=True)
        return True

    def on_read(self, o: PageOutcome) -> None:
        """A page's transcript is written as soon as the recogniser settles it, so a call
        killed midway (Slurm's time limit) keeps every page read so far for its rerun."""
        if o.status != "ok":   # the runner's error says why, not which page: the summary names it
            self.settle(o.page_id, f"page {o.page_id}: {o.error or o.status}")
            return
        try:
            record = read_json(self.plan_dir / f"{o.page_id}.json")
            # On a page too small for the recogniser every line is blurred up and scored low: a
            # score there no longer tells text from specks, and the noise rule would cut text. This
            # call planned the page (`plan`), whose resolution check found it low or not.
            below = 0.0 if o.page_id in self.resolution.low else self.drop_below
            lines = noise_lines(read_page(self.out_dir / "_lines" / f"{o.page_id}.json", o.page_id)["regions"], below)
            _write_transcript(self.out_dir, o.page_id, record["transcript"], lines, self.variant)
        except RunDirError:
            raise
        except Exception as exc:  # noqa: BLE001 - the page boundary
            self.settle(o.page_id, _page_error(o.page_id, exc))
        else:
            self.settle(o.page_id, None)

    def recognise(self, todo: list) -> None:
        """Have the recognisers read the planned pages, each transcript written as it comes (`on_read`)."""
        read = read_lines(self.run_dir, self.stages, self.vote, todo, self.out_dir / "_lines", self.on_read,
                          self.cascade)
        self.summary["device_used"] = read["device_used"]
        if read["notes"]:
            self.summary["notes"] = read["notes"]

    def index(self, page_ids: Iterable[str]) -> None:
        """Rebuild the search index when a transcript changed (a no-change rerun over 100k pages
        must not reread every transcript) or it is older than one of `page_ids`' transcripts."""
        if not (self.summary["ok"] or self.dropped
                or not files.index_is_current(self.run_dir, self.variant, page_ids)):
            return
        self.summary["articles"], left_out = files.write_search_index(self.run_dir, self.variant)
        failed = {f["page_id"] for f in self.summary["failures"]}
        for failure in left_out:   # pages this call may not have selected: no progress line
            if failure["page_id"] not in failed:
                self.settle(failure["page_id"], failure["error"], shown=False)


def run_transcription(run_dir: Path, page_ids: list[str], options: Mapping[str, Any], *, force: bool = False,
                      workers: int = 1, progress: Callable[[str, str], None] | None = None) -> dict:
    """Transcribe the selected pages of the chosen fused variant; resume pages whose inputs did not change.

    Raises:
        InputError: the stage reads the recommended variant and the run has none (fusion not
            run, or every variant skipped).
    """
    t0 = time.monotonic()
    params, note = usable_recognizer(options)
    variant = rundir.recommended_variant(run_dir) if params.variant == "recommended" else params.variant
    if not variant:
        raise InputError("transcription: no recommended variant in outputs/fusion/summary.json; run fusion first "
                         "or set the stage's variant")
    call = _Transcription(run_dir, variant, params, progress)
    if note:   # said once, before the pages' lines
        log.warning(note)
        call.summary["recognizer_note"] = note
    records = {p.page_id: p for p in read_pages(run_dir)}
    todo = [records[page_id] for page_id in page_ids if call.plan(page_id, force)]
    if todo:
        call.recognise(todo)
    call.index(records)   # the index covers the whole manifest
    record_failures(run_dir, "transcription", call.summary["failures"])
    call.summary.update(call.resolution.summary())
    call.summary["seconds"] = round(time.monotonic() - t0, 2)
    return call.summary
