"""Where the runner scripts and shipped configs live (wheel or checkout)."""

from __future__ import annotations

from pathlib import Path

__all__ = ["resource_dir", "runners_dir", "configs_dir", "default_config_path"]

_PKG = Path(__file__).resolve().parent


def resource_dir(name: str) -> Path:
    """`name` folder: inside the installed wheel (``newsbag/_<name>``) or the repo checkout."""
    for candidate in (_PKG / f"_{name}", _PKG.parent.parent / name):
        if candidate.is_dir():
            return candidate
    raise FileNotFoundError(f"newsbag resource folder {name!r} not found next to {_PKG}")


def runners_dir() -> Path:
    return resource_dir("runners")


def configs_dir() -> Path:
    return resource_dir("configs")


def default_config_path() -> Path:
    return configs_dir() / "pipeline.local.json"
