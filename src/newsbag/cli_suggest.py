"""Commands of the correction bundle: `suggest` (the pages to correct first) and `export --bundle` (every page)."""

from __future__ import annotations

import json
from functools import wraps
from pathlib import Path

import click

__all__ = ["suggest", "bundle_option"]

_BUNDLE_DIR = "bundle"   # RUN/exports/bundle: export --bundle's folder


def _finish(result, as_json: bool, payload: dict, lines: list[str]) -> None:
    """Print what a bundle write did (JSON or lines) on stdout; raise PartialFailure when a page was left out."""
    from .errors import PartialFailure
    from .export.bundle import LIST_COLUMNS

    rows = [{k: r.get(k) for k in LIST_COLUMNS} for r in result.rows]
    payload = {"pages": rows, **payload, "bundle": str(result.folder), "written": result.written,
               "kept_corrected": result.kept, "failures": result.failures}
    if as_json:
        click.echo(json.dumps(payload, ensure_ascii=False, indent=1))
    else:
        for line in lines:
            click.echo(line)
        if result.kept:
            click.echo(f"kept {len(result.kept)} PAGE-XML file(s) corrected since newsbag wrote them")
        click.echo(f"bundle: {result.folder} ({len(result.rows)} pages; load it as docs/own-pages.md shows)")
    if result.failures:
        raise PartialFailure(f"{len(result.failures)} page(s) left out of the bundle: {result.failures[0]['error']}")


# A command once cli.py adds the options every command shares (--run-dir, --log-level).
@click.option("-n", "count", type=click.IntRange(min=1), default=20, show_default=True, help="Pages to suggest.")
@click.option("--out", type=click.Path(file_okay=False, path_type=Path),
              help="Folder of the correction bundle (default: RUN/corrections).")
@click.option("--json", "as_json", is_flag=True, help="Print the picks and the bundle as JSON on stdout.")
def suggest(run_dir, count, out, as_json):
    """List the N pages whose correction teaches most, and write them as a correction bundle.

    Pages whose sources disagree most come first, spread over issues, years and layouts: each
    pick costs later pages of its issue, year or layout signature. The bundle holds each page's
    image and PAGE-XML of the recommended layout side by side, mets.xml and list.tsv.
    """
    from .corrections import MEASURES, run_suggest
    from .tables import aligned_lines

    measure, picks, result = run_suggest(run_dir, count, out)
    rows = [[str(p.rank), p.facts.page_id, f"{p.facts.disagreement:.3f}", p.facts.issue, p.facts.year or "?",
             p.facts.layout] for p in picks]
    lines = [f"disagreement: {MEASURES[measure]}",
             *aligned_lines([["rank", "page_id", "disagreement", "issue", "year", "layout"], *rows])]
    _finish(result, as_json, {"measure": measure}, lines)


def _export_bundle(run_dir: Path, variants: tuple[str, ...], formats, sources, as_json: bool) -> None:
    from . import manifest, rundir
    from .export.bundle import write_bundle

    if formats or sources:
        raise click.UsageError("--bundle writes PAGE-XML and images of one fused layout: leave out --format "
                               "and --sources")
    if len(variants) > 1 or "all" in variants:
        raise click.BadParameter("a bundle holds one layout per page: name one variant (default: the "
                                 "recommended one)", param_hint="--variant")
    ids = manifest.manifest_page_ids(run_dir)
    if not ids:
        raise click.BadParameter(f"{run_dir} has no manifests/pages.jsonl", param_hint="--run-dir")
    result = write_bundle(run_dir, rundir.exports_dir(run_dir) / _BUNDLE_DIR, ids, None,
                          variants[0] if variants else None)
    _finish(result, as_json, {}, [])


def bundle_option(func):
    """The export command's --bundle: with it, the command writes the correction bundle of every
    page (`export.bundle.write_bundle`) into RUN/exports/bundle instead of its formats."""

    @click.option("--bundle", is_flag=True,
                  help="Write every page's image and PAGE-XML side by side with a METS file (what Transkribus, "
                       "eScriptorium and OCR-D import) to RUN/exports/bundle, of one fused variant.")
    @wraps(func)
    def wrapper(*args, bundle: bool, **kwargs):
        if not bundle:
            return func(*args, **kwargs)
        return _export_bundle(kwargs["run_dir"], kwargs["variants"], kwargs["formats"], kwargs["sources"],
                              kwargs["as_json"])

    return wrapper
