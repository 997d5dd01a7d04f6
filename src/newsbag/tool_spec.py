"""Runner tool specs (``<family>.tool.json``): each family's parameters, label table and output
revision, loaded and checked; a variant's parameters validated against them, their path
parameters anchored, and the ones left out of page fingerprints named."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Mapping

from .anchoring import anchor_path
from .errors import ConfigError, unknown_keys
from .labels import CANONICAL
from .resources import runners_dir

__all__ = ["load_tool_spec", "label_table", "validate_params", "anchor_params", "volatile_params"]

_TYPES = {"string": str, "number": (int, float), "integer": int, "boolean": bool,
          "object": dict, "array": list}


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
    for name, decl in spec.get("parameters", {}).items():
        if "enum" in decl and decl.get("default") not in decl["enum"]:
            raise ConfigError(f"{path}: parameter {name!r} default {decl.get('default')!r} is not one of {decl['enum']}")
    _check_label_table(path, spec.get("labels"))
    return spec


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
    if not isinstance(params, dict):
        raise ConfigError(f"{where}: variant parameters must be an object, got {type(params).__name__}")
    declared = spec.get("parameters", {})
    if problem := unknown_keys(where, params, declared):
        raise ConfigError(problem)
    out = {}
    for name, decl in declared.items():
        value = params.get(name, decl.get("default"))
        expected = _TYPES.get(decl.get("type", "string"))
        bad_bool = isinstance(value, bool) and decl.get("type") in ("number", "integer")
        if value is not None and expected is not None and (not isinstance(value, expected) or bad_bool):
            raise ConfigError(f"{where}: parameter {name!r} must be {decl.get('type')}, got {value!r}")
        if "enum" in decl and value not in decl["enum"]:
            raise ConfigError(f"{where}: parameter {name!r} must be one of {decl['enum']}, got {value!r}")
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            low, high = decl.get("minimum"), decl.get("maximum")
            if (low is not None and value < low) or (high is not None and value > high):
                raise ConfigError(f"{where}: parameter {name!r} must be from {low} to {high}, got {value!r}")
        out[name] = value
    return out


def volatile_params(spec: Mapping[str, Any]) -> tuple[str, ...]:
    """The parameters a runner's tool.json marks ``"fingerprint": false``: how a page is computed
    (batch size, threads, where files wait), not what it holds; no page's fingerprint includes them."""
    return tuple(sorted(n for n, d in spec.get("parameters", {}).items() if d.get("fingerprint") is False))
