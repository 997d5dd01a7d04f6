"""The pipeline config's own keys, declared as options (`options.option`): the top level, an
``envs`` entry, what every stage entry has and a model stage's. `config` parses each level with
`options.parse`, so a typo anywhere gets the same "did you mean" line, and the manual's tables
are rendered from these declarations. Stdlib only."""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

from .options import REQUIRED, option

__all__ = ["PipelineFields", "EnvFields", "StageFields", "STAGE_KEYS", "ModelStageFields", "CONFIG_VERSION", "DEVICES",
           "DEFAULT_MAX_FAILED_FRACTION", "DEFAULT_MAX_EMPTY_SHARE"]

# The config format this newsbag reads; a config without "version" is taken as this one.
CONFIG_VERSION = 1
DEVICES = ("auto", "gpu", "cpu")
# A source stops once more than this share of the pages it computes has failed (OCR-D's
# OCRD_MAX_MISSING_OUTPUTS). 0.5: a run with a few bad pages finishes them all, a member
# that fails on most pages stops early instead of paying a model restart per crash.
DEFAULT_MAX_FAILED_FRACTION = 0.5
DEFAULT_MAX_EMPTY_SHARE = 0.2

_SHARE = {"minimum": 0, "maximum": 1}
_INHERITED = "null: the top level's"


def _device(default: str | None, doc: str) -> Any:
    return option("string", default, doc, choices=DEVICES, nullable=default is None)


@dataclass(frozen=True, kw_only=True)
class PipelineFields:
    version: int = option("integer", CONFIG_VERSION, f"the config format; this newsbag reads {CONFIG_VERSION}",
                          minimum=1)
    description: str = option("string", "", "what the config is for (prose: no `$VAR` expansion)")
    vars: dict = option("scalars", {}, "`$VAR` defaults; an environment variable of the same name wins")
    envs: dict = option("object", {}, "name → model env (the `envs` entry table); `default` is newsbag's own")
    runners_dir: str = option("string", "", "the folder of the runner scripts and their tool.json; "
                              "\"\": the runners shipped with newsbag (a path, relative to the config file)")
    device: str = _device("auto", "where model stages run: `gpu`, `auto` (GPU when usable) or `cpu`; "
                          "`--device` overrides")
    allow_cpu_fallback: bool = option("boolean", True, "false: a runner exits 5 when the GPU is unusable")
    max_failed_fraction: float = option("number", DEFAULT_MAX_FAILED_FRACTION, "a source stops once more of "
                                        "its pages failed (`--max-failed-fraction`)", **_SHARE)
    stages: tuple = option("objects", REQUIRED, "the stages, in the order they run", min_items=1)


@dataclass(frozen=True)
class EnvFields:
    python: str = option("string", "", "the env's interpreter: \"\": newsbag's own; a bare name such as "
                         "`python3` is looked up on `PATH` (a path, relative to the config file)")
    env: dict = option("object", {}, "extra environment for its runners (`HF_HOME`, `HF_HUB_OFFLINE`, ...)")
    description: str = option("string", "", "what the env holds")


@dataclass(frozen=True, kw_only=True)
class StageFields:
    """The keys of every stage entry; a builtin stage's others are its kind's options."""

    name: str = option("string", REQUIRED, "letters, digits, `_ . -`: the stage's output folder")
    kind: str = option("string", "model", "`model`, or a builtin stage: `fusion`, `review`, `export`, "
                       "`transcription`")
    description: str = option("string", "", "what the stage is for")
    default: bool = option("boolean", True, "false: runs only when named in `--stages`")


# The keys of a builtin stage's entry that are the config's own, not the stage's options: what
# its kind's parser passes over.
STAGE_KEYS = frozenset(f.name for f in fields(StageFields))


@dataclass(frozen=True, kw_only=True)
class ModelStageFields(StageFields):
    family: str = option("string", "", "the runner script, `runners/<family>.py`; \"\": the stage's name")
    env: str = option("string", "default", "which `envs` entry runs it")
    device: str | None = _device(None, f"`gpu`, `auto` or `cpu`; {_INHERITED} `device`")
    allow_cpu_fallback: bool | None = option("boolean", None, "false: a runner exits 5 when the GPU is "
                                             f"unusable; {_INHERITED}", nullable=True)
    timeout_s: float = option("number", 24 * 3600.0, "the whole runner job", unit="s", minimum=0, above=True)
    page_timeout_s: float = option("number", 600.0, "no progress for this long kills the runner; per page, "
                                   "also inside a batch", unit="s", minimum=0, above=True)
    max_restarts: int = option("integer", 3, "restarts in a row that finish no page", minimum=0)
    max_failed_fraction: float | None = option("number", None, "the source stops once more of its pages "
                                               f"failed; {_INHERITED}", nullable=True, **_SHARE)
    max_empty_share: float = option("number", DEFAULT_MAX_EMPTY_SHARE, "above this share of empty pages "
                                    "(answered, nothing parsed) the source is flagged", **_SHARE)
    variants: dict = option("object", REQUIRED, "name → parameters of the family (the runner tables)",
                            min_items=1)
