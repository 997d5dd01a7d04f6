"""What may name an output folder (a stage, a source, a fused variant): a rule the config checks
without touching the run directory."""

from __future__ import annotations

import re
from typing import Any

__all__ = ["FOLDER_NAME_RULE", "is_folder_name"]

FOLDER_NAME_RULE = "letters, digits, _ . -, starting with a letter or digit"
_FOLDER_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")


def is_folder_name(name: Any) -> bool:
    """Whether `name` (a stage, a source or fused variant) can be its output folder: one path part
    that the run directory's discovery (`rundir.discover_sources`) finds again, not hidden or
    private (`_failed`, `_shared`), and with no glob or comma, so source globs and ``--stages a,b``
    can name it."""
    return isinstance(name, str) and _FOLDER_NAME.fullmatch(name) is not None
