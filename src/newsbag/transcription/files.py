"""A transcript folder's files and when they are whole: each page's ``.json`` (the record) and ``.txt``
(its text), and the variant's ``transcripts.jsonl`` (every page's articles, the search index).

The record says whether a transcript is current (its fingerprint); the ``.txt`` and the index are
made from the records alone, so one lost or cut short is written again from them, without
reading any page again.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any, Iterable

from .. import freshness, rundir
from ..errors import first_line
from ..io import atomic_text_file, atomic_write_text, read_json, read_json_object, write_json
from ..manifest import members
from ..revisions import why_stale

__all__ = ["INDEX", "why_stale_record", "text_holds", "write_transcript", "restore_text",
           "drop_transcript", "write_search_index", "index_is_current"]

log = logging.getLogger(__name__)

INDEX = "transcripts.jsonl"
TEXT_LOST = "its .txt is missing or cut short"


def why_stale_record(path: Path) -> str:
    """Why a transcript found not current is stale: the assembly code revision it records, else what changed."""
    record = read_json_object(path)
    if record is None:
        return "its transcript file is unreadable"
    return why_stale("transcription", record.get("revision")) or "its fused page, lines or recogniser changed"


def _text_bytes(record: dict) -> bytes | None:
    text = record.get("text")
    return (text + "\n").encode("utf-8") if isinstance(text, str) else None


def text_holds(out_dir: Path, page_id: str, record: dict | None) -> bool:
    """Whether the page's ``.txt`` has the size of its `record`'s text (one stat): a deleted or
    cut ``.txt`` has not."""
    want = None if record is None else _text_bytes(record)
    now = freshness.file_identity(Path(out_dir) / f"{page_id}.txt")
    return want is not None and now is not None and now[0] == len(want)


def write_transcript(out_dir: Path, page_id: str, record: dict) -> None:
    """Write a page's ``.txt`` and ``.json``; a transcript read again the same (``--force``) is left
    as it is: export checks it by identity."""
    atomic_write_text(Path(out_dir) / f"{page_id}.txt", record["text"] + "\n", keep_same=True)
    write_json(Path(out_dir) / f"{page_id}.json", record, keep_same=True)


def restore_text(out_dir: Path, page_id: str, record: dict | None) -> bool:
    """Write the ``.txt`` of a current transcript `record` again when it is lost or cut short
    (`text_holds`); whether it did."""
    if record is None or text_holds(out_dir, page_id, record) or (text := _text_bytes(record)) is None:
        return False
    atomic_write_text(Path(out_dir) / f"{page_id}.txt", text.decode("utf-8"))
    log.info("transcription: page %s: %s; written again from its .json", page_id, TEXT_LOST)
    return True


def drop_transcript(out_dir: Path, page_id: str) -> bool:
    """Remove a page's transcript files; whether it had one (the search index then changes)."""
    had = (Path(out_dir) / f"{page_id}.json").exists()
    for suffix in (".json", ".txt"):
        (Path(out_dir) / f"{page_id}{suffix}").unlink(missing_ok=True)
    return had


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
    as the transcripts are read (over 100k pages it is GBs of text); then its size, recorded for
    `index_is_current`.

    Returns:
        the number of articles, and a failure record for each transcript file that cannot be
        read (left out: one bad file must not keep every other page's text out of the index).
    """
    out_dir = rundir.transcript_dir(run_dir, variant)
    n, left_out = 0, []
    with atomic_text_file(out_dir / INDEX) as fh:
        for page_id in members(run_dir, []):
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
    write_json(rundir.index_record_path(run_dir, "transcription", variant), freshness.file_sizes(out_dir, [INDEX]))
    return n, left_out


def index_is_current(run_dir: Path, variant: str, page_ids: Iterable[str]) -> bool:
    """Whether transcripts.jsonl has the size it was written with and is newer than the
    transcript of each of `page_ids` (the manifest's, as the caller read it; stat calls only).

    A call killed after writing its transcripts, before or while it rebuilt the index (minutes
    over 100k pages), leaves an older index; an interrupted copy leaves one cut short: the rerun
    finds every page current and must still rebuild it. An index without a recorded size (made
    before sizes were) is rebuilt once.
    """
    out_dir = rundir.transcript_dir(run_dir, variant)
    index = freshness.file_identity(out_dir / INDEX)
    recorded: Any = read_json_object(rundir.index_record_path(run_dir, "transcription", variant))
    if index is None or not recorded or not freshness.sizes_hold(out_dir, recorded):
        return False
    for page_id in page_ids:
        page = freshness.file_identity(out_dir / f"{page_id}.json")
        if page is not None and page[1] > index[1]:
            return False
    return True
