"""One page's fusion, pure: pool its sources, score them, fuse every variant, build the fused page dicts."""

from __future__ import annotations

import functools
import time
from dataclasses import asdict, dataclass, replace

import numpy as np
from shapely import STRtree

from .. import __version__, labels
from ..contract import MAX_OVERLAPPING_PAIRS, Boxes, column_codes, regions_from_boxes
from .degenerate import degenerate_reasons, largest_box_share
from .fuse import VARIANTS, describe, member_table
from .geometry import Pairs, box_tree, self_pairs, sources_crowded
from .metrics import METRIC_KEYS, loo_agreement, page_metrics, text_line_pairs
from .order import page_lines
from .pooling import effective_params, take_sources
from .options import FusionConfig

__all__ = ["SOURCE_KEYS", "fuse_all", "fuse_page", "pool_sources", "measure_sources", "is_region_source", "jsonable"]

SOURCE_KEYS = METRIC_KEYS + ("loo_pixel_f1", "loo_box_agreement")


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
    measured = measure_sources(pages, cfg, source_metrics)
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
    """One page's sources pooled (`pool_sources`) and scored (`measure_sources`)."""

    pool: Boxes                       # every source box of the page
    pairs: Pairs                      # its overlapping pairs
    line_mask: np.ndarray             # (N,) bool, the text-line evidence
    line_tree: STRtree | None         # of the lines, None without lines
    metrics: dict[str, dict] | None   # source -> metrics dict with "family" (`measure_sources`)


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


def measure_sources(pages: dict[str, Boxes], cfg: FusionConfig, known: dict[str, dict] | None = None) -> _Pooled:
    """Pool one page's sources and score each (no-GT metrics + leave-one-out agreement).

    ``known``: metrics already computed for exactly these sources; they are returned as is.
    """
    pooled = pool_sources(pages, cfg)
    if known is not None:
        return replace(pooled, metrics=known)
    pool, pairs, line_mask, line_tree = pooled.pool, pooled.pairs, pooled.line_mask, pooled.line_tree
    src = pool.data["source"]
    lines = pool.xyxy[line_mask]
    region_sources = [s for s in pages if is_region_source(s, cfg)]
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


def is_region_source(name: str, cfg: FusionConfig) -> bool:
    """A source variants take regions from: not the line evidence, not excluded."""
    import fnmatch

    return name != cfg.line_source and not any(fnmatch.fnmatchcase(name, g) for g in cfg.exclude_from_variants)


def jsonable(obj):
    """`obj` as strict JSON values: floats rounded to 6 places, NaN as None, numpy scalars as Python's."""
    # Floats first (most values of a metrics record), NaN by ``x != x`` (np.isnan on a Python
    # float was half the time of a page's records).
    if isinstance(obj, (float, np.floating)):
        return None if obj != obj else round(float(obj), 6)
    if isinstance(obj, dict):
        return {k: jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [jsonable(v) for v in obj]
    if isinstance(obj, np.integer):
        return int(obj)
    return obj

