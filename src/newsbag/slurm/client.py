"""Slurm's client commands (squeue, sacct, sinfo, scontrol), where a missing or silent one gives no answer."""

from __future__ import annotations

import shutil
import subprocess

__all__ = ["call", "read_stdout"]


def call(cmd: list[str]) -> subprocess.CompletedProcess | None:
    """A Slurm client command's result, or None when it is missing or does not return in time."""
    if shutil.which(cmd[0]) is None:
        return None
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None


def read_stdout(cmd: list[str]) -> str:
    """stdout of a Slurm client command, or "" when it is missing or fails (no accounting, purged ids)."""
    proc = call(cmd)
    return proc.stdout if proc is not None else ""
