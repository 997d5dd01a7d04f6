"""The fusion stage: read source pages of a run, fuse every variant, write pages and leaderboards."""

from __future__ import annotations

import logging
import time
from dataclasses import asdict
from pathlib import Path
from typing import Callable, Iterator

import numpy as np

from .. import __version__, labels
from ..contract import Boxes, boxes_from_page, regions_from_boxes
from ..io import atomic_write_text, read_json, read_page, write_json
from ..orchestrator import discover_sources
from ..parallel import page_map
from ..tables import tsv_text
from .fuse import VARIANTS, describe, member_records
from .geometry import box_tree, self_pairs, subset_pairs
from .metrics import METRIC_KEYS, loo_agreement, page_metrics
from .variants import FusionConfig, match_sources, needs_order, parse_fusion_config, with_order

__all__ = ["run_fusion", "fuse_all", "fuse_page", "SCORE_DOC"]

log = logging.getLogger(__name__)

SCORE_DOC = ("score = mean over pages of line_coverage * (1 - cross_share) * (1 - single_line_share/2) "
             "* (1 - empty_share/2) * (1 - overlap_share); see newsbag.fusion.metrics.page_score")
_SOURCE_KEYS = METRIC_KEYS + ("loo_pixel_f1", "loo_box_agreement")


def _load_source_page(path: Path, page_id: str, name: str) -> tuple[Boxes, dict]:
    page = read_page(path, page_id)
    boxes = boxes_from_page(page, source=name)
    family = page["source"].get("family") or name.split("/")[0]
    return Boxes(boxes.xyxy, boxes.score, boxes.label, boxes.meta,
                 {**boxes.data, "family": np.full(len(boxes), family, object)}), page


def fuse_all(pages: dict[str, Boxes], cfg: FusionConfig, active: dict[str, list[str]]) -> tuple[Boxes, dict, dict]:
    """Fuse one page for every active variant and measure everything (pure).

    Args:
        pages: source name -> its boxes (all of one page; with a ``family`` column).
        cfg: the fusion config; active: variant name -> the sources it takes.

    Returns:
        (pool of all input boxes, {variant: (fused boxes, pool index of its input)},
        metrics record {"page_id", "sources", "variants", "best_single_choice"}).
    """
    pool, pairs, line_mask, line_tree, source_metrics = _measure_sources(pages, cfg)
    src = pool.data["source"]
    lines = pool.xyxy[line_mask]
    line_source = [cfg.line_source] if cfg.line_source in pages else []

    def choose(boxes: Boxes) -> str:
        # best_single reuses the source scores computed above (same `page_score`).
        names = sorted(set(boxes.data["source"].tolist()) & set(source_metrics) - set(line_source))
        scores = [source_metrics[n]["score"] for n in names]
        return names[int(np.argmax([-1.0 if np.isnan(x) else x for x in scores]))]

    fused_all, variant_metrics, chosen = {}, {}, {}
    for v in cfg.variants:
        if v.name not in active:
            continue
        mask = np.isin(src, active[v.name]) | line_mask
        fn = VARIANTS[v.method]
        if v.method == "best_single":
            fused = fn(pool[mask], v.params, subset_pairs(pairs, mask), choose=choose)
        else:
            fused = fn(pool[mask], v.params, subset_pairs(pairs, mask))
        fused_all[v.name] = (fused, np.flatnonzero(mask))
        variant_metrics[v.name] = page_metrics(fused, lines, line_tree)
        if v.method == "best_single" and len(fused):
            chosen[v.name] = str(src[np.flatnonzero(mask)[fused.data["member_idx"][0][0]]])
    record = {"page_id": pool.meta.page_id, "sources": source_metrics, "variants": variant_metrics,
              "best_single_choice": chosen}
    return pool, fused_all, record


def _measure_sources(pages: dict[str, Boxes], cfg: FusionConfig) -> tuple:
    """Pool one page's sources and score each (no-GT metrics + leave-one-out agreement).

    Returns:
        (pool, its overlapping pairs, bool mask of the text-line evidence, STRtree of the
        lines or None, {source: metrics dict with "family"}).
    """
    pool = Boxes.concat(list(pages.values()))
    pairs = self_pairs(pool.xyxy)
    src = pool.data["source"]
    line_mask = src == cfg.line_source if cfg.line_source else np.zeros(len(pool), bool)
    lines = pool.xyxy[line_mask]
    line_tree = box_tree(lines) if len(lines) else None
    region_sources = [s for s in pages if _is_region_source(s, cfg)]
    region_mask = np.isin(src, region_sources) | line_mask
    loo = loo_agreement(pool[region_mask], subset_pairs(pairs, region_mask))
    metrics = {}
    line_source = [cfg.line_source] if cfg.line_source in pages else []
    for s in region_sources + line_source:
        own = pool[src == s]
        if s in line_source:  # the evidence itself, scored as if each line were a text region
            own = Boxes(own.xyxy, own.score, np.full(len(own), labels.label_code("text")), own.meta, own.data)
        m = page_metrics(own, lines, line_tree)
        metrics[s] = {**m, **loo.get(s, {"loo_pixel_f1": np.nan, "loo_box_agreement": np.nan}),
                      "family": str(pages[s].data["family"][0]) if len(pages[s]) else s.split("/")[0]}
    return pool, pairs, line_mask, line_tree, metrics


def fuse_page(pages: dict[str, Boxes], page_image: dict, cfg: FusionConfig,
              active: dict[str, list[str]]) -> tuple[dict, dict]:
    """`fuse_all` plus the fused page dicts (DESIGN §3); returns (pages by variant, record)."""
    t0 = time.perf_counter()
    pool, fused_all, record = fuse_all(pages, cfg, active)
    records = member_records(pool)
    seconds = round(time.perf_counter() - t0, 4)
    by_name = {v.name: v for v in cfg.variants}
    out = {}
    for name, (fused, index) in fused_all.items():
        v = by_name[name]
        described = describe(fused, pool[index], f"fusion/{name}", records, index)
        out[name] = {
            "page_id": pool.meta.page_id,
            "image": page_image,
            "source": {"stage": "fusion", "variant": name, "family": "fusion", "model": v.method,
                       "device": "cpu", "sources": sorted(set(active[name]) & set(pages)),
                       "params": asdict(v.params), "tool": f"newsbag {__version__}"},
            "regions": regions_from_boxes(described),
            "seconds": seconds,
        }
    return out, record


def _is_region_source(name: str, cfg: FusionConfig) -> bool:
    """A source variants take regions from: not the line evidence, not excluded."""
    import fnmatch

    return name != cfg.line_source and not any(fnmatch.fnmatchcase(name, g) for g in cfg.exclude_from_variants)


def _jsonable(obj):
    if isinstance(obj, dict):
        return {k: _jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_jsonable(v) for v in obj]
    if isinstance(obj, (float, np.floating)):
        return None if np.isnan(obj) else round(float(obj), 6)
    if isinstance(obj, np.integer):
        return int(obj)
    return obj


def _inputs(run_dir: Path, page_id: str, needed: list[str]) -> dict[str, Path]:
    """The source outputs of one page that exist, by source name."""
    inputs = {s: run_dir / "outputs" / "sources" / s / f"{page_id}.json" for s in needed}
    return {s: p for s, p in inputs.items() if p.is_file()}


def _load_inputs(inputs: dict[str, Path], page_id: str) -> tuple[dict[str, Boxes], dict | None]:
    pages, image = {}, None
    for s, p in sorted(inputs.items()):
        pages[s], raw = _load_source_page(p, page_id, s)
        image = image or raw["image"]
    return pages, image


def _fresh(outputs: list[Path], inputs: dict[str, Path]) -> bool:
    """Every output exists and is at least as new as every input."""
    if not all(p.is_file() for p in outputs):
        return False
    return min(p.stat().st_mtime for p in outputs) >= max(p.stat().st_mtime for p in inputs.values())


def _score_task(task: tuple) -> dict[str, dict] | None:
    """Worker: the source metrics of one page, as the page's `_metrics` record stores them.

    A fresh stored record is read instead of recomputed (source metrics do not depend on
    the variants). None when the page cannot be read: the fusion pass reports it.
    """
    run_dir, page_id, cfg, needed = task
    inputs = _inputs(run_dir, page_id, needed)
    stored = run_dir / "outputs" / "fusion" / "_metrics" / f"{page_id}.json"
    try:
        if inputs and _fresh([stored], inputs):
            return read_json(stored)["sources"]
        pages, _ = _load_inputs(inputs, page_id)
        return _jsonable(_measure_sources(pages, cfg)[4]) if pages else None
    except Exception:  # noqa: BLE001 - reported once, by the fusion pass
        return None


def _source_order(run_map: Callable, run_dir: Path, page_ids: list[str], cfg: FusionConfig,
                  needed: list[str]) -> list[str]:
    """Region sources in the order of this run's source leaderboard (`"granularity": "auto"`)."""
    scored = [r for r in run_map(_score_task, ((run_dir, pid, cfg, needed) for pid in page_ids)) if r]
    rows = _leaderboard([{"sources": r} for r in scored], "sources", _SOURCE_KEYS)
    return [r["name"] for r in rows if _is_region_source(r["name"], cfg)]


def _page_task(task: tuple) -> tuple[str, str, str | None]:
    """Worker: fuse one page and write its outputs. Errors become a one-line status."""
    run_dir, page_id, cfg, active, needed, force = task
    fusion = run_dir / "outputs" / "fusion"
    inputs = _inputs(run_dir, page_id, needed)
    outputs = [fusion / v / f"{page_id}.json" for v in active] + [fusion / "_metrics" / f"{page_id}.json"]
    if not inputs:
        return page_id, "failed", f"page {page_id}: no source output for this page in {sorted(needed)}"
    if not force and _fresh(outputs, inputs):
        return page_id, "skipped", None
    try:
        pages, image = _load_inputs(inputs, page_id)
        fused_pages, record = fuse_page(pages, image, cfg, active)
        for name, page in fused_pages.items():
            write_json(fusion / name / f"{page_id}.json", page)
        write_json(fusion / "_metrics" / f"{page_id}.json", _jsonable(record))
    except Exception as exc:  # the page boundary: record and go on
        msg = str(exc).splitlines()[0] if str(exc) else ""
        return page_id, "failed", f"page {page_id}: {type(exc).__name__}: {msg}"
    return page_id, "ok", None


def _mean(values: list) -> float | None:
    vals = [v for v in values if v is not None]
    return float(np.mean(vals)) if vals else None


def _leaderboard(records: list[dict], kind: str, keys: tuple[str, ...]) -> list[dict]:
    by_name: dict[str, list[dict]] = {}
    for r in records:
        for name, m in r[kind].items():
            by_name.setdefault(name, []).append(m)
    rows = []
    for name, ms in by_name.items():
        row = {"name": name, "n_pages": len(ms)}
        row.update({k: _mean([m.get(k) for m in ms]) for k in keys})
        if kind == "sources":
            row["family"] = ms[0].get("family", "")
        rows.append(row)
    # Ties, and pages without text lines (score NaN), go to leave-one-out agreement.
    rows.sort(key=lambda r: (-(r["score"] if r["score"] is not None else -1.0),
                             -(r.get("loo_pixel_f1") if r.get("loo_pixel_f1") is not None else -1.0), r["name"]))
    for k, r in enumerate(rows, 1):
        r["rank"] = k
    return rows


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
        run_dir: the run directory (DESIGN §6).
        page_ids: pages to fuse (normally every page of the manifest).
        fusion_cfg: the config's "fusion" section (schema in `newsbag.fusion.variants`).
        force: recompute pages whose outputs are already newer than their sources.
        workers: processes; pages stream through a pool so memory stays flat.
        progress: called once per page with (page_id, "ok" | "skipped" | "failed").

    Returns:
        The summary dict also written to RUN/outputs/fusion/summary.json.

    Raises:
        ValueError: bad fusion config (one line).
    """
    run_dir = Path(run_dir)
    cfg = parse_fusion_config(fusion_cfg)
    available = discover_sources(run_dir)
    active: dict[str, list[str]] = {}
    skipped: dict[str, str] = {}
    for v in cfg.variants:
        chosen, reason = match_sources(v, available, cfg.exclude_from_variants)
        if reason:
            skipped[v.name] = reason
        else:
            active[v.name] = chosen
    line_source = cfg.line_source if cfg.line_source in available else None
    needed = sorted({s for c in active.values() for s in c} | ({line_source} if line_source else set()))
    needed = sorted(set(needed) | {s for s in available if _is_region_source(s, cfg)})
    fusion = run_dir / "outputs" / "fusion"
    fusion.mkdir(parents=True, exist_ok=True)

    counts = {"ok": 0, "skipped": 0, "failed": 0}
    failures: list[dict] = []
    source_order = None
    with page_map(workers) as run_map:
        if needs_order(cfg):
            # "granularity": "auto" needs the source leaderboard before any page is fused.
            source_order = _source_order(run_map, run_dir, list(page_ids), cfg, needed)
            previous = _previous_order(fusion / "summary.json")
            if previous != source_order and not force:
                log.info("fusion: source order %s differs from the last run's %s; refusing every page",
                         source_order, previous)
                force = True
            cfg = with_order(cfg, source_order)
        tasks = ((run_dir, pid, cfg, active, needed, force) for pid in page_ids)
        results = list(_consume(run_map(_page_task, tasks), counts, failures, progress))

    records = []
    for pid, status, _ in sorted(results):
        if status != "failed":
            path = fusion / "_metrics" / f"{pid}.json"
            try:
                records.append(read_json(path))
            except (OSError, ValueError) as exc:
                failures.append({"page_id": pid, "error": f"page {pid}: unreadable metrics {path}: {exc}"})
    vkeys, skeys = METRIC_KEYS, _SOURCE_KEYS
    vrows = _leaderboard(records, "variants", vkeys)
    srows = _leaderboard(records, "sources", skeys)
    method = {v.name: v.method for v in cfg.variants}
    for r in vrows:
        r["method"] = method.get(r["name"], "")
    atomic_write_text(fusion / "variant_leaderboard.tsv",
                      tsv_text(vrows, ["rank", "name", "method", "n_pages", *vkeys]))
    atomic_write_text(fusion / "source_leaderboard.tsv",
                      tsv_text(srows, ["rank", "name", "family", "n_pages", *skeys]))
    atomic_write_text(fusion / "per_page_variant_metrics.tsv", tsv_text(
        [{"page_id": r["page_id"], "name": n, **m} for r in records for n, m in sorted(r["variants"].items())],
        ["page_id", "name", *vkeys]))
    atomic_write_text(fusion / "per_page_source_metrics.tsv", tsv_text(
        [{"page_id": r["page_id"], "name": n, **m} for r in records for n, m in sorted(r["sources"].items())],
        ["page_id", "name", "family", *skeys]))

    if cfg.recommended is not None and cfg.recommended in active:
        recommended, by = cfg.recommended, "config"
    else:
        scored = [r for r in vrows if r["score"] is not None]
        recommended, by = (scored[0]["name"], "score") if scored else (None, "none")
        if cfg.recommended is not None:
            by = f"score (pinned {cfg.recommended!r} was skipped)"
    summary = {
        "tool": f"newsbag {__version__}",
        "n_pages": len(results),
        "counts": counts,
        "failures": failures,
        "sources": available,
        "line_source": line_source,
        "variants": {v.name: {"sources": active.get(v.name, []), "patterns": list(v.sources),
                              "method": v.method, "params": asdict(v.params)} for v in cfg.variants},
        "skipped_variants": skipped,
        "source_order": source_order,
        "recommended_variant": recommended,
        "recommended_by": by,
        "score": SCORE_DOC,
        "variant_leaderboard": vrows,
        "source_leaderboard": srows,
    }
    write_json(fusion / "summary.json", _jsonable(summary))
    return _jsonable(summary)


def _previous_order(summary: Path) -> list[str] | None:
    try:
        return read_json(summary).get("source_order")
    except (OSError, ValueError, AttributeError):
        return None


def _consume(results, counts: dict, failures: list, progress) -> Iterator[tuple]:
    for pid, status, error in results:
        counts[status] += 1
        if error:
            failures.append({"page_id": pid, "error": error})
            log.warning(error)
        if progress is not None:
            progress(pid, status)
        yield pid, status, error
