"""Runner tool specs (``<family>.tool.json``): each family's parameters, label table and output
revision, loaded and checked; the parameters loaded into an options dataclass (`options.option`),
so a variant's parameters are validated as every other level of the config is; their path
parameters anchored, and the ones left out of page fingerprints named."""

from __future__ import annotations

import functools
import json
from dataclasses import fields, make_dataclass
from pathlib import Path
from typing import Any, Mapping

from .anchoring import anchor_path
from .errors import ConfigError
from .labels import CANONICAL
from .options import option, parse, values
from .resources import runners_dir

__all__ = ["load_tool_spec", "label_table", "parameter_options", "validate_params", "anchor_params",
           "volatile_params"]

# A tool.json parameter's "type" (JSON Schema's words): each is an `options.Option` kind of that name.
_TYPES = ("string", "number", "integer", "boolean", "object", "array")


def anchor_params(params: Mapping[str, Any], spec: dict, folder: str | None) -> dict:
    """`params` with the string parameters `spec` (a tool.json) declares ``"path": true`` anchored."""
    declared = spec.get("parameters", {})
    return {k: anchor_path(v, folder) if isinstance(v, str) and declared.get(k, {}).get("path") else v
            for k, v in params.items()}


def load_tool_spec(family: str, root: Path) -> dict:
    """The family's ``<family>.tool.json``, checked: revision (0 when absent), parameters (enum
    defaults valid) and labels.

    Raises:
        ConfigError: no runner script, no spec, or a spec without a valid label table.
    """
    path = root / f"{family}.tool.json"
    if not (root / f"{family}.py").is_file():
        raise ConfigError(f"no runner for family {family!r}: {root / (family + '.py')} does not exist")
    try:
        with open(path, encoding="utf-8") as fh:
            spec = json.load(fh)
    except FileNotFoundError:
        raise ConfigError(f"runner {family!r} has no tool spec {path}") from None
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{path}: invalid JSON at line {exc.lineno}: {exc.msg}") from None
    revision = spec.setdefault("revision", 0)  # a runner written elsewhere may declare none
    if isinstance(revision, bool) or not isinstance(revision, int) or revision < 0:
        raise ConfigError(f"{path}: revision must be a whole number >= 0 (bump it when the runner's output "
                          f"changes for the same inputs), got {json.dumps(revision)}")
    try:
        declared = parameter_options(spec)
        for f in fields(declared):   # each default as its own declaration says
            f.metadata["option"].check(f"parameter {f.name!r} default", spec["parameters"][f.name].get("default"))
    except (ValueError, TypeError) as exc:
        raise ConfigError(f"{path}: {exc}") from None
    _check_label_table(path, spec.get("labels"))
    return spec


def parameter_options(spec: Mapping[str, Any]) -> type:
    """The options dataclass of a tool spec's ``"parameters"``: each one's type, ``enum``,
    ``minimum`` and ``maximum`` as an `options.Option`, its default and its description; null only where
    the default is null, and values kept as written (`Option.raw`), so page fingerprints hold
    them as the config gave them.

    Raises:
        ValueError: a declaration the options cannot hold (an unknown type, a name that is no
        identifier), one line naming the parameter.
    """
    return _options_of(json.dumps(spec.get("parameters", {})))


@functools.lru_cache(maxsize=64)
def _options_of(parameters: str) -> type:
    """`parameter_options` of the parameters' JSON text: each config load asks once per variant."""
    declared = json.loads(parameters)
    if not isinstance(declared, dict) or not all(isinstance(d, dict) for d in declared.values()):
        raise ValueError("parameters must be an object of {name: declaration}")
    rows = [(name, Any, _parameter_field(name, decl)) for name, decl in declared.items()]
    try:
        return make_dataclass("RunnerParameters", rows, frozen=True)
    except TypeError as exc:   # a keyword, a name that is no identifier
        raise ValueError(f"parameters: {exc}") from None


def _parameter_field(name: str, decl: Mapping[str, Any]) -> Any:
    """One tool.json parameter declaration as an `options.option` field."""
    kind = decl.get("type", "string")
    if kind not in _TYPES:
        raise ValueError(f"parameter {name!r}: type must be one of {', '.join(_TYPES)}, got {kind!r}")
    choices = tuple(decl.get("enum", ()))
    if choices and (kind != "string" or not all(isinstance(c, str) for c in choices)):
        raise ValueError(f"parameter {name!r}: an enum must list strings of a \"string\" parameter")
    notes = [note for note, on in (("a path, relative to the config file", decl.get("path")),
                                   ("changing it redoes nothing", decl.get("fingerprint") is False)) if on]
    doc = decl.get("description", "") + (f" ({'; '.join(notes)})" if notes else "")
    return option(kind, decl.get("default"), doc.strip(), minimum=decl.get("minimum"), maximum=decl.get("maximum"),
                  choices=choices, nullable=decl.get("default") is None, raw=True)


def label_table(family: str, root: Path | None = None) -> dict[str, str]:
    """Raw label -> canonical label of `family`, from its tool.json (checked)."""
    return dict(load_tool_spec(family, root or runners_dir())["labels"])


def _check_label_table(path: Path, table: Any) -> None:
    """A family must map every raw label it emits to a canonical one; no table, no run."""
    if not isinstance(table, dict) or not table:
        raise ConfigError(f"{path}: no label table: add \"labels\": {{raw label: canonical label}} "
                          f"(canonical labels: {', '.join(CANONICAL)})")
    bad = {raw: canon for raw, canon in table.items() if canon not in CANONICAL}
    if bad:
        raw, canon = next(iter(bad.items()))
        raise ConfigError(f"{path}: labels maps {raw!r} to {canon!r}, which is not a canonical label "
                          f"({', '.join(CANONICAL)})")


def validate_params(where: str, params: Any, spec: dict) -> dict:
    """A variant's parameters checked against the family's `spec` (`parameter_options`), every
    declared one present (defaults filled), in declared order: what the runner gets and its
    pages are fingerprinted with.

    Raises:
        ConfigError: one line starting with `where`: an unknown key (with the nearest one) or a bad value.
    """
    try:
        return values(parse(parameter_options(spec), params, where))
    except ValueError as exc:
        raise ConfigError(str(exc)) from None


def volatile_params(spec: Mapping[str, Any]) -> tuple[str, ...]:
    """The parameters a runner's tool.json marks ``"fingerprint": false``: how a page is computed
    (batch size, threads, where files wait), not what it holds; no page's fingerprint includes them."""
    return tuple(sorted(n for n, d in spec.get("parameters", {}).items() if d.get("fingerprint") is False))
