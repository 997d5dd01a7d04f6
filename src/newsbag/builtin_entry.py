"""A builtin stage's entry in a pipeline config: its options (every key but name, kind and
``default``), checked by its kind's parser and with the paths its kind declares anchored."""

from __future__ import annotations

from typing import Any, Mapping

from . import builtin
from .anchoring import anchor_command
from .errors import ConfigError
from .resources import runners_dir
from .tool_spec import anchor_params, load_tool_spec

__all__ = ["builtin_options", "checked_builtin_options", "anchor_builtin"]


def builtin_options(stage: Mapping[str, Any]) -> dict:
    """A builtin stage entry's options (what its kind's ``run`` takes): every key but the
    stage's name, kind and ``default``."""
    return {k: v for k, v in stage.items() if k not in ("name", "kind", "default")}


def anchor_builtin(kind: str, options: Mapping[str, Any], folder: str | None) -> dict:
    """A builtin stage's valid `options` with the paths its kind declares (`builtin.BuiltinKind`
    ``commands``, ``runner_params``) anchored at the config file's `folder`, as a model stage's are.
    The runners a builtin stage starts ship with newsbag (`resources.runners_dir`), whatever the
    config's ``runners_dir``."""
    entry = builtin.get(kind)
    out = dict(options)
    for key in (k for k in entry.commands if k in out):
        out[key] = anchor_command(out[key], folder)
    for key, family in ((k, f) for k, f in entry.runner_params.items() if k in out):
        out[key] = anchor_params(out[key], load_tool_spec(family(options), runners_dir()), folder)
    return out


def checked_builtin_options(stage: Mapping[str, Any], where: str) -> dict:
    """A builtin stage entry's options, checked by its kind's parser (so a typo fails before any
    page runs); a refusal is one ConfigError line starting with `where`."""
    options = builtin_options(stage)
    try:
        builtin.parse_options(stage["kind"], options)
    except ValueError as exc:
        raise ConfigError(f"{where}: {exc}") from None
    return options
