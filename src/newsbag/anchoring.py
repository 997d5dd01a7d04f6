"""Paths written in a file (a pipeline config, a `--manifest` list) taken as their author meant
them: from that file's folder, not from the cwd of whoever runs newsbag."""

from __future__ import annotations

import os

__all__ = ["anchor_path", "anchor_command"]


def anchor_path(value: str, folder: str | None) -> str:
    """A path written in a file (a config, a `--manifest` list) as its author meant it: `~`
    expanded, and one still relative after that (and after `$VAR` expansion) taken from
    `folder`, that file's folder, not from the cwd of whoever runs newsbag. "" (a default) stays ""; a config with no file (None) keeps
    relative paths as written."""
    if not value:
        return value
    expanded = os.path.expanduser(value)
    return expanded if folder is None or os.path.isabs(expanded) else os.path.join(folder, expanded)


def anchor_command(value: str, folder: str | None) -> str:
    """An interpreter: a bare name ("python3") is a command the shell finds on PATH, so it is
    kept; anything with a / is a path (`anchor_path`)."""
    return anchor_path(value, folder) if "/" in value else value
