"""The fusion stage: read source pages of a run, fuse every variant, write pages and leaderboards."""

from __future__ import annotations

import functools
import logging
import os
import time
from collections import Counter
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Callable, Iterable, Iterator

import numpy as np
from shapely import STRtree

from .. import __version__, freshness, labels, manifest, rundir
from ..builtin import Outputs
from ..columns import COLUMN, SOURCE_COLUMNS, VARIANT_COLUMNS
from ..contract import MAX_OVERLAPPING_PAIRS, Boxes, column_codes, regions_from_boxes
from ..errors import RunDirError, first_line, page_failure
from ..failures import record_failures
from ..io import atomic_text_file, atomic_write_text, read_json, write_json
from ..page_reader import read_source_boxes
from ..parallel import page_map
from ..revisions import revision, why_stale
from ..tables import tsv_text, tsv_writer
from .degenerate import degenerate_reasons, largest_box_share
from .fuse import VARIANTS, describe, member_table
from .pooling import effective_params, take_sources
from .geometry import Pairs, box_tree, self_pairs, sources_crowded
from .metrics import METRIC_KEYS, empty_page_metrics, loo_agreement, page_metrics, text_line_pairs
from .pin import Pin, choose_recommended, is_pinned, read_pin
from .order import page_lines
from .variants import RECIPE_DOC, FusionConfig, match_sources, needs_order, parse_fusion_config, with_order

__all__ = ["run_fusion", "fused_status", "fuse_all", "fuse_page", "pool_sources"]

log = logging.getLogger(__name__)

_SOURCE_KEYS = METRIC_KEYS + ("loo_pixel_f1", "loo_box_agreement")


def fuse_all(pages: dict[str, Boxes], cfg: FusionConfig, active: dict[str, list[str]],
             source_metrics: dict[str, dict] | None = None) -> tuple[Boxes, dict, dict]:
    """Fuse one page for every active variant and measure everything (pure).

    Args:
        pages: source name -> its boxes (all of one page; with a ``family`` column).
        cfg: the fusion config; active: variant name -> the sources it takes.
        source_metrics: this page's source metrics when already computed (the stored
            record of the auto-order pre-pass); None computes them.

    Returns:
        (pool of all input boxes, {variant: (fused boxes, pool index of its input, its input
        boxes ``pool[index]``)}, metrics record {"page_id", "sources", "variants",
        "best_single_choice"}).
    """
    measured = _measure_sources(pages, cfg, source_metrics)
    pool, pairs, line_mask, line_tree, source_metrics = (measured.pool, measured.pairs, measured.line_mask,
                                                         measured.line_tree, measured.metrics)
    src = pool.data["source"]
    page = page_lines(pool.xyxy[line_mask], pool.meta.width, line_tree)   # the variants share the page's lines
    line_source = [cfg.line_source] if cfg.line_source in pages else []

    def choose(boxes: Boxes) -> str:
        # best_single reuses the source scores computed above (same `page_score`).
        names = sorted(set(column_codes(boxes, "source")[0].tolist()) & set(source_metrics) - set(line_source))
        scores = [source_metrics[n]["score"] for n in names]
        return names[int(np.argmax([-1.0 if x is None or np.isnan(x) else x for x in scores]))]

    # Source codes, so each variant's selection is an integer isin, not one over strings.
    src_names, src_code = column_codes(pool, "source")
    fused_all, variant_metrics, chosen = {}, {}, {}
    taken: dict[tuple, tuple] = {}   # variants over the same sources (half of them: "*") take the same rows
    done: dict[tuple, Boxes] = {}    # variants that compute the same thing (union and P4): fused once
    for v in cfg.variants:
        if v.name not in active:
            continue
        key = tuple(active[v.name])
        if key not in taken:
            mask = np.isin(src_code, [k for k, s in enumerate(src_names) if s in active[v.name]]) | line_mask
            taken[key] = (np.flatnonzero(mask), *take_sources(pool, pairs, mask))
        index, boxes, sub_pairs = taken[key]
        fn = VARIANTS[v.method]
        same = (key, v.method, effective_params(v.params, boxes))
        if same in done:
            fused = done[same]
        else:
            fused = done[same] = fn(boxes, v.params, sub_pairs, page=page,
                                    **({"choose": choose} if v.method == "best_single" else {}))
        fused_all[v.name] = (fused, index, boxes)
        if v.method == "best_single" and len(fused):
            chosen[v.name] = str(src[index[fused.data["member_idx"][0][0]]])
            # Its regions are exactly the chosen source's, already measured the same way.
            variant_metrics[v.name] = {k: source_metrics[chosen[v.name]][k] for k in METRIC_KEYS}
        else:
            variant_metrics[v.name] = page_metrics(fused, page.lines, line_tree)
    record = {"page_id": pool.meta.page_id, "sources": source_metrics, "variants": variant_metrics,
              "best_single_choice": chosen}
    return pool, fused_all, record


@dataclass(frozen=True)
class _Pooled:
    """One page's sources pooled (`pool_sources`) and scored (`_measure_sources`)."""

    pool: Boxes                       # every source box of the page
    pairs: Pairs                      # its overlapping pairs
    line_mask: np.ndarray             # (N,) bool, the text-line evidence
    line_tree: STRtree | None         # of the lines, None without lines
    metrics: dict[str, dict] | None   # source -> metrics dict with "family" (`_measure_sources`)


def pool_sources(pages: dict[str, Boxes], cfg: FusionConfig) -> _Pooled:
    """One page's sources pooled, not scored yet."""
    pool = Boxes.concat(list(pages.values()))
    # Each source is under the bound (`page_reader.read_source_boxes`), but their boxes may still
    # cross one another's in more pairs than fusion can hold (a real pool: ~11,000).
    if crowded := sources_crowded({s: b.xyxy for s, b in pages.items()}, MAX_OVERLAPPING_PAIRS, "fuse"):
        raise ValueError(f"{crowded}; remove or redo the source page that piles up boxes")
    line_mask = pool.data["source"] == cfg.line_source if cfg.line_source else np.zeros(len(pool), bool)
    lines = pool.xyxy[line_mask]
    return _Pooled(pool, self_pairs(pool.xyxy), line_mask, box_tree(lines) if len(lines) else None, None)


def _measure_sources(pages: dict[str, Boxes], cfg: FusionConfig, known: dict[str, dict] | None = None) -> _Pooled:
    """Pool one page's sources and score each (no-GT metrics + leave-one-out agreement).

    ``known``: metrics already computed for exactly these sources; they are returned as is.
    """
    pooled = pool_sources(pages, cfg)
    if known is not None:
        return replace(pooled, metrics=known)
    pool, pairs, line_mask, line_tree = pooled.pool, pooled.pairs, pooled.line_mask, pooled.line_tree
    src = pool.data["source"]
    lines = pool.xyxy[line_mask]
    region_sources = [s for s in pages if _is_region_source(s, cfg)]
    region_mask = np.isin(src, region_sources) | line_mask
    loo = loo_agreement(*take_sources(pool, pairs, region_mask))
    metrics = {}
    line_source = [cfg.line_source] if cfg.line_source in pages else []
    names = region_sources + line_source
    line_pairs = text_line_pairs(pool, pairs, line_mask, {s: s in line_source for s in names})
    for s in names:
        own = pool[src == s]
        if s in line_source:  # the evidence itself, scored as if each line were a text region
            own = Boxes(own.xyxy, own.score, np.full(len(own), labels.label_code("text")), own.meta, own.data)
        m = page_metrics(own, lines, line_tree, line_pairs[s])
        metrics[s] = {**m, **loo.get(s, {"loo_pixel_f1": np.nan, "loo_box_agreement": np.nan}),
                      "family": str(pages[s].data["family"][0]) if len(pages[s]) else s.split("/")[0]}
    reasons = degenerate_reasons([metrics[s]["n_regions"] for s in names], [metrics[s]["n_text"] for s in names],
                                 [largest_box_share(pages[s].xyxy, pool.meta.width, pool.meta.height) for s in names],
                                 [s in region_sources for s in names])
    for s, why in zip(names, reasons):
        metrics[s]["degenerate"] = why
    return replace(pooled, metrics=metrics)


def fuse_page(pages: dict[str, Boxes], page_image: dict, cfg: FusionConfig, active: dict[str, list[str]],
              source_metrics: dict[str, dict] | None = None, members_file: str | None = None
              ) -> tuple[dict, dict, dict]:
    """`fuse_all` plus the fused page dicts (docs/design.md, Contracts).

    Regions' ``members`` are indices into the page's member table (every source box once,
    shared by all variants: 11 variants repeated them 11 times, 3.7 MB per page) and their
    ``support`` indices into its ``sources``; the page records where that table is
    (``source.members_file``) and `page_reader.read_page` resolves both.

    Returns:
        (pages by variant, metrics record, member table: every pooled source box, as columns
        (`fuse.member_table`)).
    """
    t0 = time.perf_counter()
    pool, fused_all, record = fuse_all(pages, cfg, active, source_metrics)
    seconds = round(time.perf_counter() - t0, 4)
    by_name = {v.name: v for v in cfg.variants}
    out = {}
    # Variants with the same regions share one list of region dicts (written, never changed):
    # one fused result (`fuse_all` shares it), or best_single variants that chose one source.
    regions: dict = {}
    table = member_table(pool)
    for name, (fused, index, variant_input) in fused_all.items():
        v = by_name[name]
        same = ("best_single", record["best_single_choice"][name]) if name in record["best_single_choice"] else id(fused)
        if same not in regions:
            regions[same] = regions_from_boxes(describe(fused, variant_input, f"fusion/{name}", index, table["sources"]))
        out[name] = {
            "page_id": pool.meta.page_id,
            "image": page_image,
            "source": {"stage": "fusion", "variant": name, "family": "fusion", "model": v.method,
                       "device": "cpu", "sources": sorted(set(active[name]) & set(pages)),
                       "params": _params_dict(v.params), "tool": f"newsbag {__version__}",
                       **({"members_file": members_file} if members_file else {})},
            "regions": regions[same],
            "seconds": seconds,
        }
    return out, record, table


@functools.lru_cache(maxsize=64)
def _params_dict(params) -> dict:
    """``asdict(params)`` once per variant, not per page (written, never changed)."""
    return asdict(params)


def _is_region_source(name: str, cfg: FusionConfig) -> bool:
    """A source variants take regions from: not the line evidence, not excluded."""
    import fnmatch

    return name != cfg.line_source and not any(fnmatch.fnmatchcase(name, g) for g in cfg.exclude_from_variants)


def _jsonable(obj):
    # Floats first (most values of a metrics record), NaN by ``x != x`` (np.isnan on a Python
    # float was half the time of a page's records).
    if isinstance(obj, (float, np.floating)):
        return None if obj != obj else round(float(obj), 6)
    if isinstance(obj, dict):
        return {k: _jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_jsonable(v) for v in obj]
    if isinstance(obj, np.integer):
        return int(obj)
    return obj


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


def _load_inputs(inputs: dict[str, str], page_id: str) -> tuple[dict[str, Boxes], dict | None, dict[str, str]]:
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


def _stored_record(run_dir: Path, page_id: str) -> dict | None:
    """The page's stored metrics record, or None: absent, torn, or holding NaN/Infinity (fusion
    writes strict JSON; such values came from another writer and would poison the leaderboards)."""
    try:
        record = read_json(rundir.metrics_path(run_dir, page_id), strict=True)
    except (OSError, ValueError):
        return None
    return record if isinstance(record, dict) else None


@dataclass(frozen=True)
class _PageState:
    """A page's source outputs and the fingerprints its fusion outputs are current by (`_page_state`)."""

    inputs: dict[str, str]        # source -> the path of its page, for those that exist
    idents: freshness.RecordedIdentities  # their identities (`freshness.recorded_identities`)
    metrics_fp: str               # the fingerprint a current metrics record holds
    variant_fps: dict[str, str]   # variant -> the fingerprint its current fused page holds
    record: dict | None           # the stored metrics record (`_stored_record`)

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
    record = _stored_record(run_dir, page_id)
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
        pages, _, dropped = _load_inputs(state.inputs, page_id)
        if not pages:
            return None
        metrics = _jsonable(_measure_sources(pages, task.cfg).metrics)
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
    board = _Board("sources", _SOURCE_KEYS)
    tasks = (_ScoreTask(run_dir, pid, cfg, needed, prints) for pid in page_ids)
    for r in run_map(_score_task, tasks):
        if r:
            board.add(r, _has_lines(r))
    rows = board.rows()
    return [r["name"] for r in rows if _is_region_source(r["name"], cfg)]


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
        pages, image, dropped = _load_inputs(state.inputs, page_id)
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
        new = _jsonable(new)
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


def _has_lines(source_metrics: dict[str, dict]) -> bool:
    """Whether a page has text lines: a source's score is null exactly when it has none."""
    return any(m.get("score") is not None for m in source_metrics.values())


class _Board:
    """A leaderboard built from per-page records one at a time: running sums per name, so
    memory does not grow with the pages (every record held at once was ~1.4 GB per 100k pages).

    A name's means are over every page added: a page without metrics for it (a source that
    gave no output there; a variant not fused there with its current recipe) counts as an
    empty page (`metrics.empty_page_metrics`), as `newsbag evaluate` counts a missing page,
    so a source that ran on 10 of 100 pages cannot top the board with its mean over those
    10. ``n_pages`` is the pages where the name has metrics. Whether a page has text lines
    comes from its source metrics (`_has_lines`): a page where no variant is current still has them.
    Pages a source was degenerate on (`fusion.degenerate`) are counted, with the first one's reason.
    """

    def __init__(self, kind: str, keys: tuple[str, ...]):
        self.kind, self.keys = kind, keys
        self.names: dict[str, dict] = {}
        self.pages = {True: 0, False: 0}   # pages added, by whether they have text lines
        self.degenerate: dict[str, dict] = {}   # source -> {"pages", "example"} (`fusion.degenerate`)

    def add(self, metrics_by_name: dict[str, dict], lined: bool, page_id: str = "") -> None:
        self.pages[lined] += 1
        for name, m in metrics_by_name.items():
            acc = self.names.get(name)
            if acc is None:
                acc = self.names[name] = {"n": {True: 0, False: 0}, "family": m.get("family", ""),
                                          "sum": dict.fromkeys(self.keys, 0.0), "count": dict.fromkeys(self.keys, 0)}
            acc["n"][lined] += 1
            if m.get("degenerate"):
                seen = self.degenerate.setdefault(name, {"pages": 0, "example": f"page {page_id}: {m['degenerate']}"})
                seen["pages"] += 1
            for k in self.keys:
                v = m.get(k)
                if v is not None:
                    acc["sum"][k] += v
                    acc["count"][k] += 1

    def rows(self) -> list[dict]:
        # What an empty page adds to each mean; NaN (no text lines) stays out, as a null does.
        empty = {lined: {k: v for k, v in empty_page_metrics(lined).items() if k in self.keys and v == v}
                 for lined in self.pages}
        rows = []
        for name, acc in self.names.items():
            total, count = dict(acc["sum"]), dict(acc["count"])
            for lined, pages in self.pages.items():
                missing = pages - acc["n"][lined]
                if not missing:
                    continue
                for k, v in empty[lined].items():
                    total[k] += missing * v
                    count[k] += missing
            row = {"name": name, "n_pages": sum(acc["n"].values())}
            row.update({k: total[k] / count[k] if count[k] else None for k in self.keys})
            if self.kind == "sources":
                row["family"] = acc["family"]
                row["degenerate_pages"] = self.degenerate.get(name, {}).get("pages", 0)
            rows.append(row)
        return _ranked(rows)


def _ranked(rows: list[dict]) -> list[dict]:
    # Ties, and pages without text lines (score NaN), go to leave-one-out agreement.
    rows.sort(key=lambda r: (-(r["score"] if r["score"] is not None else -1.0),
                             -(r.get("loo_pixel_f1") if r.get("loo_pixel_f1") is not None else -1.0), r["name"]))
    for k, r in enumerate(rows, 1):
        r["rank"] = k
    return rows


@dataclass(frozen=True)
class _Plan:
    """What a fusion of the run takes (`_plan`)."""

    available: list[str]           # sources on disk
    active: dict[str, list[str]]   # variant -> the sources it takes
    skipped: dict[str, str]        # variant not made -> why
    line_source: str | None        # the text-line evidence, when it ran
    needed: list[str]              # every source a page is fused from


def _plan(run_dir: Path, cfg: FusionConfig) -> _Plan:
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
                    | {s for s in available if _is_region_source(s, cfg)})
    return _Plan(available, active, skipped, line_source, needed)


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
        One `builtin.Outputs` per variant folder, by name; the recommended one's note says so.

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
    done: dict[str, set[str]] = {v: set() for v in variants}
    stale, reasons = dict.fromkeys(variants, 0), {v: Counter() for v in variants}
    for page_id in page_ids:
        present = [v for v in variants if page_id in written[v]]
        if not present:   # pending or failed in every variant: nothing of the page to check
            continue
        state = _page_state(run_dir, page_id, needed, prints)
        checked = [v for v in present if v in active]
        not_current = set(_stale_outputs(run_dir, page_id, checked, state.variant_fps, state.current(), state.idents)[0])
        for v in present:
            if v in active and v not in not_current:
                done[v].add(page_id)
            else:
                stale[v] += 1
                reasons[v][_why_stale(v, state.record, cfg, active)] += 1
    wanted = set(page_ids)
    failed = {v: len(rundir.page_files(rundir.fused_dir(run_dir, v) / rundir.FAILED_DIR) & wanted) for v in variants}
    # A failed page has no fused page (fusion removes it), so the four counts part the pages.
    return [Outputs(v, len(done[v]), stale[v], failed[v], len(wanted) - len(done[v]) - stale[v] - failed[v],
                    dict(reasons[v].most_common()), "recommended" if v == rundir.recommended_variant(run_dir) else "",
                    inputs=tuple(f"source:{s}" for s in needed), done_pages=frozenset(done[v]) if v in active else None)
            for v in variants]


def _why_stale(variant: str, record: dict | None, cfg: FusionConfig, active: dict[str, list[str]]) -> str:
    """Why a fused page found not current is stale: the code revision it was made by, else what changed."""
    if variant not in active:
        return "this config no longer makes the variant (dropped, or its sources did not run)"
    if not record:
        return "its page record (outputs/fusion/_metrics) is missing or unreadable"
    method = next(v.method for v in cfg.variants if v.name == variant)
    return (why_stale("fusion", record.get("revision"))
            or why_stale(_method_key(method), (record.get("variant_revisions") or {}).get(variant))
            or "its inputs or options changed")


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
        fusion_cfg: the config's "fusion" section (schema in `newsbag.fusion.variants`).
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
    tables = _write_page_tables(fusion, run_dir, everyone, plan.needed, prints, failed_now)
    boards = _write_leaderboards(fusion, cfg, plan.active, tables.variants, tables.sources, read_pin(run_dir))
    summary = _jsonable(_summary(cfg, plan, len(everyone), source_order, tables, boards))
    write_json(fusion / "summary.json", summary, keep_same=True)
    return {**summary, "counts": counts, **counts, "failures": failures}


def _summary(cfg: FusionConfig, plan: _Plan, n_pages: int, source_order: list[str] | None, tables: _PageTables,
             boards: _Leaderboards) -> dict:
    """summary.json: what the run's fusion took, made and ranked (before `_jsonable`)."""
    return {
        "tool": f"newsbag {__version__}",
        "n_pages": tables.n_records,
        "pages": n_pages,
        "pages_not_current": tables.n_not_current,
        "sources": plan.available,
        "line_source": plan.line_source,
        "variants": {v.name: {"sources": plan.active.get(v.name, []), "patterns": list(v.sources),
                              "method": v.method, "params": asdict(v.params)} for v in cfg.variants},
        "skipped_variants": plan.skipped,
        "source_order": source_order,
        "recommended_variant": boards.recommended,
        "recommended_by": boards.recommended_by,
        "best_source": boards.best_source,
        "degenerate_sources": dict(sorted(tables.sources.degenerate.items())),
        "score": COLUMN["score"].meaning,
        "variant_leaderboard": boards.variant_rows,
        "source_leaderboard": boards.source_rows,
    }


@dataclass(frozen=True)
class _PageTables:
    """The run's leaderboards as running sums (`_Board`) and what went into them (`_write_page_tables`)."""

    variants: _Board
    sources: _Board
    n_records: int       # pages whose current records the boards hold
    n_not_current: int   # manifest pages without one


def _write_page_tables(fusion: Path, run_dir: Path, everyone: list[str], needed: list[str], prints: _Prints,
                       failed_now: set[str]) -> _PageTables:
    """Write the per-page variant and source metric tables of every page of the run, not only the
    ones this call computed, and sum its leaderboards on the way.

    The stored per-page records stream through once: the tables are written row by row and the
    leaderboards keep running sums, so memory is flat in the page count.
    """
    vkeys, skeys = METRIC_KEYS, _SOURCE_KEYS
    boards = {"variants": _Board("variants", vkeys), "sources": _Board("sources", skeys)}
    n_records = n_not_current = 0
    with atomic_text_file(fusion / "per_page_variant_metrics.tsv", keep_same=True) as vt, \
            atomic_text_file(fusion / "per_page_source_metrics.tsv", keep_same=True) as st:
        vrow, srow = tsv_writer(vt, ["page_id", "name", *vkeys]), tsv_writer(st, ["page_id", "name", "family", *skeys])
        for pid in everyone:
            current = None if pid in failed_now else _page_state(run_dir, pid, needed, prints).current()
            if current is None:
                n_not_current += 1
                continue
            lined = _has_lines(current["sources"])
            boards["variants"].add(current["variants"], lined)
            boards["sources"].add(current["sources"], lined, pid)
            n_records += 1
            for kind, write in (("variants", vrow), ("sources", srow)):
                for n, m in sorted(current[kind].items()):
                    write({"page_id": current["page_id"], "name": n, **m})
    return _PageTables(boards["variants"], boards["sources"], n_records, n_not_current)


@dataclass(frozen=True)
class _Leaderboards:
    """The run's leaderboard rows as written (`_write_leaderboards`), and their picks."""

    variant_rows: list[dict]
    source_rows: list[dict]
    recommended: str | None   # the recommended variant
    recommended_by: str       # who chose it (`pin.choose_recommended`)
    best_source: str | None   # the best-scored region source


def _write_leaderboards(fusion: Path, cfg: FusionConfig, active: dict[str, list[str]], variants: _Board,
                        sources: _Board, pin: Pin | None) -> _Leaderboards:
    """Write variant_leaderboard.tsv and source_leaderboard.tsv from the summed boards."""
    vrows, srows = variants.rows(), sources.rows()
    method = {v.name: v.method for v in cfg.variants}
    for r in vrows:
        r["method"] = method.get(r["name"], "")
        r["what"] = RECIPE_DOC.get(r["name"], r["method"])
    recommended, by = choose_recommended(cfg, active, vrows, pin)
    best_source = next((r["name"] for r in srows if r["score"] is not None and _is_region_source(r["name"], cfg)), None)
    vrows = _marked(vrows, recommended, "pinned" if is_pinned(by) else "chosen", VARIANT_COLUMNS)
    srows = _marked(srows, best_source, "yes", SOURCE_COLUMNS)
    atomic_write_text(fusion / "variant_leaderboard.tsv", tsv_text(vrows, list(VARIANT_COLUMNS)), keep_same=True)
    atomic_write_text(fusion / "source_leaderboard.tsv", tsv_text(srows, list(SOURCE_COLUMNS)), keep_same=True)
    return _Leaderboards(vrows, srows, recommended, by, best_source)


def _marked(rows: list[dict], name: str | None, mark: str, columns: tuple[str, ...]) -> list[dict]:
    """Rows with the ``recommended`` mark on `name`, keys in the table's column order (the
    gallery shows summary.json's rows in that order)."""
    return [{c: (mark if r["name"] == name else "") if c == "recommended" else r.get(c) for c in columns}
            for r in rows]


def _consume(results: Iterable[_PageResult], counts: dict, failures: list, progress) -> Iterator[_PageResult]:
    for r in results:
        counts[r.status] += 1
        if r.error:
            failures.append({"page_id": r.page_id, "error": r.error})
            log.warning(r.error)
        if progress is not None:
            progress(r.page_id, r.status)
        yield r
