"""Reading JSON text that a person may have written or damaged (a config, the run's JSON-lines
records): whatever cannot be read plainly is one line naming where, never a traceback or a guess."""

from __future__ import annotations

import json
import os
from typing import Any, Iterator

from .errors import InputError

__all__ = ["utf8", "parse_document", "jsonl_lines"]


def utf8(data: bytes, line: int = 1) -> str:
    """`data` (starting at line `line` of its file) as text.

    Raises:
        ValueError: "line L column C: not UTF-8 text (byte 0xNN)" at its first byte that is not
            UTF-8 (the column counts bytes).
    """
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        at = line + data.count(b"\n", 0, exc.start)
        column = exc.start - data.rfind(b"\n", 0, exc.start)
        raise ValueError(f"line {at} column {column}: not UTF-8 text (byte 0x{data[exc.start]:02x})") from None


class _Repeats(dict):
    """A JSON object that gave `repeated`, its first repeated key, more than once."""

    repeated: str


def _object(pairs: list[tuple[str, Any]]) -> dict:
    obj = dict(pairs)
    if len(obj) == len(pairs):
        return obj
    seen: set[str] = set()
    out = _Repeats(obj)
    out.repeated = next(k for k, _ in pairs if k in seen or seen.add(k))
    return out


# A config nests a few levels (stages[0].variants.v.params.x). Its readers recurse (`$VAR`
# expansion, freezing, writing the record): a document the parser takes at 500 levels still
# overflowed them, so one past this is refused as the parser refuses one past ~1,000.
MAX_DEPTH = 100


def _first_repeat(value: Any) -> tuple[str, str] | None:
    """(JSON path of the object, key) of the first object in document order that repeats a key.
    A loop, not recursion: the value may nest as deep as the parser allows.

    Raises:
        ValueError: the value nests deeper than `MAX_DEPTH`.
    """
    stack = [(value, "", 0)]
    while stack:
        node, path, depth = stack.pop()
        if depth > MAX_DEPTH:
            raise ValueError(f"invalid JSON (nested too deep: over {MAX_DEPTH} levels)")
        if isinstance(node, _Repeats):
            return path, node.repeated
        if isinstance(node, dict):
            stack += [(v, f"{path}.{k}" if path else str(k), depth + 1) for k, v in reversed(node.items())]
        elif isinstance(node, list):
            stack += [(v, f"{path}[{i}]", depth + 1) for i, v in reversed(list(enumerate(node)))]
    return None


def parse_document(data: bytes) -> Any:
    """The JSON value of a file a person writes (a config), read strictly.

    Raises:
        ValueError: one line: a byte that is not UTF-8 or bad JSON (with line and column),
            nesting deeper than the parser goes, or a key given twice in one object (with the
            object's JSON path: the last one would win without a word).
    """
    try:
        text = utf8(data)
    except ValueError as exc:
        raise ValueError(f"invalid JSON at {exc}") from None
    try:
        value = json.loads(text, object_pairs_hook=_object)
    except json.JSONDecodeError as exc:
        raise ValueError(f"invalid JSON at line {exc.lineno} column {exc.colno}: {exc.msg}") from None
    except RecursionError:
        raise ValueError("invalid JSON (nested too deep)") from None
    if (repeat := _first_repeat(value)) is not None:
        path, key = repeat
        raise ValueError(f"key {key!r} is given twice in {path or 'the top-level object'} (JSON keeps only the last)")
    return value


def jsonl_lines(path: str | os.PathLike) -> Iterator[tuple[int, str]]:
    """(line number, text) of each non-blank line of a JSON-lines file, read one line at a time
    (none when the file is missing).

    Lines end at ``\\n`` only: newsbag writes UTF-8 JSON (`io.dumps_strict`), so a scan named with
    U+2028 or U+0085 puts that character inside a line, where `str.splitlines` would cut it.

    Raises:
        InputError: a line that is not UTF-8 text, naming the file, line and column.
    """
    try:
        fh = open(path, "rb")
    except FileNotFoundError:
        return
    with fh:
        for number, raw in enumerate(fh, 1):
            try:
                line = utf8(raw, number)
            except ValueError as exc:
                raise InputError(f"{path}: {exc}") from None
            if line.strip():
                yield number, line
