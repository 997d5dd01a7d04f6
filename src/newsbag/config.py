"""Pipeline config: load JSON, expand $VARS, anchor relative paths at the file's folder,
validate every level against its declaration (`config_fields`, runner tool.json, the builtin
stages' options), freeze."""

from __future__ import annotations

import functools
import logging
import os
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any, Literal, Mapping, TypeVar

from . import builtin, freshness, rundir
from .anchoring import anchor_command, anchor_path
from .builtin_entry import anchor_builtin, checked_builtin_options
from .config_fields import (CONFIG_VERSION, DEFAULT_MAX_EMPTY_SHARE, DEFAULT_MAX_FAILED_FRACTION, STAGE_KEYS,
                            EnvFields, ModelStageFields, PipelineFields, StageFields)
from .errors import ConfigError, did_you_mean
from .folder_names import FOLDER_NAME_RULE, is_folder_name
from .jsontext import parse_document
from .options import parse
from .resources import default_config_path, runners_dir
from .tool_spec import anchor_params, load_tool_spec, validate_params, volatile_params

__all__ = [
    "EnvSpec",
    "ModelStage",
    "BuiltinStage",
    "PipelineConfig",
    "load_config",
    "load_run_config",
    "parse_config",
    "record_builtin_run",
    "read_config_json",
]

Device = Literal["auto", "gpu", "cpu"]
_VAR = re.compile(r"\$(\w+)|\$\{(\w+)\}")

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class EnvSpec:
    name: str
    python: str
    env: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class ModelStage:
    name: str
    family: str
    env: EnvSpec
    device: Device
    allow_cpu_fallback: bool
    timeout_s: float
    page_timeout_s: float
    max_restarts: int
    variants: Mapping[str, Mapping[str, Any]]
    kind: str = "model"
    # Parameters whose tool.json declares "fingerprint": false (batch size, threads...):
    # changing them does not make finished pages stale.
    volatile: tuple[str, ...] = ()
    default: bool = True  # run when no --stages is given
    max_failed_fraction: float = DEFAULT_MAX_FAILED_FRACTION
    # raw model label -> canonical label, from the family's tool.json "labels"
    label_map: Mapping[str, str] = field(default_factory=dict)
    # above this share of empty pages (answered, nothing parsed) the source is flagged
    max_empty_share: float = DEFAULT_MAX_EMPTY_SHARE
    # the family's output revision, from its tool.json "revision" (0 when it declares none)
    revision: int = 0

    def page_fingerprint(self, variant: str, image_sha256: str) -> str:
        """The fingerprint a current page of `variant` records (`freshness.source_fingerprinter`): what
        the orchestrator hands the runner, and what its skip, status and the Slurm plan compare."""
        return self._fingerprinters[variant](image_sha256)

    @functools.cached_property
    def _fingerprinters(self) -> dict[str, freshness.Fingerprint]:
        """`page_fingerprint` of each variant less the page, encoded once: asked for every page."""
        return {v: freshness.source_fingerprinter(self.family, self.revision, dict(params), self.volatile,
                                               dict(self.label_map)) for v, params in self.variants.items()}


@dataclass(frozen=True)
class BuiltinStage:
    name: str
    kind: str
    options: Mapping[str, Any]
    default: bool = True  # run when no --stages is given


Stage = ModelStage | BuiltinStage


@dataclass(frozen=True)
class PipelineConfig:
    path: str
    resolved: Mapping[str, Any]
    stages: tuple[Stage, ...]
    runners_dir: Path

    @property
    def stage_names(self) -> tuple[str, ...]:
        return tuple(s.name for s in self.stages)

    def stage(self, name: str) -> Stage:
        for s in self.stages:
            if s.name == name:
                return s
        raise ConfigError(f"unknown stage {name!r} (this config has: {', '.join(self.stage_names)})")

    def builtin(self, kind: str) -> BuiltinStage:
        """The first stage of a builtin kind, or one with the kind's defaults: what `newsbag <command>` runs."""
        return next((s for s in self.stages if isinstance(s, BuiltinStage) and s.kind == kind),
                    BuiltinStage(kind, kind, {}))

    def select(self, names: list[str] | None) -> tuple[Stage, ...]:
        """Stages to run, in config order; unknown names are refused before anything runs.

        Without names: every stage but those marked ``"default": false`` (slow, opt-in ones).
        """
        if not names:
            return tuple(s for s in self.stages if s.default)
        unknown = [n for n in names if n not in self.stage_names]
        if unknown:
            raise ConfigError(
                f"unknown stage(s) {', '.join(unknown)}{did_you_mean(unknown[0], self.stage_names)} "
                f"(this config has: {', '.join(self.stage_names)})"
            )
        return tuple(s for s in self.stages if s.name in names)


def _expand(value: Any, variables: Mapping[str, str]) -> Any:
    if isinstance(value, str):
        def sub(m: re.Match) -> str:
            key = m.group(1) or m.group(2)
            return variables.get(key, m.group(0))
        return _VAR.sub(sub, value)
    if isinstance(value, list):
        return [_expand(v, variables) for v in value]
    if isinstance(value, dict):
        return {k: _expand(v, variables) for k, v in value.items()}
    return value


def _unset_variable(value: Any, where: str = "") -> tuple[str, str] | None:
    """(key path, name) of the first `$VAR` left in an expanded `value`: set neither in the
    environment nor under ``vars``. Left as written it became a path like /proj/$BASE/bin/python
    that failed later without naming the variable. Descriptions are prose and not looked at."""
    if isinstance(value, str):
        m = _VAR.search(value)
        return (where, m.group(1) or m.group(2)) if m else None
    items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    for key, item in items:
        if key != "description" and (found := _unset_variable(
                item, f"{where}[{key}]" if isinstance(key, int) else f"{where}.{key}" if where else key)):
            return found
    return None


def _variables(declared: Mapping[str, Any]) -> dict[str, str]:
    """Environment first, then the config's `vars` defaults (themselves expanded)."""
    env = dict(os.environ)
    env.setdefault("USER", os.environ.get("LOGNAME", "user"))
    out = dict(env)
    for key, default in declared.items():
        if key not in env:
            out[key] = _expand(str(default), out)
    return out


def record_builtin_run(recorded: Mapping[str, Any] | None, config: PipelineConfig, kind: str) -> dict:
    """The run's config record once a builtin command ran its `kind` stage with `config` (pure).

    Only the first entry of that kind changes, to the options the command ran with (the kind's
    defaults when `config` has none); it keeps the recorded entry's name, place and ``default``,
    and the other stages keep what they last ran with, so status checks each stage's outputs by
    what made them. With nothing recorded: `config` whole, as `newsbag run` records it.
    """
    if recorded is None:
        return to_jsonable(config.resolved)
    ran = config.builtin(kind)
    stages = list(recorded.get("stages") or [])
    at = next((i for i, s in enumerate(stages) if isinstance(s, dict) and s.get("kind") == kind), None)
    old = stages[at] if at is not None else {"name": ran.name}
    entry = {"name": old["name"], "kind": kind, **({"default": old["default"]} if "default" in old else {}),
             **to_jsonable(ran.options)}
    if at is None:
        stages.append(entry)
    else:
        stages[at] = entry
    return {**recorded, "stages": stages}


_Fields = TypeVar("_Fields")


def _parse(declared: type[_Fields], section: Mapping[str, Any], where: str) -> _Fields:
    """`section` checked against its declaration (`config_fields`): one ConfigError line from `where`."""
    try:
        return parse(declared, section, where)
    except ValueError as exc:
        raise ConfigError(str(exc)) from None


def _freeze(value: Any) -> Any:
    if isinstance(value, dict):
        return MappingProxyType({k: _freeze(v) for k, v in value.items()})
    if isinstance(value, list):
        return tuple(_freeze(v) for v in value)
    return value


def parse_config(raw: Any, path: str = "<config>", folder: str | None = None) -> PipelineConfig:
    """Validate a config dict; every message names the file and the offending key.

    Relative paths (runners_dir, interpreters, tool parameters declared ``"path": true``) are
    anchored at `folder`, the config file's folder (`anchor_path`), and written back into
    ``resolved``: config.resolved.json, which `newsbag fuse --run-dir` reloads from elsewhere,
    holds the paths the run used.
    """
    resolved, top = _resolved(raw, path, folder)
    root = Path(resolved["runners_dir"]) if resolved.get("runners_dir") else runners_dir()
    envs = _envs(path, resolved.get("envs", {}), folder)
    stages: list[Stage] = []
    for i, sd in enumerate(resolved["stages"]):
        stages.append(_stage(path, i, sd, {s.name for s in stages}, folder, envs, top, root))
    _check_stage_links(path, stages)
    return PipelineConfig(path=path, resolved=_freeze(resolved), stages=tuple(stages), runners_dir=root)


def _resolved(raw: Any, path: str, folder: str | None) -> tuple[dict, PipelineFields]:
    """`raw` with its version checked first (another version's keys are another matter), `$VAR`s
    expanded (``vars`` holding the values used), its top level checked (`PipelineFields`) and
    runners_dir anchored at `folder`; and its top level's values."""
    if not isinstance(raw, dict):
        raise ConfigError(f"{path}: the config must be a JSON object")
    version = raw.get("version", CONFIG_VERSION)
    if isinstance(version, bool) or version != CONFIG_VERSION:
        raise ConfigError(f"{path}: version {version!r} is not one this newsbag reads (it reads version "
                          f"{CONFIG_VERSION}); write the config for this newsbag, or run the newsbag it was written for")
    declared = raw.get("vars", {})
    variables = _variables(declared if isinstance(declared, dict) else {})
    resolved = _expand({k: v for k, v in raw.items() if k != "vars"}, variables)
    if unset := _unset_variable(resolved):
        raise ConfigError(f"{path}: {unset[0]}: ${unset[1]} is not set; export it, or give it a default under \"vars\"")
    top = _parse(PipelineFields, {**resolved, "vars": declared}, path)
    resolved["vars"] = {k: variables[k] for k in top.vars}
    if top.runners_dir:
        resolved["runners_dir"] = anchor_path(top.runners_dir, folder)
    return resolved, top


def _envs(path: str, declared: dict, folder: str | None) -> dict[str, EnvSpec]:
    """The ``envs`` section's environments (`EnvFields`) and "default" (this Python), interpreters
    anchored at `folder` (and written back into `declared`)."""
    envs: dict[str, EnvSpec] = {"default": EnvSpec("default", sys.executable, {})}
    for name, spec in declared.items():
        env = _parse(EnvFields, spec, f"{path}: envs.{name}")
        python = anchor_command(env.python, folder)
        if python:
            spec["python"] = python
        envs[name] = EnvSpec(name, python or sys.executable, MappingProxyType({k: str(v) for k, v in env.env.items()}))
    return envs


def _stage(path: str, i: int, sd: dict, taken: set[str], folder: str | None, envs: dict[str, EnvSpec],
           top: PipelineFields, root: Path) -> Stage:
    """Stage entry `sd` (``stages[i]``), its name not one of `taken`; `sd` takes its anchored paths."""
    named = isinstance(sd.get("name"), str)
    where = f"{path}: stage {sd['name']!r}" if named else f"{path}: stages[{i}]"
    common = _parse(StageFields, {k: v for k, v in sd.items() if k in STAGE_KEYS}, where)
    name, kind = common.name, common.kind
    if not is_folder_name(name):
        raise ConfigError(f"{path}: stage name {name!r} (stages[{i}]) must be {FOLDER_NAME_RULE}: "
                          "it names the stage's output folder")
    if name in taken:
        raise ConfigError(f"{path}: stage {name!r} is defined twice")
    if kind in builtin.REGISTRY:
        options = anchor_builtin(kind, checked_builtin_options(sd, where), folder)
        sd.update(options)
        return BuiltinStage(name, kind, _freeze(options), common.default)
    if kind != "model":
        raise ConfigError(f"{where}: kind must be one of model, {', '.join(builtin.kinds())}; got {kind!r}")
    return _model_stage(where, sd, folder, envs, top, root)


def _model_stage(where: str, sd: dict, folder: str | None, envs: dict[str, EnvSpec], top: PipelineFields,
                 root: Path) -> ModelStage:
    """A model stage entry's stage (`ModelStageFields`, unset ones from `top`), checked against its
    family's tool.json under `root`; `sd` takes its variants' anchored paths."""
    entry = _parse(ModelStageFields, sd, where)
    family = entry.family or entry.name
    if entry.env not in envs:
        raise ConfigError(f"{where}: env {entry.env!r} is not declared under envs")
    try:
        spec = load_tool_spec(family, root)
    except ConfigError as exc:  # the runner's side of it; the config file and stage are where to fix it
        raise ConfigError(f"{where}: {exc}") from None
    sd["variants"] = variants = {v: anchor_params(p, spec, folder) if isinstance(p, dict) else p
                                 for v, p in entry.variants.items()}
    params = {v: validate_params(f"{where} variant {v!r}", p, spec) for v, p in variants.items()}
    for v in params:
        if not is_folder_name(v):
            raise ConfigError(f"{where}: variant name {v!r} must be {FOLDER_NAME_RULE}: "
                              "it names the source's output folder")
    inherited = {k: getattr(top, k) if getattr(entry, k) is None else getattr(entry, k)
                 for k in ("device", "allow_cpu_fallback", "max_failed_fraction")}
    return ModelStage(name=entry.name, family=family, env=envs[entry.env], variants=_freeze(params),
                      default=entry.default, volatile=volatile_params(spec),
                      label_map=MappingProxyType(dict(spec["labels"])), revision=spec["revision"],
                      timeout_s=entry.timeout_s, page_timeout_s=entry.page_timeout_s,
                      max_restarts=entry.max_restarts, max_empty_share=entry.max_empty_share, **inherited)


def _check_stage_links(path: str, stages: list[Stage]) -> None:
    """Builtin stages name only sources the model stages make and variants one fusion stage makes."""
    sources = [f"{s.name}/{v}" for s in stages if isinstance(s, ModelStage) for v in s.variants]
    fusions = [s for s in stages if isinstance(s, BuiltinStage) and s.kind == "fusion"]
    if clash := builtin.variant_made_twice([(s.name, to_jsonable(s.options)) for s in fusions]):
        raise ConfigError(f"{path}: {clash}")
    fused = builtin.fused_variant_names(to_jsonable(fusions[0].options)) if fusions else None
    for s in (s for s in stages if isinstance(s, BuiltinStage)):
        # Not checked without model stages (a config of builtin stages works on what an earlier
        # one made), nor variants without a fusion stage (an earlier config's made them).
        options = to_jsonable(s.options)
        if unmatched := ((sources and builtin.unmatched_source(s.kind, options, sources))
                         or (fused is not None and builtin.unmatched_variant(s.kind, options, fused))):
            raise ConfigError(f"{path}: stage {s.name!r}: {unmatched}")


def load_config(path: str | os.PathLike | None) -> PipelineConfig:
    """Load `path`, or the embedded default config when None."""
    p = Path(path) if path else default_config_path()
    # The real file's folder: a linked config means the files beside what it links to, and one
    # spelling of them, since they are fingerprinted into every source page.
    return parse_config(read_config_json(p), str(p), os.path.dirname(os.path.realpath(p)))


def load_run_config(run_dir: Path, path: Path | None) -> PipelineConfig:
    """Load the config a call on `run_dir` runs with (`rundir.config_to_run`): `path`, else the
    run's record, else the embedded default; says so when it is the record."""
    chosen = rundir.config_to_run(run_dir, path)
    config = load_config(chosen)
    if path is None and chosen is not None:
        log.debug("using the config recorded in %s; give --config to run another", run_dir)
    return config


def read_config_json(path: Path) -> Any:
    """A config file's JSON, unchecked (a run's record included); one-line ConfigError naming the file (`parse_document`)."""
    try:
        return parse_document(Path(path).read_bytes())
    except OSError as exc:
        raise ConfigError(f"cannot read config {path}: {exc.strerror or exc}") from None
    except ValueError as exc:
        raise ConfigError(f"config {path}: {exc}") from None


def to_jsonable(value: Any) -> Any:
    """Undo `_freeze` for writing config.resolved.json."""
    if isinstance(value, Mapping):
        return {k: to_jsonable(v) for k, v in value.items()}
    if isinstance(value, tuple):
        return [to_jsonable(v) for v in value]
    return value
