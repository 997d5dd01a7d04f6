"""What a reader accepts of a source page's JSON, and the repair of its lying boxes: the contract's
checks on page dicts, applied the same way for every reader (`page_reader.read_page`)."""

from __future__ import annotations

import math
from itertools import chain
from typing import Any

import numpy as np

from .contract import MAX_REGIONS, NUMBER_OR_NULL, Boxes, region_columns, region_corners, region_values

__all__ = ["validate_source_page", "repair_regions", "repairs_text", "repaired_boxes", "warnings_with"]


def validate_source_page(page: Any) -> None:
    """Raise ValueError naming the first thing wrong with a source-page dict.

    Coordinates that are numbers but lie (NaN, inf, null, inverted, off the page, no area) pass here:
    `repair_regions` mends or drops them, so one bad box never costs a whole page.
    """
    if not isinstance(page, dict):
        raise ValueError(f"page must be a JSON object, got {type(page).__name__}")
    for key in ("page_id", "image", "source", "regions"):
        if key not in page:
            raise ValueError(f"missing key {key!r}")
    image = page["image"]
    if not isinstance(image, dict) or not all(k in image for k in ("path", "width", "height")):
        raise ValueError("image must have path, width and height")
    for key in ("width", "height"):
        value = image[key]
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 1:
            raise ValueError(f"image.{key} must be a positive number, got {value!r}")
    if not isinstance(page["source"], dict):
        raise ValueError("source must be an object")
    if not isinstance(page["regions"], list):
        raise ValueError("regions must be a list")
    if len(page["regions"]) > MAX_REGIONS:
        raise ValueError(f"{len(page['regions'])} regions, over the {MAX_REGIONS} a page may hold "
                         "(a runaway detector or a file that is not one page's layout)")
    if _regions_look_valid(page["regions"]):
        return
    for i, region in enumerate(page["regions"]):
        bbox = region.get("bbox_xyxy") if isinstance(region, dict) else None
        if not (isinstance(bbox, list) and len(bbox) == 4
                and all(v is None or (isinstance(v, (int, float)) and not isinstance(v, bool)) for v in bbox)):
            raise ValueError(f"regions[{i}].bbox_xyxy must be 4 numbers, got {bbox!r}")
        if not isinstance(region.get("label"), str):
            raise ValueError(f"regions[{i}].label must be a string")


def _regions_look_valid(regions: list) -> bool:
    """True when every region passes `validate_source_page`'s checks, decided by a few C-level
    passes over the list instead of a Python loop per box and coordinate (22 of 60 ms of
    reading a 6 x 300-box page). False means "look closer": the per-region loop then names
    the first bad region (or accepts what this exact-type test is too strict for)."""
    if not regions:
        return True
    if set(map(type, regions)) != {dict}:
        return False
    bboxes = region_values(regions, "bbox_xyxy")
    if set(map(type, bboxes)) != {list} or set(map(len, bboxes)) != {4}:
        return False
    if not set(map(type, chain.from_iterable(bboxes))) <= NUMBER_OR_NULL:
        return False
    return set(map(type, region_values(regions, "label"))) == {str}


def _bad_scores(scores: list) -> np.ndarray:
    """(N,) bool: scores that are present but not a finite number (None is no score, not bad)."""
    if set(map(type, scores)) <= NUMBER_OR_NULL:
        # None becomes NaN here; only the few non-finite entries are looked at one by one.
        values = np.array(scores, dtype=np.float64)
        bad = ~np.isfinite(values)
        for i in np.flatnonzero(bad).tolist():
            bad[i] = scores[i] is not None
        return bad
    return np.array([s is not None and (isinstance(s, bool) or not isinstance(s, (int, float)) or not math.isfinite(s))
                     for s in scores], dtype=bool)


def _repair_boxes(xyxy: np.ndarray, bad_score: np.ndarray, image: dict
                  ) -> tuple[np.ndarray, np.ndarray, np.ndarray, dict[str, int]]:
    """The repair rules on arrays (see `repair_regions`): (keep (N,) bool, repaired (N, 4) corners,
    changed (N,) bool: corners swapped or clipped, counts of what was done, zeros left out)."""
    width, height = float(image["width"]), float(image["height"])
    finite = np.isfinite(xyxy).all(axis=1)
    fixed = np.where(finite[:, None], xyxy, 0.0)
    inverted = finite & ((fixed[:, 0] > fixed[:, 2]) | (fixed[:, 1] > fixed[:, 3]))
    fixed = np.hstack([np.minimum(fixed[:, :2], fixed[:, 2:]), np.maximum(fixed[:, :2], fixed[:, 2:])])
    clipped_xyxy = np.clip(fixed, 0.0, [width, height, width, height])
    clipped = finite & (clipped_xyxy != fixed).any(axis=1)
    size_wh = clipped_xyxy[:, 2:] - clipped_xyxy[:, :2]
    thin = finite & (size_wh < 1.0).any(axis=1)
    outside = clipped & (size_wh <= 0.0).any(axis=1)
    counts = {
        "non_finite_box": int((~finite).sum()),
        "inverted_box": int(inverted.sum()),
        "clipped_box": int((clipped & ~thin).sum()),
        "outside_page_box": int(outside.sum()),
        "degenerate_box": int((thin & ~outside).sum()),
        "non_finite_score": int(bad_score.sum()),
    }
    return finite & ~thin, clipped_xyxy, inverted | clipped, {k: v for k, v in counts.items() if v}


def repair_regions(page: dict) -> tuple[dict, dict[str, int]]:
    """The page with its lying boxes mended or dropped, and what was done (counts).

    The one place every reader's boxes are repaired (via `page_reader.read_page`):
    a coordinate that is NaN, infinite or null drops the box (``non_finite_box``); inverted
    corners are swapped (``inverted_box``); boxes reaching off the page are clipped to it
    (``clipped_box``) and dropped when nothing is left (``outside_page_box``); a box less
    than a pixel wide or high, on the page or once clipped, is dropped (``degenerate_box``:
    no area to fuse, count or export; the runners' `_regions.clean_regions` drops the same, but
    a foreign runner's page comes only through here); a score that is not a finite number
    becomes null (``non_finite_score``). The counts are added to the page's ``warnings``.
    The input is not changed; an unchanged page is returned as is.

    Args:
        page: a page that passed `validate_source_page`.

    Returns:
        (page, counts): counts is empty when nothing needed repair.

    >>> repair_regions({"image": {"width": 10, "height": 10}, "regions": []})[1]
    {}
    """
    regions = page["regions"]
    n = len(regions)
    if n == 0:
        return page, {}
    xyxy = region_corners(regions)   # null -> NaN
    bad_score = _bad_scores(region_values(regions, "score"))
    keep, clipped_xyxy, changed, counts = _repair_boxes(xyxy, bad_score, page["image"])
    if not counts:
        return page, {}
    out = list(regions)
    for i in np.flatnonzero(keep & (changed | bad_score)).tolist():   # the few repaired ones only
        region = out[i] = dict(regions[i])
        if changed[i]:
            region["bbox_xyxy"] = clipped_xyxy[i].tolist()
        if bad_score[i]:
            region["score"] = None
    if not keep.all():
        out = [out[i] for i in np.flatnonzero(keep).tolist()]
    return {**page, "regions": out, "warnings": warnings_with(page, counts)}, counts


def repairs_text(counts: dict[str, int]) -> str:
    """`repair_regions` counts as a log line's tail: "clipped_box 1, degenerate_box 2"."""
    return ", ".join(f"{k} {v}" for k, v in sorted(counts.items()))


def warnings_with(page: dict, counts: dict[str, int]) -> dict:
    """The page's ``warnings`` (a dict, else none) with `counts` added to them."""
    warnings = dict(page.get("warnings") or {}) if isinstance(page.get("warnings"), dict) else {}
    for key, value in counts.items():
        warnings[key] = int(warnings.get(key, 0) or 0) + value
    return warnings


def repaired_boxes(page: dict, source: str, extra: dict[str, Any] | None = None) -> tuple[Boxes, dict[str, int]]:
    """``boxes_from_page(repair_regions(page)[0], source)`` in one pass over the regions: the
    same boxes by the same rules, without rebuilding region dicts (the fusion stage reads
    every source page twice; this is half its reading time).

    Args:
        page: a page that passed `validate_source_page`.
        source: the ``source`` column; extra: constant columns to add (name -> value).

    Returns:
        (boxes, counts of what was repaired, as `repair_regions` gives them).
    """
    regions = page["regions"]
    xyxy = region_corners(regions)
    scores = region_values(regions, "score")
    bad_score = _bad_scores(scores)
    keep, fixed, _, counts = _repair_boxes(xyxy, bad_score, page["image"])
    if counts:
        xyxy = fixed
        if bad_score.any():
            scores = [None if b else v for v, b in zip(scores, bad_score.tolist())]
        if not keep.all():
            kept = np.flatnonzero(keep).tolist()
            regions, scores, xyxy = [regions[i] for i in kept], [scores[i] for i in kept], xyxy[keep]
    columns = region_columns(page, source, regions, xyxy, scores)
    columns["data"].update({k: np.full(len(regions), v, object) for k, v in (extra or {}).items()})
    return Boxes(**columns), counts
