"""The transcription stage's crop plan as the recognise runners read it (stdlib only)."""

from __future__ import annotations

import json
import os

# What one crop of a plan is: one text line, or one region (or column part) whose lines the
# recogniser finds itself.
UNITS = ("line", "region")


def read_plan(plan_dir: str, page_id: str, width: int, height: int) -> dict:
    """The plan the stage made for a page whose image is `width` x `height`: ``crops``
    ``[[x0, y0, x1, y1], ...]``; ``units``, what each crop is (one of `UNITS`); ``sample``, the
    page's text lines (empty where the crops are those lines), to choose between models on;
    ``crop_lines``, each region crop's lines in ``sample``, to read where its block reads
    poorly.

    Raises:
        ValueError: the image is not the size its layout was made on (crops of a replaced scan
            at its old layout's boxes are other words, or none at all).
    """
    with open(os.path.join(plan_dir, f"{page_id}.json"), encoding="utf-8") as fh:
        plan = json.load(fh)
    if plan["crops"] and [width, height] != plan["size_wh"]:
        raise ValueError(f"the page image is {width}x{height} px but its layout was made on "
                         f"{plan['size_wh'][0]}x{plan['size_wh'][1]} px: the image changed after its layout; "
                         "rerun its layout stages and fusion")
    return plan
