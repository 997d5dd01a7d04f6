"""A detector's regions made into the page contract's, and the reason a page has none."""

from __future__ import annotations

import math


class NoRegions(list):
    """What ``detect`` returns when the model answered but nothing usable came back.

    An empty list that carries the reason (for example the first characters of an answer
    that did not parse), so the page is reported ``empty`` with that reason, not ``ok``.
    """

    def __init__(self, reason: str):
        super().__init__()
        self.reason = reason


def clean_regions(regions, width: int, height: int, label_map: dict) -> tuple[list[dict], dict]:
    """Swap inverted corners, clip boxes to the page, drop degenerate ones, add the canonical class.

    Returns the regions and a warning counter (aggregated per page, never per box).
    """
    out, warnings = [], {}
    append, isfinite, lookup = out.append, math.isfinite, label_map.get
    for region in regions:
        x0, y0, x1, y1 = region["bbox_xyxy"]
        x0, y0, x1, y1 = float(x0), float(y0), float(x1), float(y1)
        if not (isfinite(x0) and isfinite(y0) and isfinite(x1) and isfinite(y1)):
            warnings["non_finite_box"] = warnings.get("non_finite_box", 0) + 1
            continue
        if x0 > x1 or y0 > y1:
            warnings["inverted_box"] = warnings.get("inverted_box", 0) + 1
            x0, x1, y0, y1 = min(x0, x1), max(x0, x1), min(y0, y1), max(y0, y1)
        # The common case (inside the page) skips the clip; min/max keep the int page edge
        # where a box is clipped, as before.
        if 0.0 <= x0 and 0.0 <= y0 and x1 <= width and y1 <= height:
            cx0, cy0, cx1, cy1 = x0, y0, x1, y1
        else:
            cx0, cy0 = min(max(x0, 0.0), width), min(max(y0, 0.0), height)
            cx1, cy1 = min(max(x1, 0.0), width), min(max(y1, 0.0), height)
            if (cx0, cy0, cx1, cy1) != (x0, y0, x1, y1):
                warnings["clipped_box"] = warnings.get("clipped_box", 0) + 1
        # Tested as written (2 decimals): a box 1.001 wide that rounds to 0.99 would pass here
        # and be dropped by the reader's repair (`contract.repair_regions`, the same 1-px rule).
        cx0, cy0, cx1, cy1 = round(cx0, 2), round(cy0, 2), round(cx1, 2), round(cy1, 2)
        if cx1 - cx0 < 1 or cy1 - cy0 < 1:
            warnings["degenerate_box"] = warnings.get("degenerate_box", 0) + 1
            continue
        raw = str(region["label"])
        canonical = lookup(raw)
        if canonical is None:
            warnings[f"unknown_label:{raw}"] = warnings.get(f"unknown_label:{raw}", 0) + 1
            canonical = "unknown"
        score = region.get("score")
        order = region.get("order")
        append({
            "bbox_xyxy": [cx0, cy0, cx1, cy1],
            "label": raw,
            "class": canonical,
            "score": None if score is None else round(float(score), 5),
            "order": None if order is None else int(order),
            "text": region.get("text"),
        })
        # A recogniser's word boxes and the model that read the line (recognize_tesseract) go to the transcript.
        for key in _TEXT_KEYS:
            if key in region:
                out[-1][key] = region[key]
    return out, warnings


# A tuple, not a set: the page's keys come in this order on every run, so a page read again
# the same is the same bytes (a set's order changes with the process's hash seed).
_TEXT_KEYS = ("words", "model")


def empty_reason(raw, regions: list, warnings: dict) -> str | None:
    """Why a page has no regions, or None when it has some."""
    if regions:
        return None
    reason = getattr(raw, "reason", None)
    if reason:
        return str(reason)[:300]
    if raw:
        dropped = ", ".join(f"{k} {v}" for k, v in sorted(warnings.items()))
        return f"all {len(raw)} regions the model returned were dropped ({dropped})"
    return "the model returned no regions"
