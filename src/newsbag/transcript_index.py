"""The transcripts' run-level search index, transcripts.jsonl: one line per article of every transcribed page."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Iterable

from . import freshness, rundir
from .errors import first_line
from .io import atomic_text_file, read_json

__all__ = ["write_search_index", "index_is_current"]


def _articles(path: Path) -> list[dict]:
    """The articles of a transcript file.

    Raises:
        OSError; ValueError: not JSON, or no transcript (no list of articles with text).
    """
    record = read_json(path)
    arts = record.get("articles") if isinstance(record, dict) else None
    if not isinstance(arts, list) or not all(isinstance(a, dict) and isinstance(a.get("text"), str) for a in arts):
        raise ValueError("not a transcript (no list of articles with text)")
    return arts


def write_search_index(run_dir: Path, variant: str) -> tuple[int, list[dict]]:
    """transcripts.jsonl: one line per article of every transcribed page of the manifest, written
    as the transcripts are read (over 100k pages it is GBs of text).

    Returns:
        the number of articles, and a failure record for each transcript file that cannot be
        read (left out: one bad file must not keep every other page's text out of the index).
    """
    out_dir = rundir.transcript_dir(run_dir, variant)
    n, left_out = 0, []
    with atomic_text_file(out_dir / "transcripts.jsonl") as fh:
        for page_id in rundir.members(run_dir, []):
            path = out_dir / f"{page_id}.json"
            if not path.exists():
                continue
            try:
                arts = _articles(path)
            except (OSError, ValueError) as exc:
                left_out.append({"page_id": page_id, "error": f"page {page_id}: {path}: {first_line(exc)}; left out "
                                                              "of transcripts.jsonl until newsbag transcribe reads it again"})
                continue
            for art in arts:
                if art["text"]:
                    fh.write(json.dumps({"page_id": page_id, "variant": variant, **art}, ensure_ascii=False) + "\n")
                    n += 1
    return n, left_out


def index_is_current(out_dir: Path, page_ids: Iterable[str]) -> bool:
    """Whether transcripts.jsonl is newer than the transcript of each of `page_ids` (the
    manifest's, as the caller read it; stat calls only).

    A call killed after writing its transcripts, before or while it rebuilt the index (minutes
    over 100k pages), leaves an older index; its rerun finds every page current and must
    still rebuild it.
    """
    index = freshness.file_identity(out_dir / "transcripts.jsonl")
    if index is None:
        return False
    for page_id in page_ids:
        page = freshness.file_identity(out_dir / f"{page_id}.json")
        if page is not None and page[1] > index[1]:
            return False
    return True
