"""A page's output file: whether it is finished, and the identity newsbag indexes it by."""

from __future__ import annotations

import json
import os
from pathlib import Path


def is_valid_output(path: Path, page_id: str, fingerprint: str | None = None) -> bool:
    """A finished page: parseable JSON for this page id with a regions list, made with
    `fingerprint` (the job's, computed by newsbag; None: any)."""
    try:
        with open(path, encoding="utf-8") as fh:
            page = json.load(fh)
    except (OSError, ValueError):
        return False
    if not (isinstance(page, dict) and page.get("page_id") == page_id and isinstance(page.get("regions"), list)):
        return False
    source = page.get("source")
    return fingerprint is None or (isinstance(source, dict) and source.get("fingerprint") == fingerprint)


def file_identity(path: Path) -> list[int]:
    """[size, mtime_ns] of a file: newsbag's `freshness.file_identity`."""
    st = os.stat(path)
    return [st.st_size, st.st_mtime_ns]
