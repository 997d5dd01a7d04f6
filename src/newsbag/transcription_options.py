"""The transcription stage's declared options (stdlib only: the config checks them without importing the stage)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from .options import option, parse

__all__ = ["TranscriptionParams", "parse_transcription_options", "transcription_source_names"]

_SOURCE = r"[^/]+/[^/]+"   # "<stage>/<variant>"


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
    device: str = option("string", "auto", "where the recogniser runs", choices=("auto", "gpu", "cpu"))
    allow_cpu_fallback: bool = option("boolean", True, "run on the CPU when the GPU is unusable")
    timeout_s: float = option("number", 86400.0, "longest the recogniser runs", unit="s", minimum=0, above=True)
    page_timeout_s: float = option("number", 600.0, "longest one page takes", unit="s", minimum=0, above=True)
    max_restarts: int = option("integer", 3, "recogniser restarts after a crash", minimum=0)
    recognizer: Mapping[str, Any] = option("object", {}, "parameters of runners/recognize.tool.json "
                                           "(model_path, dict_path...)")


def parse_transcription_options(options: Mapping[str, Any]) -> TranscriptionParams:
    """Validated options; a one-line ValueError on unknown keys or bad values."""
    return parse(TranscriptionParams, options, "transcription stage", frozenset({"name", "kind", "description"}))


def transcription_source_names(options: Mapping[str, Any]) -> list[tuple[str, str]]:
    """(key, source) of the sources valid `options` name (`builtin.unmatched_source`): a typo'd
    ``lines_source`` read whole regions instead of lines on every page, with no error."""
    lines = [("transcription.lines_source", options["lines_source"])] if options.get("lines_source") else []
    return lines + [("transcription.block_text_sources", b) for b in options.get("block_text_sources", [])]
