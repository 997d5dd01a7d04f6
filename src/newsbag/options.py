"""Declared options of builtin stages: each a dataclass field with its type, unit and range, one validator for all.

Every level of a config is declared the same way: the pipeline's own keys, a model stage's, a
runner's parameters (its tool.json, loaded into an options dataclass by `tool_spec`), the fusion
section and each builtin stage's options. Every field of an options dataclass is made with
`option`, which says what the value must be. `parse` checks a config's mapping against the
declaration (unknown keys refused with the valid ones listed and the nearest one offered,
defaults filled, one-line ValueError naming the key) and `markdown_table` renders the
declaration for the docs. No key is special-cased by its name. Stdlib only.
"""

from __future__ import annotations

import math
import re
from dataclasses import MISSING, dataclass, field, fields
from typing import Any, Mapping

from .errors import unknown_keys

__all__ = ["Option", "option", "REQUIRED", "parse", "values", "markdown_table"]

# What each kind of value is, as error messages and the docs say it.
_KINDS = {
    "integer": "a whole number", "number": "a number", "boolean": "true or false", "string": "a string",
    "strings": "a list of strings", "pair": "a [first, second] pair of numbers", "weights": "an object of numbers",
    "object": "an object", "objects": "a list of objects", "array": "a list",
    "scalars": "an object of strings or numbers",
}

# The default of an option the config must give (`option(kind, REQUIRED, doc)`).
REQUIRED = MISSING


@dataclass(frozen=True)
class Option:
    """What one option's value must be.

    kind: one of `_KINDS`; unit: what a number counts ("px", "text-line heights", "share of
    the page width"); minimum/maximum: its range (numbers, and each number of a pair or of
    weights), ``above`` making the minimum exclusive; choices: the values a string (or each
    string of a list) may take; pattern: a regular expression every string must match, and
    shape: it in words ("'stage/variant'");
    nullable: null is allowed; literal: a string a list option takes besides lists, kept as the
    one-item list of it (granularity "auto" is ``("auto",)``); min_items: the fewest items of a
    list or an object; raw: the value is kept as written once checked, not frozen (a runner's
    parameters reach its script and its page fingerprint as the config wrote them: 60 stays 60);
    shown: the default in words where its value is too long for the docs' table.
    """

    kind: str
    doc: str
    unit: str = ""
    minimum: float | None = None
    maximum: float | None = None
    above: bool = False
    choices: tuple[str, ...] = ()
    pattern: str = ""
    shape: str = ""
    nullable: bool = False
    literal: str | None = None
    min_items: int = 0
    raw: bool = False
    shown: str = ""

    def check(self, where: str, value: Any) -> Any:
        """`value` in its frozen form (tuples, floats); a one-line ValueError saying what it must be."""
        if value is None and self.nullable or self.literal is not None and value == self.literal:
            return value if value is None else (value,)
        converted = _CONVERT[self.kind](self, value)
        if converted is _BAD:
            raise ValueError(f"{where} must be {self.describe()}, got {_brief(value)}")
        return value if self.raw else converted

    def describe(self) -> str:
        """What a value must be, in words: "a whole number >= 1 (px)"."""
        what = _KINDS[self.kind]
        if self.choices:
            what = (f"a list of {', '.join(self.choices)}" if self.kind == "strings"
                    else f"one of {', '.join(self.choices)}")
        if self.shape:
            what += f" {self.shape}"
        if self.minimum is not None and self.maximum is not None:
            what += f" in [{_num(self.minimum)}, {_num(self.maximum)}]"
        elif self.minimum is not None:
            what += f" {'>' if self.above else '>='} {_num(self.minimum)}"
        if self.min_items:
            what = f"{what} (at least {self.min_items})"
        if self.unit:
            what += f" ({self.unit})"
        if self.literal is not None:
            what += f", or {self.literal!r}"
        return what + (", or null" if self.nullable else "")


def option(kind: str, default: Any, doc: str, **declared: Any) -> Any:
    """A dataclass field declaring one option (`Option`); list and dict defaults are copied per
    instance, and a `REQUIRED` one has none (declare it in a ``kw_only`` dataclass)."""
    meta = {"option": Option(kind, doc, **declared)}
    if default is REQUIRED:
        return field(metadata=meta)
    if isinstance(default, (list, dict)):
        return field(default_factory=lambda: type(default)(default), metadata=meta)
    return field(default=default, metadata=meta)


def parse(cls: type, given: Mapping[str, Any], where: str, ignore: frozenset[str] = frozenset()) -> Any:
    """An instance of the options dataclass `cls` from a config's mapping.

    Args:
        cls: a dataclass whose fields are made with `option`.
        given: the config's keys; those in `ignore` (a stage entry's name, kind...) are skipped.
        where: how messages name the options ("review stage", "fusion.variants.C.params").

    Raises:
        ValueError: one line naming the key: unknown (the valid keys listed), missing or a bad value.
    """
    if not isinstance(given, Mapping):
        raise ValueError(f"{where} must be an object, got {type(given).__name__}")
    declared = {f.name: f.metadata["option"] for f in fields(cls)}
    if problem := unknown_keys(where, set(given) - ignore, declared):
        raise ValueError(problem)
    checked = {k: declared[k].check(f"{where}: {k}", v) for k, v in given.items() if k in declared}
    if missing := [f.name for f in fields(cls) if _default(f) is REQUIRED and f.name not in checked]:
        raise ValueError(f"{where}: {missing[0]} is missing: it must be {declared[missing[0]].describe()}")
    return cls(**checked)


def values(options: Any) -> dict[str, Any]:
    """The values of an options dataclass instance by name, in declared order (not copied)."""
    return {f.name: getattr(options, f.name) for f in fields(options)}


def markdown_table(cls: type) -> str:
    """The declared options of `cls` as a Markdown table: option, default, what it must be, what it does."""
    rows = ["| option | default | value | what it does |", "|---|---|---|---|"]
    for f in fields(cls):
        opt = f.metadata["option"]
        default = opt.shown or ("required" if (value := _default(f)) is REQUIRED else f"`{_shown(value)}`")
        rows.append(f"| `{f.name}` | {_cell(default)} | {_cell(opt.describe())} | {_cell(opt.doc)} |")
    return "\n".join(rows) + "\n"


_BAD = object()


def _default(f: Any) -> Any:
    """A dataclass field's default (a fresh one of a factory), or `REQUIRED`."""
    return f.default_factory() if f.default_factory is not MISSING else f.default


def _cell(text: str) -> str:
    """Text for one Markdown table cell: a pipe would split the row."""
    return text.replace("|", "\\|").replace("\n", " ")

def _brief(value: Any, most: int = 120) -> str:
    """`value`'s repr, cut to `most` characters: a wrong list of stages is not pasted whole into a message."""
    text = repr(value)
    return text if len(text) <= most else text[:most - 3] + "..."


def _num(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else str(x)


def _shown(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (tuple, list)):
        return "[" + ", ".join(_shown(v) for v in value) + "]"
    if isinstance(value, Mapping):
        return "{" + ", ".join(f'"{k}": {_shown(v)}' for k, v in value.items()) + "}"
    return str(value) if not isinstance(value, str) else f'"{value}"'


def _in_range(opt: Option, x: Any) -> bool:
    if isinstance(x, bool) or not isinstance(x, (int, float)) or not math.isfinite(x):
        return False
    low = opt.minimum is None or (x > opt.minimum if opt.above else x >= opt.minimum)
    return low and (opt.maximum is None or x <= opt.maximum)


def _string_ok(opt: Option, s: Any) -> bool:
    return (isinstance(s, str) and (not opt.choices or s in opt.choices)
            and (not opt.pattern or re.fullmatch(opt.pattern, s) is not None))


def _integer(opt: Option, v: Any) -> Any:
    return v if isinstance(v, int) and _in_range(opt, v) else _BAD


def _number(opt: Option, v: Any) -> Any:
    return float(v) if _in_range(opt, v) else _BAD


def _boolean(opt: Option, v: Any) -> Any:
    return v if isinstance(v, bool) else _BAD


def _string(opt: Option, v: Any) -> Any:
    return v if _string_ok(opt, v) else _BAD


def _strings(opt: Option, v: Any) -> Any:
    ok = isinstance(v, (list, tuple)) and len(v) >= opt.min_items and all(_string_ok(opt, s) for s in v)
    return tuple(v) if ok else _BAD


def _pair(opt: Option, v: Any) -> Any:
    ok = isinstance(v, (list, tuple)) and len(v) == 2 and all(_in_range(opt, x) for x in v)
    return (float(v[0]), float(v[1])) if ok else _BAD


def _weights(opt: Option, v: Any) -> Any:
    ok = isinstance(v, Mapping) and all(isinstance(k, str) and _in_range(opt, w) for k, w in v.items())
    return tuple((k, float(w)) for k, w in v.items()) if ok else _BAD


def _object(opt: Option, v: Any) -> Any:
    return dict(v) if isinstance(v, Mapping) and len(v) >= opt.min_items else _BAD


def _scalars(opt: Option, v: Any) -> Any:
    ok = isinstance(v, Mapping) and all(not isinstance(x, bool) and isinstance(x, (str, int, float)) for x in v.values())
    return dict(v) if ok else _BAD


def _array(opt: Option, v: Any) -> Any:
    return list(v) if isinstance(v, (list, tuple)) and len(v) >= opt.min_items else _BAD


def _objects(opt: Option, v: Any) -> Any:
    ok = isinstance(v, (list, tuple)) and len(v) >= opt.min_items and all(isinstance(o, Mapping) for o in v)
    return tuple(dict(o) for o in v) if ok else _BAD


_CONVERT = {"integer": _integer, "number": _number, "boolean": _boolean, "string": _string, "strings": _strings,
            "pair": _pair, "weights": _weights, "object": _object, "objects": _objects, "array": _array,
            "scalars": _scalars}
