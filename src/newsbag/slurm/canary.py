"""The canary run dir: a run's first page alone, for a short submit before the real one."""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path

from ..errors import InputError
from ..pages import read_pages, write_pages

__all__ = ["make_canary"]


def make_canary(run_dir: Path) -> Path:
    """RUN/canary: a run dir whose manifest is the first page of RUN's, for a short canary submit.

    The page keeps its id and image; its `path` is rewritten relative to the canary dir.
    """
    pages = read_pages(run_dir)
    if not pages:
        raise InputError(f"{run_dir} has no pages in manifests/pages.jsonl; build the manifest first")
    canary = Path(run_dir) / "canary"
    first = pages[0]
    path = os.path.relpath((Path(run_dir) / first.path).resolve(), canary.resolve()) if not os.path.isabs(first.path) \
        else first.path
    canary.mkdir(parents=True, exist_ok=True)
    write_pages(canary, [replace(first, path=path)])
    return canary
