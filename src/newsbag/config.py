"""Pipeline config: load JSON, expand $VARS, anchor relative paths at the file's folder,
validate against runner tool.json, freeze."""

from __future__ import annotations

import functools
import json
import logging
import math
import os
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any, Callable, Literal, Mapping

from . import builtin, freshness, rundir
from .anchoring import anchor_command, anchor_path
from .builtin_entry import anchor_builtin, checked_builtin_options
from .errors import ConfigError, did_you_mean, unknown_keys
from .folder_names import FOLDER_NAME_RULE, is_folder_name
from .jsontext import parse_document
from .resources import default_config_path, runners_dir
from .tool_spec import anchor_params, load_tool_spec, validate_params, volatile_params

__all__ = [
    "EnvSpec",
    "ModelStage",
    "BuiltinStage",
    "PipelineConfig",
    "Device",
    "load_config",
    "load_run_config",
    "parse_config",
    "record_builtin_run",
    "read_config_json",
]

Device = Literal["auto", "gpu", "cpu"]
DEVICES = ("auto", "gpu", "cpu")
# A source stops once more than this share of the pages it computes has failed (OCR-D's
# OCRD_MAX_MISSING_OUTPUTS). 0.5: a run with a few bad pages finishes them all, a member
# that fails on most pages stops early instead of paying a model restart per crash.
DEFAULT_MAX_FAILED_FRACTION = 0.5
# The config format this newsbag reads; a config without "version" is taken as this one.
CONFIG_VERSION = 1
DEFAULT_MAX_EMPTY_SHARE = 0.2
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


def _fraction(where: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= 1:
        raise ConfigError(f"{where} must be a number from 0 to 1, got {value!r}")
    return float(value)


def _typed(where: str, value: Any, kind: type, what: str) -> Any:
    """`value` when it is a `kind`, else one ConfigError line saying what `where` must be."""
    if not isinstance(value, kind):
        raise ConfigError(f"{where} must be {what}, got {json.dumps(value)}")
    return value


def _number(where: str, value: Any, *, whole: bool = False) -> int | float:
    """A timeout (> 0) or, with `whole`, a count (an integer >= 0); JSON's true/false are neither,
    nor is Python's JSON reader's Infinity a limit (NaN fails > 0 already)."""
    ok = (isinstance(value, int) and value >= 0 if whole
          else isinstance(value, (int, float)) and value > 0 and math.isfinite(value))
    if isinstance(value, bool) or not ok:
        raise ConfigError(f"{where} must be {'a whole number >= 0' if whole else 'a finite number > 0'}, got {value!r}")
    return value


def _string(where: str, value: Any) -> str:
    return _typed(where, value, str, "a string")


def _flag(where: str, value: Any) -> bool:
    return _typed(where, value, bool, "true or false")


def _device(where: str, value: Any) -> Device:
    if value not in DEVICES:
        raise ConfigError(f"{where} must be one of {', '.join(DEVICES)}, got {value!r}")
    return value


def _timeout(where: str, value: Any) -> float:
    return float(_number(where, value))


def _count(where: str, value: Any) -> int:
    return _number(where, value, whole=True)


# The plain fields of the config's top level and of a model stage: key -> (check, default). A
# check takes (where, value) and returns the value as the dataclasses hold it; a stage field
# whose default is _INHERIT takes the top level's value of the same key.
_INHERIT = object()
_Fields = dict[str, tuple[Callable[[str, Any], Any], Any]]
_TOP_FIELDS: _Fields = {
    "device": (_device, "auto"),
    "allow_cpu_fallback": (_flag, True),
    "max_failed_fraction": (_fraction, DEFAULT_MAX_FAILED_FRACTION),
}
_MODEL_FIELDS: _Fields = {
    "env": (_string, "default"),
    "device": (_device, _INHERIT),
    "allow_cpu_fallback": (_flag, _INHERIT),
    "timeout_s": (_timeout, 24 * 3600),
    "page_timeout_s": (_timeout, 600),
    "max_restarts": (_count, 3),
    "max_failed_fraction": (_fraction, _INHERIT),
    "max_empty_share": (_fraction, DEFAULT_MAX_EMPTY_SHARE),
}
_TOP_KEYS = {"version", "description", "vars", "envs", "stages", "runners_dir", *_TOP_FIELDS}
_MODEL_STAGE_KEYS = {"name", "family", "variants", "description", "default", *_MODEL_FIELDS}


def _fields(where: str, section: Mapping[str, Any], fields: _Fields, top: Mapping[str, Any] | None = None
            ) -> dict[str, Any]:
    """The `fields` of `section`, each checked as ``"<where>: <key>"``, defaults filled in (an
    _INHERIT one from `top`)."""
    return {key: check(f"{where}: {key}", section.get(key, top[key] if default is _INHERIT else default))
            for key, (check, default) in fields.items()}


def _unknown_keys(where: str, section: Mapping[str, Any], known: set[str]) -> None:
    if problem := unknown_keys(where, section, known):
        raise ConfigError(problem)


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
    resolved = _resolved(raw, path, folder)
    root = Path(resolved["runners_dir"]) if resolved.get("runners_dir") else runners_dir()
    envs = _envs(path, _typed(f"{path}: envs", resolved.get("envs", {}), dict, "an object"), folder)
    top = _fields(path, resolved, _TOP_FIELDS)
    stage_dicts = resolved.get("stages")
    if not isinstance(stage_dicts, list) or not stage_dicts:
        raise ConfigError(f"{path}: stages must be a non-empty list")
    stages: list[Stage] = []
    for i, sd in enumerate(stage_dicts):
        stages.append(_stage(path, i, sd, {s.name for s in stages}, folder, envs, top, root))
    _check_stage_links(path, stages)
    return PipelineConfig(path=path, resolved=_freeze(resolved), stages=tuple(stages), runners_dir=root)


def _resolved(raw: Any, path: str, folder: str | None) -> dict:
    """`raw` with its top-level keys and version checked, `$VAR`s expanded (``vars`` holding the
    values used) and runners_dir anchored at `folder`."""
    if not isinstance(raw, dict):
        raise ConfigError(f"{path}: the config must be a JSON object")
    _unknown_keys(path, raw, _TOP_KEYS)
    version = raw.get("version", CONFIG_VERSION)
    if isinstance(version, bool) or version != CONFIG_VERSION:
        raise ConfigError(f"{path}: version {version!r} is not one this newsbag reads (it reads version "
                          f"{CONFIG_VERSION}); write the config for this newsbag, or run the newsbag it was written for")
    declared = _typed(f"{path}: vars", raw.get("vars", {}), dict, "an object")
    for key, value in declared.items():
        if isinstance(value, bool) or not isinstance(value, (str, int, float)):
            raise ConfigError(f"{path}: vars.{key} must be a string or number, got {json.dumps(value)}")
    variables = _variables(declared)
    resolved = _expand({k: v for k, v in raw.items() if k != "vars"}, variables)
    if unset := _unset_variable(resolved):
        raise ConfigError(f"{path}: {unset[0]}: ${unset[1]} is not set; export it, or give it a default under \"vars\"")
    resolved["vars"] = {k: variables[k] for k in declared}
    if runners := resolved.get("runners_dir"):
        resolved["runners_dir"] = anchor_path(_string(f"{path}: runners_dir", runners), folder)
    return resolved


def _envs(path: str, declared: dict, folder: str | None) -> dict[str, EnvSpec]:
    """The ``envs`` section's environments and "default" (this Python), interpreters anchored at
    `folder` (and written back into `declared`)."""
    envs: dict[str, EnvSpec] = {"default": EnvSpec("default", sys.executable, {})}
    for name, spec in declared.items():
        if not isinstance(spec, dict) or set(spec) - {"python", "env", "description"}:
            raise ConfigError(f"{path}: envs.{name} must be an object with python, env, description")
        python = anchor_command(_string(f"{path}: envs.{name}.python", spec.get("python", "")), folder)
        if python:
            spec["python"] = python
        env_vars = _typed(f"{path}: envs.{name}.env", spec.get("env", {}), dict, "an object")
        envs[name] = EnvSpec(name, python or sys.executable, MappingProxyType({k: str(v) for k, v in env_vars.items()}))
    return envs


def _stage(path: str, i: int, sd: Any, taken: set[str], folder: str | None, envs: dict[str, EnvSpec],
           top: dict[str, Any], root: Path) -> Stage:
    """Stage entry `sd` (``stages[i]``), its name not one of `taken`; `sd` takes its anchored paths."""
    if not isinstance(sd, dict) or not isinstance(sd.get("name"), str):
        raise ConfigError(f"{path}: stages[{i}] must be an object with a name")
    name = sd["name"]
    if not is_folder_name(name):
        raise ConfigError(f"{path}: stage name {name!r} (stages[{i}]) must be {FOLDER_NAME_RULE}: "
                          "it names the stage's output folder")
    if name in taken:
        raise ConfigError(f"{path}: stage {name!r} is defined twice")
    where = f"{path}: stage {name!r}"
    kind = _string(f"{where}: kind", sd.get("kind", "model"))
    run_default = sd.get("default", True)
    if not isinstance(run_default, bool):
        raise ConfigError(f"{where}: default must be true or false (run it when no --stages is given), got {run_default!r}")
    if kind in builtin.REGISTRY:
        options = anchor_builtin(kind, checked_builtin_options(sd, where), folder)
        sd.update(options)
        return BuiltinStage(name, kind, _freeze(options), run_default)
    if kind != "model":
        raise ConfigError(f"{where}: kind must be one of model, {', '.join(builtin.kinds())}; got {kind!r}")
    _unknown_keys(where, {k: v for k, v in sd.items() if k != "kind"}, _MODEL_STAGE_KEYS)
    return _model_stage(where, sd, folder, envs, top, root, run_default)


def _model_stage(where: str, sd: dict, folder: str | None, envs: dict[str, EnvSpec], top: dict[str, Any],
                 root: Path, run_default: bool) -> ModelStage:
    """A model stage entry's stage, checked against its family's tool.json under `root`; `sd`
    takes its variants' anchored paths."""
    name = sd["name"]
    family = _string(f"{where}: family", sd.get("family") or name)
    fields = _fields(where, sd, _MODEL_FIELDS, top)
    env = fields.pop("env")
    if env not in envs:
        raise ConfigError(f"{where}: env {env!r} is not declared under envs")
    variants = sd.get("variants")
    if not isinstance(variants, dict) or not variants:
        raise ConfigError(f"{where}: variants must be a non-empty object")
    try:
        spec = load_tool_spec(family, root)
    except ConfigError as exc:  # the runner's side of it; the config file and stage are where to fix it
        raise ConfigError(f"{where}: {exc}") from None
    sd["variants"] = variants = {v: anchor_params(p, spec, folder) if isinstance(p, dict) else p
                                 for v, p in variants.items()}
    params = {v: validate_params(f"{where} variant {v!r}", p, spec) for v, p in variants.items()}
    for v in params:
        if not is_folder_name(v):
            raise ConfigError(f"{where}: variant name {v!r} must be {FOLDER_NAME_RULE}: "
                              "it names the source's output folder")
    return ModelStage(name=name, family=family, env=envs[env], variants=_freeze(params), default=run_default,
                      volatile=volatile_params(spec), label_map=MappingProxyType(dict(spec["labels"])),
                      revision=spec["revision"], **fields)


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
