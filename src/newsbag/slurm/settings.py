"""What a submission remembers (RUN/slurm/submit.json), so a resubmit with only --run-dir does the same thing."""

from __future__ import annotations

from pathlib import Path
from typing import Mapping

from .. import rundir
from ..errors import ConfigError, InputError
from ..io import read_json, write_json
from .jobs import stage_set

__all__ = ["SETTINGS_FILE", "SETTING_KEYS", "save_settings", "load_settings", "reused_settings", "selected_stage_names"]


SETTINGS_FILE = Path("slurm") / "submit.json"
SETTING_KEYS = (
    "NEWSBAG_CONFIG", "GPU_MODE", "STAGES", "SHARDS", "SPLIT_H200_STAGES", "NEWSBAG_ALLOW_PARTIAL",
    "NEWSBAG_PY", "BASE", "ACCOUNT",
    *(f"{p}_{k}" for p in ("L40S", "H200", "CPU") for k in ("PARTITION", "MEM", "TIME", "CPUS", "EXTRA")),
    "L40S_GRES", "H200_GRES",
)


def save_settings(run_dir: Path, settings: Mapping[str, str]) -> Path:
    """Write RUN/slurm/submit.json: the settings of the first submission (config path, stage split, resources, flags)."""
    unknown = sorted(set(settings) - set(SETTING_KEYS))
    if unknown:
        raise ConfigError(f"unknown submit setting(s) {', '.join(unknown)} (known: {', '.join(SETTING_KEYS)})")
    bad = [k for k, v in settings.items() if "\n" in str(v) or "\t" in str(v)]
    if bad:
        raise ConfigError(f"submit setting(s) {', '.join(bad)} contain a tab or newline")
    path = Path(run_dir) / SETTINGS_FILE
    write_json(path, {k: str(settings[k]) for k in SETTING_KEYS if k in settings})
    return path


def load_settings(run_dir: Path) -> dict[str, str]:
    """The recorded submit settings ({} for a run never submitted through the scripts)."""
    path = Path(run_dir) / SETTINGS_FILE
    if not path.is_file():
        return {}
    try:
        data = read_json(path)
    except (OSError, ValueError) as exc:
        raise InputError(f"{path} is unreadable ({exc}); delete it to submit with fresh settings") from None
    return {k: str(v) for k, v in data.items() if k in SETTING_KEYS and "\n" not in str(v) and "\t" not in str(v)}


def reused_settings(run_dir: Path) -> dict[str, str]:
    """What a submit into `run_dir` reuses where it is given nothing: the settings of its first
    submit (`load_settings`); for a run made without the scripts (`newsbag run --config F`),
    the config it recorded, which `newsbag run` without --config would use too
    (`rundir.config_to_run`), not the Torch default that would replace it."""
    settings = load_settings(run_dir)
    recorded = rundir.config_to_run(run_dir, None)
    if "NEWSBAG_CONFIG" not in settings and recorded is not None:
        settings["NEWSBAG_CONFIG"] = str(recorded)
    return settings


def selected_stage_names(run_dir: Path) -> set[str] | None:
    """Stages the Slurm submission of `run_dir` selected; None when it selected all (or was not submitted)."""
    return stage_set(load_settings(run_dir).get("STAGES")) or None
