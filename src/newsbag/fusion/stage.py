"""The fusion stage: read source pages of a run, fuse every variant (`fusion.page`), write pages and leaderboards."""

from __future__ import annotations

import logging
import os
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Callable, Iterable, Iterator

import numpy as np

from .. import freshness, manifest, rundir
from ..stage_protocol import Made, Outputs, Tally, stale_reason
from ..contract import Boxes
from ..errors import RunDirError, first_line, page_failure
from ..failures import record_failures
from ..io import read_json, read_json_object, write_json
from ..page_reader import read_source_boxes
from ..parallel import page_map
from ..revisions import revision
from .leaderboard import Board, Plan, has_lines, run_summary, write_leaderboards, write_page_tables
from .page import SOURCE_KEYS, fuse_page, is_region_source, jsonable, measure_sources
from .pin import read_pin
from .options import FusionConfig, match_sources, needs_order, parse_fusion_config, with_order

__all__ = ["run_fusion", "fused_status", "load_inputs"]

log = logging.getLogger(__name__)

def _inputs(run_dir: Path, page_id: str, needed: list[str], record: dict | None
            ) -> tuple[dict[str, str], freshness.RecordedIdentities]:
    """(path, `freshness.recorded_identities` by the page's stored `record`) of each source output of
    one page that exists, by source name: one stat each while the files keep the stat recorded,
    and no Path built per page and source (status checks 100k pages)."""
    root, name = rundir.sources_root(run_dir), f"{page_id}.json"
    # "<stage>/<variant>", relative to the sources root (`rundir.discover_sources`)
    paths = {s: os.path.join(root, s, name) for s in needed}
    idents = freshness.recorded_identities(paths, (record or {}).get("identities"))
    return {s: paths[s] for s in idents}, idents


def load_inputs(inputs: dict[str, str], page_id: str) -> tuple[dict[str, Boxes], dict | None, dict[str, str]]:
    """Boxes of every readable source page; a bad one is dropped with its one-line reason."""
    pages, image, dropped = {}, None, {}
    for s, p in sorted(inputs.items()):
        try:
            pages[s], raw = read_source_boxes(p, page_id, s)
        except (ValueError, KeyError, TypeError) as exc:
            dropped[s] = first_line(exc)
            continue
        image = image or raw["image"]
    return pages, image, dropped


@dataclass(frozen=True)
class _Prints:
    """What a page's fusion outputs are made from, except the input files (added per page)."""

    metrics: freshness.Fingerprint              # source metrics: line source, region sources, exclusions
    variants: dict[str, freshness.Fingerprint]  # variant -> its method, parameters (source order included), sources

    def page(self, idents: dict) -> tuple[str, dict[str, str]]:
        metrics, *variants = freshness.fingerprint_all([self.metrics, *self.variants.values()], idents)
        return metrics, dict(zip(self.variants, variants))


def _prints(cfg: FusionConfig, active: dict[str, list[str]], needed: list[str]) -> _Prints:
    """Every variant's fingerprint holds the metrics one (so the shared fusion code's revision)
    and its method's code revision: a method's new revision redoes the variants using it only."""
    metrics = freshness.fingerprint("fusion-metrics", revision("fusion"), cfg.line_source,
                                 list(cfg.exclude_from_variants), needed)
    variants = {v.name: freshness.Fingerprint(freshness.fingerprint(
        "fusion-variant", v.method, revision(_method_key(v.method)), asdict(v.params), active[v.name],
        cfg.line_source, metrics)) for v in cfg.variants if v.name in active}
    return _Prints(freshness.Fingerprint(metrics), variants)


def _method_key(method: str) -> str:
    """The `revisions` entry of a fusion method's code."""
    return f"fusion/{method}"


def _revisions(cfg: FusionConfig, names) -> dict[str, int]:
    """The code revision of each named variant's method now, as a page's record keeps them."""
    method = {v.name: v.method for v in cfg.variants}
    return {name: revision(_method_key(method[name])) for name in names}


@dataclass(frozen=True)
class _PageState:
    """A page's source outputs and the fingerprints its fusion outputs are current by (`_page_state`)."""

    inputs: dict[str, str]        # source -> the path of its page, for those that exist
    idents: freshness.RecordedIdentities  # their identities (`freshness.recorded_identities`)
    metrics_fp: str               # the fingerprint a current metrics record holds
    variant_fps: dict[str, str]   # variant -> the fingerprint its current fused page holds
    record: dict | None           # the stored metrics record, None when absent or unreadable

    def current(self) -> dict | None:
        """The stored record restricted to what is still current, or None when its sources are stale."""
        record = self.record
        if not record or record.get("fingerprint") != self.metrics_fp:
            return None
        prints, fps = record.get("variant_fingerprints", {}), self.variant_fps
        variants = {v: m for v, m in record.get("variants", {}).items() if v in fps and prints.get(v) == fps[v]}
        return {**record, "variants": variants}


def _page_state(run_dir: Path, page_id: str, needed: list[str], prints: _Prints) -> _PageState:
    """The page's stored record read, its inputs identified, the fingerprints they give."""
    # strict: fusion writes no NaN/Infinity; such values came from another writer and would
    # poison the leaderboards
    record = read_json_object(rundir.metrics_path(run_dir, page_id), strict=True)
    inputs, idents = _inputs(run_dir, page_id, needed, record)
    metrics_fp, variant_fps = prints.page(idents)
    return _PageState(inputs, idents, metrics_fp, variant_fps, record)


def _table_is_current(path: Path, idents: dict) -> bool:
    try:
        return read_json(path).get("inputs") == idents
    except (OSError, ValueError, AttributeError):
        return False


@dataclass(frozen=True)
class _ScoreTask:
    """One page of the auto-order pre-pass (`_score_task`)."""

    run_dir: Path
    page_id: str
    cfg: FusionConfig
    needed: list[str]   # every source a page is fused from
    prints: _Prints


def _score_task(task: _ScoreTask) -> dict[str, dict] | None:
    """Worker: the source metrics of one page, as the page's `_metrics` record stores them.

    A current stored record is read instead of recomputed (source metrics do not depend on
    the variants). New metrics are stored as a record with no variants yet, so the fusion pass
    reuses them. None when the page cannot be read: the fusion pass reports it.
    """
    run_dir, page_id = task.run_dir, task.page_id
    try:
        state = _page_state(run_dir, page_id, task.needed, task.prints)
        current = state.current()
        if current is not None:
            return current["sources"]
        pages, _, dropped = load_inputs(state.inputs, page_id)
        if not pages:
            return None
        metrics = jsonable(measure_sources(pages, task.cfg).metrics)
        write_json(rundir.metrics_path(run_dir, page_id), {
            "page_id": page_id, "sources": metrics, "variants": {}, "best_single_choice": {},
            "fingerprint": state.metrics_fp, "variant_fingerprints": {}, "revision": revision("fusion"),
            "variant_revisions": {}, "inputs": state.idents, "dropped": dropped,
            "identities": freshness.input_record(state.inputs, state.idents, (state.record or {}).get("identities")),
        }, compact=True, durable=False)
        return metrics
    except Exception:  # noqa: BLE001 - reported once, by the fusion pass
        return None


def _source_order(run_map: Callable, run_dir: Path, page_ids: list[str], cfg: FusionConfig,
                  needed: list[str], prints: _Prints) -> list[str]:
    """Region sources in the order of this run's source leaderboard (`"granularity": "auto"`)."""
    board = Board("sources", SOURCE_KEYS)
    tasks = (_ScoreTask(run_dir, pid, cfg, needed, prints) for pid in page_ids)
    for r in run_map(_score_task, tasks):
        if r:
            board.add(r, has_lines(r))
    rows = board.rows()
    return [r["name"] for r in rows if is_region_source(r["name"], cfg)]


@dataclass(frozen=True)
class _PageResult:
    """How one page of the fusion pass went (`_page_task`)."""

    page_id: str
    status: str           # "ok" | "skipped" | "failed"
    error: str | None     # one line, for a failed page


def _fail_page(run_dir: Path, page_id: str, active: dict[str, list[str]], error: str) -> _PageResult:
    """A failed page keeps no output that could pass as current; each variant gets a failure record."""
    for v in active:
        (rundir.fused_dir(run_dir, v) / f"{page_id}.json").unlink(missing_ok=True)
        write_json(rundir.failure_path(rundir.fused_dir(run_dir, v), page_id), {"page_id": page_id, "error": error})
    rundir.metrics_path(run_dir, page_id).unlink(missing_ok=True)
    rundir.members_table_path(run_dir, page_id).unlink(missing_ok=True)
    return _PageResult(page_id, "failed", error)


def _stale_outputs(run_dir: Path, page_id: str, variants, variant_fps: dict[str, str], current: dict | None,
                   idents: dict) -> tuple[list[str], bool]:
    """(the variants whose fused page is not current, whether the page's member table is).

    ``current``: the page's stored record as `_PageState.current` returns it. Every variant page
    indexes the member table: a table lost or torn makes them all stale.
    """
    written = (current or {}).get("outputs") or {}   # fused page -> its file identity when written
    table_path = rundir.members_table_path(run_dir, page_id)
    table_id = freshness.file_identity(table_path)
    # A table whose stat is not the recorded one (a run copied without its mtimes) is checked by
    # the source identities it records.
    table_ok = current is not None and table_id is not None and (
        table_id == current.get("members_table") or _table_is_current(table_path, idents))
    stale = [v for v in variants
             if not table_ok or v not in current["variants"]
             or not freshness.page_is_current(rundir.fused_dir(run_dir, v), page_id, variant_fps[v], written.get(v))]
    return stale, table_ok


@dataclass(frozen=True)
class _PageTask:
    """One page of the fusion pass (`_page_task`)."""

    run_dir: Path
    page_id: str
    cfg: FusionConfig
    active: dict[str, list[str]]   # variant -> the sources it takes
    needed: list[str]              # every source a page is fused from
    prints: _Prints
    force: bool                    # redo current outputs too


def _page_task(task: _PageTask) -> _PageResult:
    """Worker: fuse one page for every variant whose outputs are not current. Errors become a one-line status."""
    run_dir, page_id, active = task.run_dir, task.page_id, task.active
    state = _page_state(run_dir, page_id, task.needed, task.prints)
    if not state.inputs:
        return _fail_page(run_dir, page_id, active,
                          f"page {page_id}: no source output for this page in {sorted(task.needed)}")
    current = None if task.force else state.current()
    stale, table_ok = _stale_outputs(run_dir, page_id, active, state.variant_fps, current, state.idents)
    if not stale:
        _refresh_record(run_dir, page_id, state, active)
        return _PageResult(page_id, "skipped", None)
    table_path = rundir.members_table_path(run_dir, page_id)
    idents, variant_fps = state.idents, state.variant_fps
    try:
        pages, image, dropped = load_inputs(state.inputs, page_id)
        known = None if current is None or dropped else current["sources"]
        for s, why in dropped.items():
            log.warning("fusion: page %s: source %s dropped: %s", page_id, s, why)
        if not pages:
            return _fail_page(run_dir, page_id, active, f"page {page_id}: no readable source page ({'; '.join(dropped.values())})")
        fused_pages, new, table = fuse_page(
            pages, image, task.cfg, {v: active[v] for v in stale},
            source_metrics=None if known is None else _nan_for_none(known),
            members_file=os.path.relpath(table_path, rundir.fusion_dir(run_dir) / "_"))
        # The table first: a variant page on disk always finds the table it indexes (an older
        # page left beside it by an interruption is refused by `page_reader.read_page`: other inputs). It
        # depends on the inputs only, so redoing one variant leaves a current table alone.
        # Per-page files skip the fsync (`io.atomic_write_bytes`): the record below holds the
        # identity of each, so a rerun redoes a page a power cut tore.
        # Whatever comes out the same as it is on disk is left as it is (keep_same; a page's
        # ``seconds`` differ on every computation): review and export check these files by
        # their identity, so a `--force` that changes nothing must redraw and re-export nothing.
        if not table_ok:
            write_json(table_path, {"page_id": page_id, "inputs": idents, **table}, compact=True, durable=False,
                       keep_same=True)
        written = (current or {}).get("outputs") or {}
        outputs = {v: i for v, i in written.items() if v in active and v not in stale}
        for name, page in fused_pages.items():
            page["source"].update(fingerprint=variant_fps[name], inputs=idents, dropped=dropped)
            path = rundir.fused_dir(run_dir, name) / f"{page_id}.json"
            write_json(path, page, compact=True, durable=False, volatile=("seconds",))
            outputs[name] = freshness.file_identity(path)
            rundir.failure_path(rundir.fused_dir(run_dir, name), page_id).unlink(missing_ok=True)
        new = jsonable(new)
        kept = {} if current is None else {v: m for v, m in current["variants"].items() if v not in stale}
        choice = {} if current is None else {v: c for v, c in current.get("best_single_choice", {}).items() if v not in stale}
        write_json(rundir.metrics_path(run_dir, page_id), {
            **new, "variants": {**kept, **new["variants"]},
            "best_single_choice": {**choice, **new["best_single_choice"]},
            "fingerprint": state.metrics_fp, "variant_fingerprints": {v: variant_fps[v] for v in active},
            "revision": revision("fusion"), "variant_revisions": _revisions(task.cfg, active),
            "inputs": idents, "dropped": dropped, "outputs": outputs,
            "members_table": freshness.file_identity(table_path),
            "identities": freshness.input_record(state.inputs, idents, (state.record or {}).get("identities")),
        }, compact=True, durable=False, keep_same=True)
    except RunDirError:  # a full disk is not this page's fault: stop the stage with one line
        raise
    except Exception as exc:  # the page boundary: record and go on
        return _fail_page(run_dir, page_id, active, page_failure(page_id, exc))
    return _PageResult(page_id, "ok", None)


def _refresh_record(run_dir: Path, page_id: str, state: _PageState, active: dict[str, list[str]]) -> None:
    """Give a skipped page's record the stats its files have now once its inputs' differ from
    the ones recorded (a copied run): its inputs' (`freshness.input_record`), its member table's and
    its fused pages' (of the `active` variants, all found current just now). Only the record is
    rewritten, never a file review or export checks, and the next rerun stats instead of reading."""
    if state.idents.holds:   # the common rerun: its inputs have the stats recorded, no stat again
        return
    record = state.record
    identities = freshness.input_record(state.inputs, state.idents, record.get("identities"))
    if identities == record.get("identities"):
        return
    write_json(rundir.metrics_path(run_dir, page_id), {
        **record, "identities": identities,
        "outputs": {v: freshness.file_identity(rundir.fused_dir(run_dir, v) / f"{page_id}.json")
                    for v in record.get("outputs") or {} if v in active},
        "members_table": freshness.file_identity(rundir.members_table_path(run_dir, page_id))},
        compact=True, durable=False)


def _nan_for_none(metrics: dict[str, dict]) -> dict[str, dict]:
    """Stored (JSON) source metrics back in fusion's form: NaN where JSON has null."""
    return {s: {k: np.nan if v is None else v for k, v in m.items()} for s, m in metrics.items()}


def _plan(run_dir: Path, cfg: FusionConfig) -> Plan:
    """The sources on disk and what each variant of `cfg` takes of them."""
    available = rundir.discover_sources(run_dir)
    active: dict[str, list[str]] = {}
    skipped: dict[str, str] = {}
    for v in cfg.variants:
        chosen, reason = match_sources(v, available, cfg.exclude_from_variants)
        if reason:
            skipped[v.name] = reason
        else:
            active[v.name] = chosen
    line_source = cfg.line_source if cfg.line_source in available else None
    needed = sorted({s for c in active.values() for s in c} | ({line_source} if line_source else set())
                    | {s for s in available if is_region_source(s, cfg)})
    return Plan(available, active, skipped, line_source, needed)


def fused_status(run_dir: Path, records: list, fusion_cfg: dict) -> list[Outputs]:
    """Per fused variant folder: pages whose fused page is current, stale, failed or not made
    yet (pending), by the rule `run_fusion` skips pages by (so what it counts stale is what the
    next fusion redoes).

    The source order of `"granularity": "auto"` variants is the one the last fusion recorded
    in summary.json. A variant folder the config no longer makes (dropped, or its sources
    gone) counts all its pages stale.

    Args:
        run_dir: the run directory.
        records: the run's pages (`manifest.read_pages`).
        fusion_cfg: the config's "fusion" section.

    Returns:
        One `stage_protocol.Outputs` per variant folder, by name; the recommended one's note says so.

    Raises:
        ValueError: bad fusion config (one line).
    """
    run_dir = Path(run_dir)
    page_ids = [r.page_id for r in records]
    cfg = parse_fusion_config(fusion_cfg)
    plan = _plan(run_dir, cfg)
    active, needed = plan.active, plan.needed
    if needs_order(cfg):
        try:
            order = read_json(rundir.fusion_dir(run_dir) / "summary.json").get("source_order")
        except (OSError, ValueError, AttributeError):
            order = None
        cfg = with_order(cfg, order or [])
    prints = _prints(cfg, active, needed)
    variants = rundir.discover_fused(run_dir)
    written = {v: rundir.page_files(rundir.fused_dir(run_dir, v)) for v in variants}   # one listing a folder
    tallies = {v: Tally() for v in variants}
    for page_id in page_ids:
        present = [v for v in variants if page_id in written[v]]
        if not present:   # pending or failed in every variant: nothing of the page to check
            continue
        state = _page_state(run_dir, page_id, needed, prints)
        checked = [v for v in present if v in active]
        not_current = set(_stale_outputs(run_dir, page_id, checked, state.variant_fps, state.current(), state.idents)[0])
        for v in present:
            if v in active and v not in not_current:
                tallies[v].add(page_id, "done")
            else:
                tallies[v].add(page_id, "stale", _why_stale(v, state, cfg, active))
    wanted = set(page_ids)
    # A failed page has no fused page (fusion removes it), so the four counts part the pages.
    for v in variants:
        for page_id in rundir.page_files(rundir.fused_dir(run_dir, v) / rundir.FAILED_DIR) & wanted:
            tallies[v].add(page_id, "failed")
    recommended = rundir.recommended_variant(run_dir)
    return [tallies[v].outputs(v, len(wanted), planned=v in active, note="recommended" if v == recommended else "",
                               inputs=tuple(f"source:{s}" for s in needed))
            for v in variants]


def _why_stale(variant: str, state: _PageState, cfg: FusionConfig, active: dict[str, list[str]]) -> str:
    """Why a fused page found not current is stale, from the page's record (`stage_protocol.stale_reason`)."""
    record = state.record
    if variant not in active:
        return "this config no longer makes the variant (dropped, or its sources did not run)"
    if not record:
        return "its page record (outputs/fusion/_metrics) is missing or unreadable"
    method = next(v.method for v in cfg.variants if v.name == variant)
    made = Made(((record.get("variant_fingerprints") or {}).get(variant), record.get("fingerprint")),
                record.get("inputs") or {}, {"fusion": record.get("revision"),
                                             _method_key(method): (record.get("variant_revisions") or {}).get(variant)})
    return stale_reason(made, (state.variant_fps.get(variant), state.metrics_fp), state.idents,
                        files="its fused page or member table is missing, cut short or changed")


def run_fusion(
    run_dir: Path,
    page_ids: list[str],
    fusion_cfg: dict,
    *,
    force: bool = False,
    workers: int = 1,
    progress: Callable[[str, str], None] | None = None,
) -> dict:
    """Fuse every page of the run for every variant whose sources ran; write leaderboards.

    Args:
        run_dir: the run directory (docs/design.md, Run directory).
        page_ids: pages to compute; the leaderboards and summary always cover every page of
            the manifest (`manifest.members`), using the stored per-page records that are current.
        fusion_cfg: the config's "fusion" section (schema in `newsbag.fusion.options`).
        force: recompute pages whose outputs are current (fingerprint matches).
        workers: processes; pages stream through a pool so memory stays flat.
        progress: called once per page with (page_id, "ok" | "skipped" | "failed").

    Returns:
        The summary dict written to RUN/outputs/fusion/summary.json, plus this call's
        ``counts`` (also as top-level keys) and ``failures``, which the file leaves out: it
        describes the run, so a rerun with nothing changed leaves it as it is (the call's
        counts go to reports/run_*.json).

    Raises:
        ValueError: bad fusion config (one line).
    """
    run_dir = Path(run_dir)
    cfg = parse_fusion_config(fusion_cfg)
    plan = _plan(run_dir, cfg)
    fusion = rundir.fusion_dir(run_dir)
    fusion.mkdir(parents=True, exist_ok=True)
    everyone = manifest.members(run_dir, page_ids)

    counts = {"ok": 0, "skipped": 0, "failed": 0}
    failures: list[dict] = []
    source_order = None
    with page_map(workers) as run_map:
        if needs_order(cfg):
            # "granularity": "auto" needs the run's source leaderboard (every page of the
            # manifest) before any page is fused; the order is part of those variants'
            # fingerprints, so a changed order redoes them and nothing else.
            source_order = _source_order(run_map, run_dir, everyone, cfg, plan.needed,
                                         _prints(cfg, plan.active, plan.needed))
            cfg = with_order(cfg, source_order)
        prints = _prints(cfg, plan.active, plan.needed)
        tasks = (_PageTask(run_dir, pid, cfg, plan.active, plan.needed, prints, force) for pid in page_ids)
        results = list(_consume(run_map(_page_task, tasks), counts, failures, progress))
    record_failures(run_dir, "fusion", failures)

    failed_now = {r.page_id for r in results if r.status == "failed"}
    records = ((pid, None if pid in failed_now else _page_state(run_dir, pid, plan.needed, prints).current())
               for pid in everyone)
    tables = write_page_tables(fusion, records)
    boards = write_leaderboards(fusion, cfg, plan.active, tables.variants, tables.sources, read_pin(run_dir))
    summary = jsonable(run_summary(cfg, plan, len(everyone), source_order, tables, boards))
    write_json(fusion / "summary.json", summary, keep_same=True)
    return {**summary, "counts": counts, **counts, "failures": failures}


def _consume(results: Iterable[_PageResult], counts: dict, failures: list, progress) -> Iterator[_PageResult]:
    for r in results:
        counts[r.status] += 1
        if r.error:
            failures.append({"page_id": r.page_id, "error": r.error})
            log.warning(r.error)
        if progress is not None:
            progress(r.page_id, r.status)
        yield r
