"""The export stage: write PAGE-XML / ALTO files per page and one COCO JSON per layer under RUN/exports."""

from __future__ import annotations

import logging
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping

from .. import __version__, freshness, rundir
from ..errors import RunDirError, first_line, page_failure
from ..failures import record_failures
from ..io import atomic_write_bytes, read_json
from ..manifest import members, read_pages
from ..page_reader import read_page
from ..parallel import page_map
from ..stage_protocol import Outputs, Tally, input_changes
from ..revisions import revision, why_stale
from . import FORMATS
from . import alto, coco, pagexml
from .alto import alto_xml
from .coco import write_coco
from .layout import ExportInfo, transcript_fits
from .options import ExportParams, parse_export_cfg
from .pagexml import page_xml

__all__ = ["TEXT_CHANGED", "run_export", "export_layers", "export_status"]

log = logging.getLogger(__name__)

TEXT_CHANGED = "its transcript changed"   # why a page's text-bearing exports are stale after `newsbag transcribe`
_TOOL = f"newsbag {__version__}"   # provenance written into every export; no part of any fingerprint

_WRITERS = {"page-xml": page_xml, "alto": alto_xml}
# The fingerprint sits in the first lines of every file (PAGE pcGtsId, ALTO Description,
# COCO info), so a freshness check reads this many bytes and the file's last ones (how each
# format's files end: a file cut short is no file of its inputs), never the whole file.
_HEAD_BYTES = 4096
_ENDS = {"page-xml": pagexml.FILE_END, "alto": alto.FILE_END, "coco": coco.FILE_END}


@dataclass(frozen=True)
class _Layer:
    name: str  # fusion/<variant> or sources/<stage>/<variant>
    folder: Path  # where its page JSONs are
    method: str
    transcripts: Path | None = None  # a fused variant's transcripts (the text of its regions)


def export_layers(run_dir: Path, params: ExportParams) -> list[_Layer]:
    """The layers to export: the chosen fused variants, then every source when `params.sources`."""
    fusion = rundir.fusion_dir(run_dir)
    found = rundir.discover_fused(run_dir)
    summary: dict = {}
    if (fusion / "summary.json").exists():
        try:
            summary = read_json(fusion / "summary.json")
        except (OSError, ValueError) as exc:
            log.warning("export: cannot read %s (%s); exporting every fused variant", fusion / "summary.json", exc)
    summary = summary if isinstance(summary, dict) else {}
    recommended = summary.get("recommended_variant")
    if params.variants is None:
        chosen = [recommended] if recommended in found else found
    elif params.variants == ("all",):
        chosen = found
    else:
        missing = [v for v in params.variants if v not in found]
        if missing:
            log.warning("export: fused variant(s) %s not found under %s (it has: %s); skipped", ", ".join(missing),
                        fusion, ", ".join(found) or "none")
        chosen = [v for v in params.variants if v in found]
    methods = {k: v.get("method", "fusion") for k, v in (summary.get("variants") or {}).items() if isinstance(v, dict)}
    layers = [_Layer(f"fusion/{v}", rundir.fused_dir(run_dir, v), methods.get(v, "fusion"),
                     rundir.transcript_dir(run_dir, v)) for v in chosen]
    if params.sources:
        for name in rundir.discover_sources(run_dir):
            stage, variant = name.split("/")
            layers.append(_Layer(f"sources/{name}", rundir.source_dir(run_dir, stage, variant), stage))
    return layers


def _is_fresh(path: Path, fingerprint: str, fmt: str) -> bool:
    """Whether the `fmt` file at `path` is whole and records `fingerprint`."""
    head = freshness.head_of_whole(path, _HEAD_BYTES, _ENDS[fmt])
    return head is not None and fingerprint.encode() in head


def _created(path: Path) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(path.stat().st_mtime))


def _linked_images(records: list) -> dict[str, str]:
    """page id -> the image an export names, as the manifest (`records`) has it now: the upright
    copy of a page whose original is stored turned (EXIF/TIFF Orientation: its boxes fit that copy,
    and an export naming the original would have every box turned for a reader of its pixels;
    OCR-D checks imageWidth against them), else the original (run-relative), which may have moved
    since the page was made (`pages._reanchored`: a run moved or copied elsewhere)."""
    return {p.page_id: p.image_path if p.orientation != 1 else p.path for p in records}


def _image_name(run_dir: Path, page: dict, out_dir: Path, linked: str | None = None) -> str:
    """The page image's path relative to the exported file's folder (how PAGE and COCO tools resolve
    it): the one `_linked_images` names, or the page's own."""
    image = Path(linked or page["image"]["path"])
    image = image if image.is_absolute() else run_dir / image
    return Path(os.path.relpath(os.path.abspath(image), os.path.abspath(out_dir))).as_posix()


def _record_path(run_dir: Path, layer: _Layer, page_id: str) -> Path:
    return rundir.inputs_record_path(run_dir, "export", layer.name, page_id)


def _page_fingerprint(fmt: str, layer: _Layer, idents: dict, linked: str | None,
                      made_by: int | None = None) -> str:
    """What a file of `fmt` made from these inputs records; ``made_by``: by that code revision (else the one now)."""
    code = revision(f"export/{fmt}") if made_by is None else made_by
    return freshness.fingerprint("export", fmt, code, layer.name, idents["page"], idents.get("text"),
                              *([linked] if linked else []))


def _files(exports: Path, layer: _Layer, page_id: str, formats: list[str]) -> tuple[Path, dict[str, str], dict]:
    """(one page's layer page, the inputs its exports are made from, its export file of each format)."""
    src = layer.folder / f"{page_id}.json"
    transcript_path = layer.transcripts / f"{page_id}.json" if layer.transcripts else None
    paths = {"page": str(src), **({"text": str(transcript_path)} if transcript_path else {})}
    return src, paths, {fmt: exports / fmt / layer.name / f"{page_id}{FORMATS[fmt]}" for fmt in formats}


def _stale_formats(outs: dict[str, Path], formats: list[str], layer: _Layer, linked: str | None) -> Callable:
    """``stale(idents) -> [the formats whose file is not current]``, as `freshness.identify_by_record` asks."""
    return lambda idents: [f for f in formats if not _is_fresh(outs[f], _page_fingerprint(f, layer, idents, linked), f)]


def _page_task(task: tuple) -> tuple[str, str, dict[str, str], str]:
    """Write one page of one layer in every per-page format: (page_id, layer, {fmt: status}, error).

    A file stale by its inputs' stats is checked again by the inputs as the page's record
    (`rundir.inputs_record_path`) knows them: a run copied without its mtimes (the same bytes)
    rewrites nothing, and the record takes the new stats.
    """
    run_dir, exports, layer, page_id, formats, force, linked = task
    src, paths, outs = _files(exports, layer, page_id, formats)
    record_path = _record_path(run_dir, layer, page_id)
    statuses: dict[str, str] = {}
    if not src.exists():
        # The layer has no page here (never made, or removed when it failed): an export left
        # from an earlier page would pass that old layout off as current.
        for out in (*outs.values(), record_path):
            out.unlink(missing_ok=True)
        return page_id, layer.name, statuses, ""
    try:
        stale = _stale_formats(outs, formats, layer, linked)
        idents, todo = freshness.identify_by_record(paths, record_path,
                                                 lambda idents: list(formats) if force else stale(idents))
        statuses.update((fmt, "skipped") for fmt in formats if fmt not in todo)
        page = None
        for fmt in todo:
            if page is None:
                page = read_page(src, page_id)
                transcript = read_json(paths["text"]) if "text" in idents else None
                if transcript is not None and not transcript_fits(page, transcript):
                    log.warning("export: page %s (%s): its transcript was read from an earlier layout (fusion reran "
                                "since); exported without text: rerun newsbag transcribe", page_id, layer.name)
                    transcript = None
            fingerprint = _page_fingerprint(fmt, layer, idents, linked)
            info = ExportInfo(layer=layer.name, method=layer.method, tool=_TOOL, created=_created(src),
                              fingerprint=fingerprint,
                              image_filename=_image_name(run_dir, page, outs[fmt].parent, linked))
            atomic_write_bytes(outs[fmt], _WRITERS[fmt](page, info, transcript))
            statuses[fmt] = "ok"
    except (OSError, ValueError) as exc:  # a page file that cannot be read names itself
        return page_id, layer.name, statuses, first_line(exc)
    except RunDirError:  # not this page's fault: stop the stage with one line
        raise
    except Exception as exc:  # noqa: BLE001 - the page boundary: a transcript of the wrong shape, a bug
        return page_id, layer.name, statuses, page_failure(page_id, exc)
    return page_id, layer.name, statuses, ""


def _coco_fingerprint(layer: _Layer, pages: list[tuple[str, Path, list[int]]], linked: dict[str, str]) -> str:
    named = {p: linked[p] for p, _, _ in pages if p in linked}
    return freshness.fingerprint("export", "coco", revision("export/coco"), layer.name, [[p, i] for p, _, i in pages],
                              *([named] if named else []))


def _coco_pages(layer: _Layer, page_ids: list[str], failed: set[str]) -> list[tuple[str, Path, list[int]]]:
    """(page id, layer page, its `freshness.file_identity`) of the pages a COCO file of `layer` holds."""
    present = []
    for page_id in page_ids:
        src = layer.folder / f"{page_id}.json"
        identity = freshness.file_identity(src)
        if page_id not in failed and identity is not None:
            present.append((page_id, src, identity))
    return present


def _coco_is_current(run_dir: Path, out: Path, layer: _Layer, present: list, linked: dict[str, str]) -> bool:
    """Whether the COCO file `out` holds exactly the `present` pages (`_coco_pages`) as they are."""
    if _is_fresh(out, _coco_fingerprint(layer, present, linked), "coco"):
        return True
    if not out.exists():
        return False
    # Stale by the pages' stats: checked again by the pages as their records know them (a copy).
    present = [(page_id, src, freshness.recorded_identity(
        src, identity, freshness.recorded_inputs(_record_path(run_dir, layer, page_id)).get("page")))
        for page_id, src, identity in present]
    return _is_fresh(out, _coco_fingerprint(layer, present, linked), "coco")


def export_status(run_dir: Path, records: list, export_cfg: Mapping[str, Any]) -> list[Outputs]:
    """Per layer the options export, its pages whose files are current, stale or not written yet
    (pending), by the rule `run_export` skips files by; none before the first export.

    A page counts done when every per-page format's file is current (with COCO alone: when the
    layer's COCO file is); a layer whose COCO file does not hold its pages as they are is not
    ``whole``. Failures live in the ledger only, so none is counted failed. Stat calls and the
    first bytes of each file; nothing is written.
    """
    params = parse_export_cfg(export_cfg)
    run_dir = Path(run_dir)
    exports = rundir.exports_dir(run_dir)
    if not exports.is_dir():
        return []
    per_page = [f for f in params.formats if f in _WRITERS]
    linked = _linked_images(records)
    ids = [r.page_id for r in records]
    rows = []
    everyone = members(run_dir, ids)   # the pages, in the order, a COCO file of the run holds
    for layer in export_layers(run_dir, params):
        present = _coco_pages(layer, everyone, set())
        coco = "coco" not in params.formats or _coco_is_current(run_dir, exports / "coco" / f"{layer.name}.json",
                                                                   layer, present, linked)
        tally = Tally()
        for page_id in ids:
            state, why = _export_state(run_dir, exports, layer, page_id, per_page, linked.get(page_id), coco)
            tally.add(page_id, "done" if state == _RERECORD else state, why, rerecord=state == _RERECORD)
        rows.append(tally.outputs(layer.name, len(ids), whole=coco, note="" if coco else "COCO file out of date",
                                  inputs=_inputs(layer)))
    return rows


def _inputs(layer: _Layer) -> tuple[str, ...]:
    """What a layer's exports are read from, named as the planner names outputs (`stage_protocol`)."""
    kind, _, name = layer.name.partition("/")
    return (f"source:{name}",) if kind == "sources" else (f"fusion:{name}", f"transcription:{name}")


_RERECORD = "done, its input record to write again"


def _export_state(run_dir: Path, exports: Path, layer: _Layer, page_id: str, formats: list[str],
                  linked: str | None, coco: bool) -> tuple[str, str | None]:
    """(done | stale | pending, why stale) of one page of one layer, as `_page_task` finds it;
    `_RERECORD` for one done whose input record a call writes again."""
    src, paths, outs = _files(exports, layer, page_id, formats)
    if not src.exists() or formats and not any(o.exists() for o in outs.values()):
        return "pending", None
    if not formats:
        return ("done", None) if coco else ("stale", "the COCO file does not hold the page as it is")
    record = _record_path(run_dir, layer, page_id)
    idents, todo = freshness.identify_by_record(paths, record, _stale_formats(outs, formats, layer, linked), write=False)
    if not todo:
        return (_RERECORD if idents.rerecord else "done"), None
    for fmt in todo:
        now = revision(f"export/{fmt}")
        made = next((r for r in range(now - 1, 0, -1)
                     if _is_fresh(outs[fmt], _page_fingerprint(fmt, layer, idents, linked, made_by=r), fmt)), None)
        if made is not None:
            return "stale", why_stale(f"export/{fmt}", made)
    return "stale", _changed(idents, freshness.recorded_inputs(record), layer)


def _changed(idents: dict, recorded: dict, layer: _Layer) -> str:
    """Why a page's exports made from inputs `recorded` (its `freshness.input_record`) are stale
    now that they are `idents`: its transcript alone changed (the text `newsbag transcribe` read
    since), else the inputs that changed, else its files."""
    made_from = {k: i for k, e in recorded.items() if (i := freshness.made_identity(e)) is not None}
    if "page" in made_from and made_from["page"] == idents.get("page") and made_from.get("text") != idents.get("text"):
        return TEXT_CHANGED
    if not made_from:
        return "its input record is missing or unreadable"
    named = {"page": layer.name, "text": f"transcription/{layer.name.partition('/')[2]}"}
    return (input_changes(made_from, idents, lambda key: named.get(key, key))
            or "a format's file is missing or cut short, or the image it names changed")


def _write_coco(run_dir: Path, exports: Path, layer: _Layer, page_ids: list[str], force: bool,
                failed: set[str], linked: dict[str, str]) -> tuple[str, list[dict]]:
    """One COCO JSON of `layer` over the run's pages that have it: (ok | skipped | empty, the
    failures of pages it could not read, which it leaves out). ``linked``: page id -> the
    image an export names (`_linked_images`)."""
    out = exports / "coco" / f"{layer.name}.json"
    present = _coco_pages(layer, page_ids, failed)
    if not present:
        return "empty", []
    if not force and _coco_is_current(run_dir, out, layer, present, linked):
        return "skipped", []
    left_out: list[dict] = []

    def pages():  # read one at a time, as the file is written
        for page_id, src, _ in present:
            try:
                page = read_page(src, page_id)
            except ValueError as exc:
                left_out.append({"page_id": page_id, "layer": layer.name, "error": f"coco: left out: {first_line(exc)}"})
                continue
            yield page, _image_name(run_dir, page, out.parent, linked.get(page_id))

    def info() -> ExportInfo:
        # The pages left out are no part of the fingerprint: the next run finds the file stale
        # and tries them again (and says again why they fail).
        gone = {f["page_id"] for f in left_out}
        kept = [p for p in present if p[0] not in gone]
        newest = max(identity[1] for _, _, identity in kept or present) / 1e9
        return ExportInfo(layer=layer.name, method=layer.method, tool=_TOOL,
                          created=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(newest)),
                          fingerprint=_coco_fingerprint(layer, kept, linked), image_filename="")

    write_coco(out, pages(), info)
    return "ok", left_out


def run_export(
    run_dir: Path,
    page_ids: list[str],
    export_cfg: Mapping[str, Any],
    *,
    force: bool = False,
    workers: int = 1,
    progress: Callable[[str, str], None] | None = None,
) -> dict:
    """Export the chosen layers of `page_ids` to RUN/exports/<format>/<layer>/.

    PAGE-XML and ALTO: one file per page and layer (``<page_id>.xml``); COCO: one
    ``exports/coco/<layer>.json`` over every manifest page that has the layer. A file whose
    recorded fingerprint (input file identity, format and its writer's code revision, layer)
    matches is skipped unless `force`; every write is atomic. A page JSON that fails
    the contract fails that page of that layer (logged in one line); the rest goes on.

    Args:
        run_dir: the run directory.
        page_ids: pages to export, in manifest order.
        export_cfg: the export stage options (formats, variants, sources).
        force: rewrite every file.
        workers: processes writing page files.
        progress: called as ``progress(page_id, status)`` with status done|skipped|failed.

    Returns:
        Counts (pages, ok, skipped, failed), ``failures`` [{page_id, layer, error}],
        ``layers`` exported and the ``exports`` folder.

    Raises:
        ValueError: unknown or bad export options.
    """
    params = parse_export_cfg(export_cfg)
    run_dir = Path(run_dir)
    exports = rundir.exports_dir(run_dir)
    layers = export_layers(run_dir, params)
    if not layers:
        log.warning("export: nothing to export in %s (no fused variant%s)", run_dir,
                    "" if params.sources else "; add --sources for the source layouts")
    per_page = [f for f in params.formats if f in _WRITERS]
    tally = _Tally({p: "skipped" for p in page_ids}, {layer.name: set() for layer in layers})
    linked = _linked_images(read_pages(run_dir))
    if per_page:
        _export_pages(run_dir, exports, layers, page_ids, per_page, force, linked, workers, progress, tally)
    elif progress is not None:
        for page_id in page_ids:
            progress(page_id, "skipped")
    coco = _export_cocos(run_dir, exports, layers, page_ids, force, linked, tally) if "coco" in params.formats else {}
    record_failures(run_dir, "export", tally.failures)
    counts = {s: sum(v == s for v in tally.page_status.values()) for s in ("ok", "skipped", "failed")}
    failed = counts["failed"] + len(tally.failed_elsewhere) + sum(v == "failed" for v in coco.values())
    return {"pages": len(page_ids), **counts, "failed": failed,
            "failures": tally.failures, "layers": [layer.name for layer in layers], "coco": coco,
            "formats": list(params.formats), "exports": str(exports)}


@dataclass
class _Tally:
    """What one export call found, filled in as its files are written."""

    page_status: dict[str, str]          # each selected page: ok | skipped | failed
    failed_by_layer: dict[str, set[str]]
    failures: list[dict] = field(default_factory=list)
    failed_elsewhere: set[str] = field(default_factory=set)   # pages outside the selection COCO could not read

    def fail(self, page_id: str, layer: str, error: str) -> None:
        """Log and record one page's failure in `layer` ("" page id: the layer's COCO file)."""
        log.error("export: page %s (%s): %s", page_id, layer, error)
        self.failures.append({"page_id": page_id, "layer": layer, "error": error})


def _export_pages(run_dir: Path, exports: Path, layers: list[_Layer], page_ids: list[str], formats: list[str],
                  force: bool, linked: dict[str, str], workers: int,
                  progress: Callable[[str, str], None] | None, tally: _Tally) -> None:
    """Write the per-page `formats` of every page and layer; `progress` hears of a page once all
    its layers are done."""
    tasks = ((run_dir, exports, layer, page_id, formats, force, linked.get(page_id))
             for page_id in page_ids for layer in layers)
    remaining = {p: len(layers) for p in page_ids}
    status = tally.page_status
    with page_map(workers) as run_map:
        for page_id, layer_name, statuses, error in run_map(_page_task, tasks):
            if error:
                tally.fail(page_id, layer_name, error)
                tally.failed_by_layer[layer_name].add(page_id)
                status[page_id] = "failed"
            elif "ok" in statuses.values() and status[page_id] != "failed":
                status[page_id] = "ok"
            remaining[page_id] -= 1
            if remaining[page_id] == 0 and progress is not None:
                progress(page_id, "done" if status[page_id] == "ok" else status[page_id])


def _export_cocos(run_dir: Path, exports: Path, layers: list[_Layer], page_ids: list[str], force: bool,
                  linked: dict[str, str], tally: _Tally) -> dict[str, str]:
    """Write each layer's COCO file: layer -> ok | skipped | empty | failed. COCO describes the
    whole run (every manifest page that has the layer), whatever subset this call wrote."""
    everyone = members(run_dir, page_ids)
    coco = {}
    for layer in layers:
        try:
            coco[layer.name], left_out = _write_coco(run_dir, exports, layer, everyone, force,
                                                     tally.failed_by_layer[layer.name], linked)
        except (OSError, ValueError) as exc:
            error = first_line(exc)
            log.error("export: coco %s: %s", layer.name, error)
            tally.failures.append({"page_id": "", "layer": layer.name, "error": f"coco: {error}"})
            coco[layer.name] = "failed"
            continue
        for failure in left_out:   # the pages of the whole run it could not read
            tally.fail(failure["page_id"], layer.name, failure["error"])
            if failure["page_id"] in tally.page_status:
                tally.page_status[failure["page_id"]] = "failed"
            else:
                tally.failed_elsewhere.add(failure["page_id"])
    return coco
