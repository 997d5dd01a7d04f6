"""The exception hierarchy; each class carries the process exit code `cli.main` maps it to."""

from __future__ import annotations

import difflib
import os
import re
from typing import Iterable

__all__ = [
    "NewsbagError",
    "InputError",
    "InputRejected",
    "ConfigError",
    "EnvError",
    "RunnerError",
    "PartialFailure",
    "GpuPreflightError",
    "RunDirError",
    "did_you_mean",
    "first_line",
    "page_failure",
    "utf8_text",
    "printable",
]


class NewsbagError(Exception):
    """Base class: a failure the user can act on. The message is one line."""

    exit_code = 1


class ConfigError(NewsbagError):
    """Bad config file or bad option value (usage error)."""

    exit_code = 2


class InputError(NewsbagError):
    """Unreadable or missing input (image, manifest, run directory)."""

    exit_code = 2


class InputRejected(InputError):
    """An input that is not a page, with the kind of reason (for rejected.jsonl and status)."""

    def __init__(self, message: str, kind: str):
        super().__init__(message)
        self.kind = kind


class EnvError(NewsbagError):
    """A model env, interpreter or dependency is missing."""

    exit_code = 3


class RunnerError(NewsbagError):
    """A source never started: its runner died before processing any page (import error,
    crash at load). Not 4: a Slurm job that tolerates failed pages must not pass without it."""

    exit_code = 6


class PartialFailure(NewsbagError):
    """The run finished but some pages failed; the ledger has the details."""

    exit_code = 4


class GpuPreflightError(NewsbagError):
    """A GPU was required and none was usable."""

    exit_code = 5


class RunDirError(NewsbagError):
    """The run directory cannot be written (disk full, quota, read-only, permission).

    Nothing half-written counts as finished (every write is atomic): free space and rerun
    the same command; it resumes.
    """

    exit_code = 7


def first_line(exc: BaseException) -> str:
    """The first line of an exception's message, or its type's name when it has none: what a
    one-line failure record holds."""
    return (str(exc).splitlines() or [type(exc).__name__])[0]


def page_failure(page_id: str, exc: BaseException) -> str:
    """One line for an error a page stage did not foresee (a bug, an input nobody thought of),
    recorded at the page boundary so the rest of the batch goes on: the page, the type, the
    message's first line."""
    lines = str(exc).splitlines()
    return f"page {page_id}: {type(exc).__name__}" + (f": {lines[0]}" if lines else "")


def did_you_mean(name: str, choices: Iterable[str]) -> str:
    """"; did you mean 'X'?" for the known name closest to a mistyped `name`, or "" when none is close:
    the tail every "unknown ..." message puts before its list of known names."""
    known = {c.lower(): c for c in choices}   # case apart: a variant `c` is `C`
    near = difflib.get_close_matches(name.lower(), list(known), n=1)
    return f"; did you mean {known[near[0]]!r}?" if near else ""


def unknown_keys(where: str, given: Iterable[str], known: Iterable[str]) -> str | None:
    """The one message for keys of a config object that its declaration lacks, at every level
    (pipeline, stage, runner parameter, fusion section, variant and stage options), or None when
    every key is known: "<where>: unknown key 'colgap'; did you mean 'col_gap'? (known: ...)".
    """
    known = sorted(known)
    unknown = sorted(set(given) - set(known))
    if not unknown:
        return None
    names = ", ".join(repr(k) for k in unknown)
    return (f"{where}: unknown key{'s' if len(unknown) > 1 else ''} {names}{did_you_mean(unknown[0], known)}"
            f" (known: {', '.join(known) or 'none'})")


def utf8_text(text: str) -> str:
    """`text` (a path, or a message naming one) with the undecodable bytes of a name as ``\\xNN``:
    text every file and stream takes."""
    return os.fsencode(text).decode("utf-8", "backslashreplace")


_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")


def _escaped(m: re.Match) -> str:
    code = ord(m.group())
    return f"\\x{code:02x}" if code < 0x80 else f"\\u{code:04x}"


def printable(text: str) -> str:
    """`text` as a terminal or a log may show it: `utf8_text`, with C0 controls and DEL as
    ``\\xNN`` and C1 controls as ``\\u00NN``. A name holding an escape sequence cannot retitle
    or clear the operator's terminal, nor one holding a newline forge a line of newsbag's.
    Every line newsbag shows a person goes through it (the log handler, `cli.main`'s errors)."""
    try:
        text = utf8_text(text)
    except UnicodeEncodeError:   # a lone surrogate no file name decodes to (a JSON "\\ud800")
        text = text.encode("utf-8", "backslashreplace").decode("utf-8")
    return _CONTROL.sub(_escaped, text)
