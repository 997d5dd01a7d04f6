"""Builtin stages as a registry: kind -> (options, run, status); a new builtin stage is one module plus one line."""

from __future__ import annotations

import fnmatch
import importlib
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping

from . import locks, rundir
from .errors import did_you_mean
from .export.options import ExportParams, export_variant_names, parse_export_cfg
from .fusion.variants import ConsensusParams, ParagraphParams, fusion_source_names, parse_fusion_config
from .options import markdown_table
from .review.options import ReviewParams, parse_review_cfg
from .transcription_options import (BagMember, Cascade, TranscriptionParams, parse_transcription_options, recognizer_family,
                                    transcription_source_names)

__all__ = ["BuiltinKind", "Outputs", "REGISTRY", "kinds", "get", "parse_options", "options_markdown",
           "unmatched_source", "fused_variant_names", "variant_made_twice", "unmatched_variant", "stage_outputs", "stage_status", "update_command", "has_work",
           "run_stage"]


@dataclass(frozen=True)
class BuiltinKind:
    """One builtin stage kind: its declared options (light modules, imported with the config) and
    where its work lives (imported only when the stage runs).

    ``parse(options: Mapping) -> object`` raises a one-line ValueError on bad options. ``run``
    names ``"module:function"``, a function
    ``run(run_dir, page_ids, options, *, force, workers, progress) -> dict`` whose result
    carries at least ``ok``/``skipped``/``failed`` counts (``failed`` > 0 makes the run exit 4)
    and ``failures`` [{page_id, error}]. ``status`` names a function
    ``status(run_dir, records, options) -> [Outputs]``: the stage's outputs over the run's pages
    (`manifest.PageRecord`) checked by the rule its ``run`` skips pages by, which `newsbag status`,
    ``run --dry-run`` and the Slurm resubmit plan read. ``schemas``: the options dataclasses
    whose fields declare the options (`options.option`), by the heading their table goes under.
    """

    parse: Callable[[Mapping[str, Any]], Any]
    run: str
    status: str
    schemas: Mapping[str, type] = field(default_factory=dict)
    # options that hold paths, which the config anchors at its file's folder: interpreters
    # (`anchoring.anchor_command`), and objects of a runner family's parameters by family (those its
    # tool.json declares ``"path": true``, `tool_spec.anchor_params`), the family given by a function
    # of the stage's options
    commands: tuple[str, ...] = ()
    runner_params: Mapping[str, Callable[[Mapping[str, Any]], str]] = field(default_factory=dict)
    # ``sources(options) -> [(key, source name or glob)]`` for a kind whose options name sources
    # ("<stage>/<variant>"): the config refuses one that none of its model stages makes
    sources: Callable[[Mapping[str, Any]], list] | None = None
    # ``variants(options) -> [(key, fused variant name)]`` for a kind whose options name fused
    # variants: the config refuses one that its fusion stage does not make
    variants: Callable[[Mapping[str, Any]], list] | None = None
    # the command that runs the stage alone (`newsbag COMMAND`): what status names to bring its outputs up to date
    command: str = ""

    def function(self, ref: str) -> Callable:
        """The function a ``"module:function"`` reference names, its module imported now."""
        module, _, name = ref.partition(":")
        return getattr(importlib.import_module(module), name)


@dataclass(frozen=True)
class Outputs:
    """One line of a builtin stage's status: its outputs of one kind (a fused variant, the boards)
    by state, as the stage's next call would find them; done, stale, failed and pending part the
    run's pages."""

    name: str
    done: int
    stale: int
    failed: int
    pending: int
    reasons: Mapping[str, int] = field(default_factory=dict)   # why the stale ones are stale: pages
    note: str = ""       # said after the counts ("recommended", "gallery yes")
    whole: bool = True   # its run-level outputs (gallery, COCO file) hold every page as it is now
    # For the planner (`upstream.carry_upstream`), not for show: the outputs its pages are read from
    # ("source:<stage>/<variant>", "<kind>:<output name>"), and its done pages (None: not said).
    inputs: tuple[str, ...] = field(default=(), compare=False)
    done_pages: frozenset[str] | None = field(default=None, compare=False, repr=False)

    def row(self) -> dict:
        """The JSON-able status line of these outputs (`newsbag status --json`, ``run --dry-run``)."""
        return {k: v for k, v in asdict(self).items() if k not in ("inputs", "done_pages")}


# One line per builtin stage kind, in no particular order.
REGISTRY: dict[str, BuiltinKind] = {
    "fusion": BuiltinKind(parse_fusion_config, "newsbag.fusion.stage:run_fusion", "newsbag.fusion.stage:fused_status",
                          {"consensus params": ConsensusParams, "paragraphs params": ParagraphParams},
                          sources=fusion_source_names, command="fuse"),
    "review": BuiltinKind(parse_review_cfg, "newsbag.review.stage:run_review", "newsbag.review.stage:board_status",
                          {"": ReviewParams}, command="review"),
    "export": BuiltinKind(parse_export_cfg, "newsbag.export.stage:run_export", "newsbag.export.stage:export_status",
                          {"": ExportParams}, variants=export_variant_names, command="export"),
    "transcription": BuiltinKind(parse_transcription_options, "newsbag.transcription:run_transcription",
                                 "newsbag.transcription:transcript_status",
                                 {"": TranscriptionParams, "each of recognizers": BagMember, "cascade": Cascade},
                                 ("python",), {"recognizer": recognizer_family}, transcription_source_names,
                                 command="transcribe"),
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
    return get(kind).parse(options)


def options_markdown(kind: str) -> str:
    """The declared options of a builtin stage kind as Markdown tables (one per options dataclass,
    under its heading): what the docs show, made from the declarations the config validates by."""
    return "\n".join((f"**{heading}**\n\n" if heading else "") + markdown_table(schema)
                     for heading, schema in get(kind).schemas.items())


def unmatched_source(kind: str, options: Mapping[str, Any], sources: list[str]) -> str | None:
    """The first source name or glob that valid `options` write and none of `sources` (a
    config's "<stage>/<variant>"s) matches, as "key: 'name' matches no source (...)"; else None."""
    entry = get(kind)
    for key, pattern in entry.sources(options) if entry.sources else ():
        if not any(fnmatch.fnmatchcase(s, pattern) for s in sources):
            return (f"{key}: {pattern!r} matches no source{did_you_mean(pattern, sources)} "
                    f"(this config makes: {', '.join(sources)})")
    return None


def fused_variant_names(fusion_options: Mapping[str, Any]) -> list[str]:
    """The names of the variants a fusion stage with valid `fusion_options` makes (its kind's defaults
    when it names none)."""
    return [v.name for v in parse_options("fusion", fusion_options).variants]


def variant_made_twice(fusion_stages: list[tuple[str, Mapping[str, Any]]]) -> str | None:
    """Why two of `fusion_stages` ((stage name, valid options)) cannot both run, when they make one
    fused variant; else None. Each would rewrite the other's outputs/fusion/<variant>: fusion redone
    on every call, and its outputs stale for ever by the other's options."""
    maker: dict[str, str] = {}
    for stage, options in fusion_stages:
        for variant in fused_variant_names(options):
            if (other := maker.setdefault(variant, stage)) != stage:
                return (f"stages {other!r} and {stage!r} both make fused variant {variant!r} "
                        f"(outputs/fusion/{variant}); give one of them other variant names")
    return None


def unmatched_variant(kind: str, options: Mapping[str, Any], fused: list[str]) -> str | None:
    """The first fused variant valid `options` name that is not among `fused` (the variants the
    config's fusion stage makes), as "key: 'name' is no fused variant (...)"; else None."""
    entry = get(kind)
    for key, name in entry.variants(options) if entry.variants else ():
        if name not in fused:
            return (f"{key}: {name!r} is no fused variant{did_you_mean(name, fused)} "
                    f"(this config fuses: {', '.join(fused)})")
    return None


def stage_outputs(kind: str, run_dir: Path, records: list, options: Mapping[str, Any]) -> list[Outputs]:
    """The `Outputs` of one builtin stage over `records` (the run's pages), as its own rule finds them."""
    entry = get(kind)
    return entry.function(entry.status)(Path(run_dir), records, options)


def stage_status(kind: str, run_dir: Path, records: list, options: Mapping[str, Any]) -> list[dict]:
    """`stage_outputs` as JSON-able dicts (`Outputs.row`)."""
    return [o.row() for o in stage_outputs(kind, run_dir, records, options)]


def update_command(kind: str, run_dir: Path) -> str:
    """The command line that brings the outputs of builtin stage `kind` in `run_dir` up to date."""
    return f"newsbag {get(kind).command} --run-dir {run_dir}"


def has_work(outputs: list[dict], pages: int) -> bool:
    """Whether a call of the stage whose `stage_status` is `outputs` has work on a run of `pages`
    pages: it made nothing yet, a page is not current, or a run-level output leaves pages out."""
    return not outputs or any(o["done"] < pages or not o["whole"] for o in outputs)


def run_stage(kind: str, run_dir: Path, page_ids: list[str], options: Mapping[str, Any], *,
              force: bool = False, workers: int = 1,
              progress: Callable[[str, str], None] | None = None,
              record: Callable[[dict | None], dict] | None = None) -> dict:
    """Run one builtin stage over `page_ids` (it aggregates over the whole manifest itself),
    one call per run dir and kind at a time (`locks.stage_lock`).

    ``record``: this call's change to the run's config record (`rundir.update_config_record`),
    made once it holds the lock: a call that waited for another runs after it, so the record
    names what made the outputs last, never the config of a call still waiting.
    """
    entry = get(kind)
    with locks.stage_lock(run_dir, kind):
        if record is not None:
            rundir.update_config_record(run_dir, record)
        return entry.function(entry.run)(run_dir, page_ids, options, force=force, workers=workers,
                                         progress=progress)
