"""Reading page JSON files as every reader gets them: checked against the contract, from the
page they belong to, their lying boxes repaired (`page_repair`) and a fused page's members resolved."""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any

from .errors import first_line
from .io import read_json, size_text

__all__ = ["read_page", "read_source_boxes", "read_valid_page"]

log = logging.getLogger(__name__)


def read_source_boxes(path: str | os.PathLike, page_id: str, source: str) -> tuple[Any, dict]:
    """A source page's boxes as `read_page` + `contract.boxes_from_page` give them (the same
    contract, repairs and log line), in one pass over its regions: fusion's hot path.

    Returns:
        (`contract.Boxes` with a ``source`` column (`source`) and a ``family`` column (the
        page's ``source.family``, else the stage part of `source`), the page without its
        regions, with the repairs added to its ``warnings``).

    Raises:
        ValueError: as `read_page`.
    """
    from .page_repair import repaired_boxes, warnings_with

    page = read_valid_page(path, page_id)
    family = page["source"].get("family") or source.split("/")[0]
    boxes, repaired = repaired_boxes(page, source, {"family": family})
    _refuse_piles(path, boxes.xyxy)
    header = {k: v for k, v in page.items() if k != "regions"}
    if repaired:
        _log_repairs(page_id, path, repaired)
        header["warnings"] = warnings_with(page, repaired)
    return boxes, header


def read_valid_page(path: str | os.PathLike, page_id: str) -> dict:
    """The page at `path` when it passes the contract and belongs to `page_id`, as written: not
    repaired, nothing logged. For a freshness check, which wants its fingerprint only (`read_page`
    for its boxes). Its size is checked before it is read: a file of gigabytes would be read and
    parsed whole.

    Raises:
        ValueError: as `read_page`.
    """
    from . import contract
    from .page_repair import validate_source_page

    try:
        size = os.stat(path).st_size
        if size > contract.MAX_PAGE_BYTES:
            raise ValueError(f"{size_text(size)}, over the {size_text(contract.MAX_PAGE_BYTES)} a page file may hold")
        page = read_json(path)
        validate_source_page(page)
    except (OSError, ValueError) as exc:
        reason = first_line(exc)
        raise ValueError(f"{path}: {reason}") from None
    if page["page_id"] != page_id:
        raise ValueError(f"{path}: page_id is {page['page_id']!r}, expected {page_id!r}")
    return page


def _refuse_piles(path: str | os.PathLike, xyxy) -> None:
    """Raise ValueError when a page's (repaired) boxes overlap in more pairs than any layout:
    every reader that pairs them up (fusion, review, evaluation) needs memory for each pair,
    and 30,000 boxes piled on one spot (3 MB) are 450 million pairs, > 6 GB."""
    from .contract import MAX_OVERLAPPING_PAIRS
    from .sweep import pairs_exceed

    if pairs_exceed(xyxy, MAX_OVERLAPPING_PAIRS):
        raise ValueError(f"{path}: over {MAX_OVERLAPPING_PAIRS:,} pairs of overlapping boxes "
                         "(boxes piled on one another: a runaway detector, or not one page's layout)")


def _log_repairs(page_id: str, path, repaired: dict[str, int]) -> None:
    from .page_repair import repairs_text

    log.warning("page %s: %s: repaired boxes: %s", page_id, path, repairs_text(repaired))


def read_page(path: str | os.PathLike, page_id: str, *, members: bool = True) -> dict:
    """A source or fused page that passes the contract and belongs to `page_id`, with its
    lying boxes repaired (`page_repair.repair_regions`: every reader gets the same boxes; what
    was repaired is added to the page's ``warnings`` and logged once per read).

    A fused page stores its regions' ``members`` as indices into the page's member table,
    written once per page for all variants (``source.members_file``, relative to the page's
    folder). With ``members`` (the default) they are resolved here into the member dicts,
    so every reader sees the shape of docs/design.md, Contracts; ``members=False`` leaves the indices.

    Raises:
        ValueError: one line, ``"<path>: <reason>"`` (missing, not JSON, wrong shape, other page,
            boxes piled up: `_refuse_piles`).
    """
    from .contract import region_corners
    from .page_repair import repair_regions

    page, repaired = repair_regions(read_valid_page(path, page_id))
    _refuse_piles(path, region_corners(page["regions"]))
    if repaired:
        _log_repairs(page_id, path, repaired)
    ref = page["source"].get("members_file") if isinstance(page["source"], dict) else None
    if members and ref:
        _resolve_members(page, Path(path).parent / ref, path)
    return page


def _resolve_members(page: dict, table_path: Path, path) -> None:
    """Replace each region's member indices by the records of the page's member table, and
    its support indices by the table's source names.

    The indices hold only in the table fused with the page: both record the source pages'
    identities (``inputs``). Fusion writes the table before the variant pages, so a fusion
    interrupted in between (or running while this reads) leaves older pages beside a newer
    table, whose members they would take for theirs.
    """
    from .contract import member_table_records

    try:
        table = read_json(table_path)
        if table.get("inputs") != page["source"].get("inputs"):
            raise ValueError("made from other source pages than this page (a fusion interrupted, or "
                             "running, between them); rerun newsbag fuse")
        sources = table["sources"]
        for region in page["regions"]:
            region["members"] = member_table_records(table, region.get("members", []))
            region["support"] = [sources[k] for k in region.get("support", [])]
    except (OSError, ValueError, KeyError, TypeError, IndexError) as exc:
        reason = first_line(exc)
        raise ValueError(f"{path}: member table {table_path.name}: {type(exc).__name__}: {reason}") from None
