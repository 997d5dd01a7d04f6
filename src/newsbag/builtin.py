"""Builtin stages as a registry: kind -> (parse options, run); a new builtin stage is one module plus one line."""

from __future__ import annotations

import fnmatch
import importlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping

from . import rundir
from .errors import did_you_mean

__all__ = ["BuiltinKind", "REGISTRY", "kinds", "get", "parse_options", "anchor_options", "unmatched_source",
           "fused_variant_names", "unmatched_variant", "run_stage"]


@dataclass(frozen=True)
class BuiltinKind:
    """Where a builtin stage lives; its module is imported only when the stage is used.

    ``parse`` names a function ``parse(options: Mapping) -> object`` that raises a one-line
    ValueError on bad options. ``run`` names a function
    ``run(run_dir, page_ids, options, *, force, workers, progress) -> dict`` whose result
    carries at least ``ok``/``skipped``/``failed`` counts (``failed`` > 0 makes the run exit 4)
    and ``failures`` [{page_id, error}].
    """

    module: str
    parse: str
    run: str
    # names ``anchor(options, folder) -> options`` for a kind whose options hold paths: it
    # anchors them at the config file's folder (`config.anchor_path`); "" = no paths
    anchor: str = ""
    # names ``sources(options) -> [(key, source name or glob)]`` for a kind whose options name
    # sources ("<stage>/<variant>"): the config refuses one that none of its model stages makes
    sources: str = ""
    # names ``variants(options) -> [(key, fused variant name)]`` for a kind whose options name
    # fused variants: the config refuses one that its fusion stage does not make
    variants: str = ""

    def function(self, attr: str) -> Callable:
        return getattr(importlib.import_module(self.module), attr)


# One line per builtin stage kind, in no particular order.
REGISTRY: dict[str, BuiltinKind] = {
    "fusion": BuiltinKind("newsbag.fusion.stage", "parse_fusion_config", "run_fusion",
                          sources="fusion_source_names"),
    "review": BuiltinKind("newsbag.review.stage", "parse_review_cfg", "run_review"),
    "export": BuiltinKind("newsbag.export.stage", "parse_export_cfg", "run_export",
                          variants="export_variant_names"),
    "transcription": BuiltinKind("newsbag.transcription", "parse_transcription_options", "run_transcription",
                                 "anchor_transcription_paths", "transcription_source_names"),
}


def kinds() -> tuple[str, ...]:
    return tuple(REGISTRY)


def get(kind: str) -> BuiltinKind:
    try:
        return REGISTRY[kind]
    except KeyError:
        raise ValueError(f"unknown builtin stage kind {kind!r} (known: {', '.join(REGISTRY)})") from None


def parse_options(kind: str, options: Mapping[str, Any]) -> Any:
    """Validated options of one builtin stage; one-line ValueError when they are bad."""
    entry = get(kind)
    return entry.function(entry.parse)(options)


def anchor_options(kind: str, options: Mapping[str, Any], folder: str | None) -> dict:
    """`options` (already valid) with the relative paths in them taken from the config file's `folder`."""
    entry = get(kind)
    return entry.function(entry.anchor)(options, folder) if entry.anchor else dict(options)


def unmatched_source(kind: str, options: Mapping[str, Any], sources: list[str]) -> str | None:
    """The first source name or glob that valid `options` write and none of `sources` (a
    config's "<stage>/<variant>"s) matches, as "key: 'name' matches no source (...)"; else None."""
    entry = get(kind)
    for key, pattern in entry.function(entry.sources)(options) if entry.sources else ():
        if not any(fnmatch.fnmatchcase(s, pattern) for s in sources):
            return (f"{key}: {pattern!r} matches no source{did_you_mean(pattern, sources)} "
                    f"(this config makes: {', '.join(sources)})")
    return None


def fused_variant_names(fusion_options: Mapping[str, Any]) -> list[str]:
    """The names of the variants a fusion stage with valid `fusion_options` makes (its kind's defaults
    when it names none)."""
    return [v.name for v in parse_options("fusion", fusion_options).variants]


def unmatched_variant(kind: str, options: Mapping[str, Any], fused: list[str]) -> str | None:
    """The first fused variant valid `options` name that is not among `fused` (the variants the
    config's fusion stage makes), as "key: 'name' is no fused variant (...)"; else None."""
    entry = get(kind)
    for key, name in entry.function(entry.variants)(options) if entry.variants else ():
        if name not in fused:
            return (f"{key}: {name!r} is no fused variant{did_you_mean(name, fused)} "
                    f"(this config fuses: {', '.join(fused)})")
    return None


def run_stage(kind: str, run_dir: Path, page_ids: list[str], options: Mapping[str, Any], *,
              force: bool = False, workers: int = 1,
              progress: Callable[[str, str], None] | None = None,
              record: Callable[[dict | None], dict] | None = None) -> dict:
    """Run one builtin stage over `page_ids` (it aggregates over the whole manifest itself),
    one call per run dir and kind at a time (`rundir.stage_lock`).

    ``record``: this call's change to the run's config record (`rundir.update_config_record`),
    made once it holds the lock: a call that waited for another runs after it, so the record
    names what made the outputs last, never the config of a call still waiting.
    """
    entry = get(kind)
    with rundir.stage_lock(run_dir, kind):
        if record is not None:
            rundir.update_config_record(run_dir, record)
        return entry.function(entry.run)(run_dir, page_ids, options, force=force, workers=workers, progress=progress)
