"""The fusion stage's run-wide outputs: per-page metric tables, leaderboards and summary.json."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Iterable

from .. import __version__
from ..columns import COLUMN, SOURCE_COLUMNS, VARIANT_COLUMNS
from ..io import atomic_text_file, atomic_write_text
from ..tables import tsv_text, tsv_writer
from .metrics import METRIC_KEYS, empty_page_metrics
from .page import SOURCE_KEYS, is_region_source
from .pin import Pin, choose_recommended, is_pinned
from .options import RECIPE_DOC, FusionConfig

__all__ = ["Board", "Plan", "PageTables", "Leaderboards", "has_lines", "write_page_tables", "write_leaderboards",
           "run_summary"]


def has_lines(source_metrics: dict[str, dict]) -> bool:
    """Whether a page has text lines: a source's score is null exactly when it has none."""
    return any(m.get("score") is not None for m in source_metrics.values())


class Board:
    """A leaderboard built from per-page records one at a time: running sums per name, so
    memory does not grow with the pages (every record held at once was ~1.4 GB per 100k pages).

    A name's means are over every page added: a page without metrics for it (a source that
    gave no output there; a variant not fused there with its current recipe) counts as an
    empty page (`metrics.empty_page_metrics`), as `newsbag evaluate` counts a missing page,
    so a source that ran on 10 of 100 pages cannot top the board with its mean over those
    10. ``n_pages`` is the pages where the name has metrics. Whether a page has text lines
    comes from its source metrics (`has_lines`): a page where no variant is current still has them.
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
class Plan:
    """What a fusion of the run takes (`stage._plan`), as summary.json records it."""

    available: list[str]           # sources on disk
    active: dict[str, list[str]]   # variant -> the sources it takes
    skipped: dict[str, str]        # variant not made -> why
    line_source: str | None        # the text-line evidence, when it ran
    needed: list[str]              # every source a page is fused from


def run_summary(cfg: FusionConfig, plan: Plan, n_pages: int, source_order: list[str] | None, tables: PageTables,
             boards: Leaderboards) -> dict:
    """summary.json: what the run's fusion took, made and ranked (before `jsonable`)."""
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
class PageTables:
    """The run's leaderboards as running sums (`Board`) and what went into them (`write_page_tables`)."""

    variants: Board
    sources: Board
    n_records: int       # pages whose current records the boards hold
    n_not_current: int   # manifest pages without one


def write_page_tables(fusion: Path, records: Iterable[tuple[str, dict | None]]) -> PageTables:
    """Write the per-page variant and source metric tables of every page of the run, not only the
    ones this call computed, and sum its leaderboards on the way.

    ``records``: (page id, its current metrics record, None without one) of each manifest page. They
    stream through once: the tables are written row by row and the leaderboards keep running
    sums, so memory is flat in the page count.
    """
    vkeys, skeys = METRIC_KEYS, SOURCE_KEYS
    boards = {"variants": Board("variants", vkeys), "sources": Board("sources", skeys)}
    n_records = n_not_current = 0
    with atomic_text_file(fusion / "per_page_variant_metrics.tsv", keep_same=True) as vt, \
            atomic_text_file(fusion / "per_page_source_metrics.tsv", keep_same=True) as st:
        vrow, srow = tsv_writer(vt, ["page_id", "name", *vkeys]), tsv_writer(st, ["page_id", "name", "family", *skeys])
        for pid, current in records:
            if current is None:
                n_not_current += 1
                continue
            lined = has_lines(current["sources"])
            boards["variants"].add(current["variants"], lined)
            boards["sources"].add(current["sources"], lined, pid)
            n_records += 1
            for kind, write in (("variants", vrow), ("sources", srow)):
                for n, m in sorted(current[kind].items()):
                    write({"page_id": current["page_id"], "name": n, **m})
    return PageTables(boards["variants"], boards["sources"], n_records, n_not_current)


@dataclass(frozen=True)
class Leaderboards:
    """The run's leaderboard rows as written (`write_leaderboards`), and their picks."""

    variant_rows: list[dict]
    source_rows: list[dict]
    recommended: str | None   # the recommended variant
    recommended_by: str       # who chose it (`pin.choose_recommended`)
    best_source: str | None   # the best-scored region source


def write_leaderboards(fusion: Path, cfg: FusionConfig, active: dict[str, list[str]], variants: Board,
                        sources: Board, pin: Pin | None) -> Leaderboards:
    """Write variant_leaderboard.tsv and source_leaderboard.tsv from the summed boards."""
    vrows, srows = variants.rows(), sources.rows()
    method = {v.name: v.method for v in cfg.variants}
    for r in vrows:
        r["method"] = method.get(r["name"], "")
        r["what"] = RECIPE_DOC.get(r["name"], r["method"])
    recommended, by = choose_recommended(cfg, active, vrows, pin)
    best_source = next((r["name"] for r in srows if r["score"] is not None and is_region_source(r["name"], cfg)), None)
    vrows = _marked(vrows, recommended, "pinned" if is_pinned(by) else "chosen", VARIANT_COLUMNS)
    srows = _marked(srows, best_source, "yes", SOURCE_COLUMNS)
    atomic_write_text(fusion / "variant_leaderboard.tsv", tsv_text(vrows, list(VARIANT_COLUMNS)), keep_same=True)
    atomic_write_text(fusion / "source_leaderboard.tsv", tsv_text(srows, list(SOURCE_COLUMNS)), keep_same=True)
    return Leaderboards(vrows, srows, recommended, by, best_source)


def _marked(rows: list[dict], name: str | None, mark: str, columns: tuple[str, ...]) -> list[dict]:
    """Rows with the ``recommended`` mark on `name`, keys in the table's column order (the
    gallery shows summary.json's rows in that order)."""
    return [{c: (mark if r["name"] == name else "") if c == "recommended" else r.get(c) for c in columns}
            for r in rows]


