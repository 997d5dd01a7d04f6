"""What the gallery reads of the run's other outputs: leaderboards and per-page metrics (TSV, by
header name: their column order changes), and which pages have a transcript."""

from __future__ import annotations

import csv
import hashlib
import json
import os
from pathlib import Path
from typing import Iterable, Iterator

from .. import rundir

__all__ = ["tsv_rows", "number", "leaderboard", "per_page_metrics", "layout_scores", "transcript_variants",
           "transcript_links", "LEADERBOARD_FIRST"]

# The columns a leaderboard opens with, whatever order its file has (the rest follow as written).
LEADERBOARD_FIRST = ("rank", "name", "recommended", "score")


def tsv_rows(path: Path) -> Iterator[dict[str, str]]:
    """Rows of a TSV as dicts by header name; nothing when the file is absent."""
    try:
        fh = open(path, encoding="utf-8", newline="")
    except FileNotFoundError:
        return
    with fh:
        yield from csv.DictReader(fh, delimiter="\t")


def number(text: str | None) -> float | int | str | None:
    """A TSV cell as a number where it is one (blank and nan as None), else the text."""
    if text is None or text in ("", "nan"):
        return None
    try:
        value = float(text)
    except ValueError:
        return text
    return int(value) if value.is_integer() and "." not in text else value


def leaderboard(path: Path) -> dict:
    """A leaderboard TSV as {"columns", "rows"} for the template: `LEADERBOARD_FIRST` first, numbers typed."""
    rows = list(tsv_rows(path))
    if not rows:
        return {"columns": [], "rows": []}
    header = list(rows[0])
    columns = [c for c in LEADERBOARD_FIRST if c in header] + [c for c in header if c not in LEADERBOARD_FIRST]
    return {"columns": columns, "rows": [[number(r.get(c)) for c in columns] for r in rows]}


def per_page_metrics(run_dir: Path, variant: str | None) -> dict[str, dict[str, float | None]]:
    """Per-page metrics of one fused variant from fusion's per_page_variant_metrics.tsv ({} when absent).

    Read row by row: the table has a row per page and variant (~130 MB at 100k pages and 12
    variants), of which one variant's rows are kept.
    """
    if variant is None:
        return {}
    out = {}
    for row in tsv_rows(rundir.fusion_dir(run_dir) / "per_page_variant_metrics.tsv"):
        if row.get("name") == variant:
            out[row["page_id"]] = {k: _float(v) for k, v in row.items() if k not in ("page_id", "name")}
    return out


def layout_scores(run_dir: Path, pages: set[str]) -> tuple[list[dict], dict[str, list[float | None]]]:
    """The no-ground-truth layout `score` of every variant and source on each of `pages`.

    Returns:
        ([{"name", "kind"}] in the order the scores are listed, {page_id: [score or None per name]}).
    """
    fusion = rundir.fusion_dir(run_dir)
    names: dict[str, int] = {}
    kinds: list[dict] = []
    found: dict[str, dict[int, float | None]] = {}
    for kind, file in (("variant", "per_page_variant_metrics.tsv"), ("source", "per_page_source_metrics.tsv")):
        for row in tsv_rows(fusion / file):
            page_id, name = row.get("page_id"), row.get("name")
            if page_id not in pages or not name or "score" not in row:
                continue
            if name not in names:
                names[name] = len(kinds)
                kinds.append({"name": name, "kind": kind})
            found.setdefault(page_id, {})[names[name]] = _float(row["score"])
    return kinds, {p: [by.get(k) for k in range(len(kinds))] for p, by in found.items()}


def transcript_variants(run_dir: Path, page_id: str, variants: list[str]) -> list[str]:
    """The variants of `variants` with a transcript of the page (outputs/transcripts/<variant>/<page_id>.txt)."""
    return [v for v in variants if os.path.isfile(rundir.transcript_dir(run_dir, v) / f"{page_id}.txt")]


def transcript_links(run_dir: Path, page_ids: Iterable[str]) -> str:
    """Which transcripts of `page_ids` the gallery's page list can link (a ``.txt`` in a variant's
    folder), as "<count>:<digest>" of the (variant, page id) pairs: the gallery records it, and
    while it is the value now the gallery links every transcript there is. One listing a variant."""
    wanted = set(page_ids)
    pairs = []
    for variant in rundir.discover_transcripts(run_dir):
        with os.scandir(rundir.transcript_dir(run_dir, variant)) as entries:
            pairs += [[variant, e.name[:-4]] for e in entries if e.name.endswith(".txt") and e.name[:-4] in wanted]
    digest = hashlib.sha256(json.dumps(sorted(pairs)).encode()).hexdigest()[:16]
    return f"{len(pairs)}:{digest}"


def _float(text: str | None) -> float | None:
    value = number(text)
    return float(value) if isinstance(value, (int, float)) else None
