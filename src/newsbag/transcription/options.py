"""The transcription stage's declared options (stdlib only: the config checks them without importing the stage)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from ..config_fields import DEVICES, STAGE_KEYS
from ..options import option, parse

__all__ = ["TranscriptionParams", "BagMember", "Cascade", "RECOGNIZER_FAMILIES", "VOTE_METHODS", "cascade_rule",
           "parse_transcription_options", "transcription_source_names", "recognizer_family", "crop_unit", "bag_members"]

_SOURCE = r"[^/]+/[^/]+"   # "<stage>/<variant>"
RECOGNIZER_FAMILIES = ("recognize", "recognize_tesseract")
VOTE_METHODS = ("rover", "confident")   # how a bag's readings of a line make its text (`vote.vote_line`)
# The recognisers that find the lines of a region themselves (the others read one line per crop).
_READS_REGIONS = frozenset({"recognize_tesseract"})


@dataclass(frozen=True)
class TranscriptionParams:
    """Which layout is read, with which lines, by which recogniser in which env."""

    variant: str = option("string", "recommended", 'fused variant read; "recommended": the run\'s recommendation')
    lines_source: str = option("string", "text_lines/lines", 'text-line source whose boxes are read ("stage/variant"; '
                               '"": read whole regions)', pattern=f"(|{_SOURCE})", shape="'stage/variant' or ''")
    block_text_sources: tuple[str, ...] = option(
        "strings", (), "sources whose regions carry text a page-reading model produced (PaddleOCR-VL, MinerU "
        "two_step): a fused region whose lines lie in such blocks takes their text", pattern=_SOURCE,
        shape="'stage/variant'")
    python: str = option("string", "", 'interpreter of the recogniser\'s env ("": the one running newsbag)')
    device: str = option("string", "auto", "where the recogniser runs", choices=DEVICES)
    allow_cpu_fallback: bool = option("boolean", True, "run on the CPU when the GPU is unusable")
    timeout_s: float = option("number", 86400.0, "longest the recogniser runs", unit="s", minimum=0, above=True)
    page_timeout_s: float = option("number", 600.0, "longest one page takes", unit="s", minimum=0, above=True)
    max_restarts: int = option("integer", 3, "recogniser restarts after a crash", minimum=0)
    recognizer_family: str = option("string", "recognize", "the runner that reads the lines: recognize (PP-OCR "
                                    "rec on onnxruntime) or recognize_tesseract (Tesseract LSTM, any traineddata)",
                                    choices=RECOGNIZER_FAMILIES)
    recognizer: Mapping[str, Any] = option("object", {}, "parameters of the recogniser family's tool.json "
                                           "(runners/<recognizer_family>.tool.json)")
    recognizers: tuple[dict, ...] = option(
        "objects", (), "a recogniser bag: several recognisers read the same text lines and each line's text is "
        "voted (`vote`); each {family, name, recognizer, weight, min_score} (see docs/transcription.md); "
        "empty: recognizer_family alone")
    vote: str = option("string", "rover", "how a bag's readings of a line make its text: rover (a character vote "
                       "weighted by confidence) or confident (the most confident reading whole)",
                       choices=VOTE_METHODS)
    cascade: Mapping[str, Any] = option(
        "object", {}, "a bag read as a cascade: its first recogniser reads every line, the others only the lines "
        "the first is unsure of, {score_below, aspect_below, max_share} (see docs/transcription.md); empty: every "
        "recogniser reads every line")
    drop_below: float = option("number", 0.0, "a line no recogniser read with a score of at least this is noise "
                               "(bleed-through, ornaments, specks): its text is left out (0: none)",
                               minimum=0, maximum=1)
    read: str = option("string", "auto", "what one crop is: lines (a text line of lines_source each) or regions "
                       "(a fused region or column part each, whose lines the recogniser finds: "
                       "recognize_tesseract); auto: regions where the recogniser finds lines, else lines",
                       choices=("auto", "lines", "regions"))


@dataclass(frozen=True)
class BagMember:
    """One recogniser of a bag: which runner, under which name, and how much its confidence counts."""

    family: str = option("string", "recognize", "the recogniser runner", choices=RECOGNIZER_FAMILIES)
    name: str = option("string", "", 'the name its readings go by in the transcript ("": its family)',
                       pattern=r"[A-Za-z0-9_.-]*")
    recognizer: Mapping[str, Any] = option("object", {}, "parameters of its family's tool.json")
    weight: float = option("number", 1.0, "how much its confidence counts in the vote", minimum=0, above=True)
    min_score: float = option("number", 0.0, "a reading of it scoring under this does not vote", minimum=0,
                              maximum=1)


@dataclass(frozen=True)
class Cascade:
    """Which lines a cascade's later recognisers read: those the first read with a score under
    `score_below`, or read as nothing, or narrower than `aspect_below` line heights; at most
    `max_share` of a page's lines, the least confident first (what bounds their CPU)."""

    score_below: float = option("number", 0.9, "a line the first recogniser read with a score under this",
                                minimum=0, maximum=1)
    aspect_below: float = option("number", 0.0, "a line whose box is narrower than this many times its height "
                                 "(0: none by their shape)", minimum=0)
    max_share: float = option("number", 1.0, "at most this share of a page's lines, the least confident first",
                              minimum=0, maximum=1)


def cascade_rule(params: TranscriptionParams) -> Cascade | None:
    """The stage's cascade, None where every recogniser reads every line.

    Raises:
        ValueError: bad cascade options (one line).
    """
    return parse(Cascade, params.cascade, "transcription stage: cascade") if params.cascade else None


def bag_members(params: TranscriptionParams) -> list[BagMember]:
    """The recognisers that read the lines: the ``recognizers`` bag, else ``recognizer_family`` alone.

    Raises:
        ValueError: a bad member, or two members of one name (one line).
    """
    if not params.recognizers:
        return [BagMember(params.recognizer_family, params.recognizer_family, dict(params.recognizer))]
    members = []
    for k, given in enumerate(params.recognizers):
        member = parse(BagMember, given, f"transcription stage: recognizers[{k}]")
        members.append(BagMember(member.family, member.name or member.family, dict(member.recognizer),
                                 member.weight, member.min_score))
    names = [m.name for m in members]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise ValueError(f"transcription stage: recognizers: two members named {twice[0]!r}; give each a name")
    return members


def parse_transcription_options(options: Mapping[str, Any]) -> TranscriptionParams:
    """Validated options; a one-line ValueError on unknown keys or bad values."""
    params = parse(TranscriptionParams, options, "transcription stage", STAGE_KEYS)
    members = bag_members(params)
    if params.read == "regions" and len(members) > 1:
        raise ValueError("transcription stage: read 'regions' with a recogniser bag: its vote pairs the members' "
                         "readings line by line; set read to 'lines'")
    if cascade_rule(params) is not None and len(members) < 2:
        raise ValueError("transcription stage: cascade without a recogniser bag: name two recognizers, the first "
                         "reading every line")
    if params.read == "regions" and members[0].family not in _READS_REGIONS:
        raise ValueError(f"transcription stage: read 'regions' needs a recogniser that finds lines itself "
                         f"({', '.join(sorted(_READS_REGIONS))}); {members[0].family} reads one line per "
                         "crop: set read to 'lines'")
    return params


def crop_unit(params: TranscriptionParams) -> str:
    """What one crop of the recogniser's plan is: "region" or "line" (runners/_plan.py `UNITS`);
    always lines for a bag, whose members must read the same lines."""
    members = bag_members(params)
    if params.read == "auto":
        return "region" if len(members) == 1 and members[0].family in _READS_REGIONS else "line"
    return params.read[:-1]


def transcription_source_names(options: Mapping[str, Any]) -> list[tuple[str, str]]:
    """(key, source) of the sources valid `options` name (`builtin.unmatched_source`): a typo'd
    ``lines_source`` read whole regions instead of lines on every page, with no error."""
    lines = [("transcription.lines_source", options["lines_source"])] if options.get("lines_source") else []
    return lines + [("transcription.block_text_sources", b) for b in options.get("block_text_sources", [])]


def recognizer_family(options: Mapping[str, Any]) -> str:
    """The runner family whose tool.json declares the ``recognizer`` parameters of valid `options`."""
    return options.get("recognizer_family", TranscriptionParams.recognizer_family)
