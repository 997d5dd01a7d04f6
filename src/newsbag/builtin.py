"""Builtin stage kinds as the config knows them: kind -> its options and what they name; the work of
each kind (its status and run functions) is the table in `stages`, which this module must not import."""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping

from .errors import did_you_mean
from .export.options import ExportParams, export_variant_names, parse_export_cfg
from .fusion.options import ConsensusParams, ParagraphParams, fusion_source_names, parse_fusion_config
from .options import markdown_table
from .review.options import ReviewParams, parse_review_cfg
from .transcription.options import (BagMember, Cascade, TranscriptionParams, parse_transcription_options, recognizer_family,
                                    transcription_source_names)

__all__ = ["BuiltinKind", "REGISTRY", "kinds", "get", "parse_options", "options_markdown",
           "unmatched_source", "fused_variant_names", "variant_made_twice", "unmatched_variant", "update_command"]


@dataclass(frozen=True)
class BuiltinKind:
    """One builtin stage kind as the config knows it: its declared options (light modules, imported
    with the config); its work is its line in `stages.KINDS`.

    ``parse(options: Mapping) -> object`` raises a one-line ValueError on bad options.
    ``schemas``: the options dataclasses whose fields declare the options (`options.option`), by
    the heading their table goes under.
    """

    parse: Callable[[Mapping[str, Any]], Any]
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


# One line per builtin stage kind, in no particular order.
REGISTRY: dict[str, BuiltinKind] = {
    "fusion": BuiltinKind(parse_fusion_config, {"consensus params": ConsensusParams, "paragraphs params": ParagraphParams},
                          sources=fusion_source_names, command="fuse"),
    "review": BuiltinKind(parse_review_cfg, {"": ReviewParams}, command="review"),
    "export": BuiltinKind(parse_export_cfg, {"": ExportParams}, variants=export_variant_names, command="export"),
    "transcription": BuiltinKind(parse_transcription_options, {"": TranscriptionParams, "each of recognizers": BagMember, "cascade": Cascade},
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


def update_command(kind: str, run_dir: Path) -> str:
    """The command line that brings the outputs of builtin stage `kind` in `run_dir` up to date."""
    return f"newsbag {get(kind).command} --run-dir {run_dir}"
