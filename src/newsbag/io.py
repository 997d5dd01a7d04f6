"""Atomic file writes and JSON page read/write: the only way newsbag puts bytes on disk."""

from __future__ import annotations

import json
import logging
import math
import os
import tempfile
from pathlib import Path
from typing import Any

__all__ = ["atomic_write_bytes", "atomic_write_text", "dumps_strict", "write_json", "read_json", "read_page",
           "append_jsonl"]

log = logging.getLogger(__name__)


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


_FILE_MODE = 0o666 & ~_umask()


def atomic_write_bytes(path: str | os.PathLike, data: bytes) -> None:
    """Write `data` to `path` so readers see the old file or the new one, never a half."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        os.fchmod(fd, _FILE_MODE)  # mkstemp makes 0600; results on shared disks must be group-readable
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise


def atomic_write_text(path: str | os.PathLike, text: str) -> None:
    atomic_write_bytes(path, text.encode("utf-8"))


def _finite(obj: Any) -> Any:
    """`obj` with every NaN or infinite float replaced by None (JSON null)."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: _finite(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_finite(v) for v in obj]
    return obj


def dumps_strict(obj: Any, **kwargs: Any) -> str:
    """JSON text that strict readers accept: NaN and infinities are written as null, never as
    the bare ``NaN``/``Infinity`` tokens Python's json emits by default.

    The common case (nothing to replace) costs one `json.dumps`; only a refused object is walked.
    """
    kwargs.setdefault("ensure_ascii", False)
    try:
        return json.dumps(obj, allow_nan=False, **kwargs)
    except ValueError:
        return json.dumps(_finite(obj), allow_nan=False, **kwargs)


def write_json(path: str | os.PathLike, obj: Any) -> None:
    atomic_write_text(path, dumps_strict(obj, indent=1) + "\n")


def read_json(path: str | os.PathLike) -> Any:
    with open(path, encoding="utf-8") as fh:
        return json.load(fh)


def read_page(path: str | os.PathLike, page_id: str) -> dict:
    """A source or fused page that passes the contract and belongs to `page_id`, with its
    lying boxes repaired (`contract.repair_regions`: every reader gets the same boxes; what
    was repaired is added to the page's ``warnings`` and logged once per read).

    Raises:
        ValueError: one line, ``"<path>: <reason>"`` (missing, not JSON, wrong shape, other page).
    """
    from .contract import repair_regions, validate_source_page

    try:
        page = read_json(path)
        validate_source_page(page)
    except (OSError, ValueError) as exc:
        reason = (str(exc).splitlines() or [type(exc).__name__])[0]
        raise ValueError(f"{path}: {reason}") from None
    if page["page_id"] != page_id:
        raise ValueError(f"{path}: page_id is {page['page_id']!r}, expected {page_id!r}")
    page, repaired = repair_regions(page)
    if repaired:
        log.warning("page %s: %s: repaired boxes: %s", page_id, path,
                    ", ".join(f"{k} {v}" for k, v in sorted(repaired.items())))
    return page


def append_jsonl(path: str | os.PathLike, records: list[dict]) -> None:
    """Append whole lines with one `write` on an O_APPEND fd.

    POSIX keeps each append-mode write contiguous, so two jobs appending to one ledger
    never interleave inside a line (lines are far below the pipe/page sizes involved).
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    data = "".join(dumps_strict(r) + "\n" for r in records).encode("utf-8")
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, data)
    finally:
        os.close(fd)
