"""`GtPage`, one page of ground truth as every format reads to, and the checks every reader applies."""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .. import contract
from ..page_repair import repair_regions, repairs_text
from ..labels import coarse_for

__all__ = ["GtPage", "GtError", "gt_page", "check_size", "check_count"]

log = logging.getLogger(__name__)


class GtError(ValueError):
    """One ground-truth file (or COCO image) that cannot be used; the message is one line, without the name."""


@dataclass(frozen=True)
class GtPage:
    """One page of ground truth, in the pixels of the page it was drawn on.

    Attributes:
        name: the ground-truth file, relative to the ground-truth root (a COCO image:
            ``file.json:file_name``); problems are named by it.
        image: the page image the file names, relative to the ground-truth root (normalised
            ``/`` separators, ``..`` where the image lies above it); matched to run pages.
        width, height: the size of the page the regions were drawn on (ALTO mm10/inch1200:
            in those units), > 0.
        xyxy: (N, 4) float64 region boxes (a polygon's bounding box), x right, y down, on the
            page, each at least 1 x 1 (repaired as `page_repair.repair_regions` repairs pages).
        coarse: (N,) str coarse class (`labels.COARSE_CLASSES`) of each region's label.
        raw: (N,) str region type as the file writes it (``TextRegion/heading``,
            ``Illustration/image``, a COCO category name, an nzz label).
        order: (N,) int64 reading-order position (smaller is read first), -1 outside it.
        text: (N,) object: each region's text where the file has it (lines joined by "\\n"), else None.
        lines: (N,) object: each region's lines, [{"bbox_xyxy", "text"}] (empty without lines).
        page_id: the run page id the file names (nzz, newsbag's COCO), else None.
        stem_path: the path compared with run images' paths without extensions when the image
            matches no page (PAGE/ALTO: the file's path without extension and without a tool's
            ``page/`` or ``alto/`` folder; COCO: the image's), None for the nzz format.
    """

    name: str
    image: str
    width: float
    height: float
    xyxy: np.ndarray
    coarse: np.ndarray
    raw: np.ndarray
    order: np.ndarray
    text: np.ndarray
    lines: np.ndarray
    page_id: str | None = None
    stem_path: str | None = None

    def __len__(self) -> int:
        return len(self.xyxy)


def check_size(path: Path) -> None:
    """Refuse a file over `contract.MAX_PAGE_BYTES` before it is read (as a page file is)."""
    size = os.stat(path).st_size
    if size > contract.MAX_PAGE_BYTES:
        raise GtError(f"{size:,} bytes, over the {contract.MAX_PAGE_BYTES:,} a page file may hold")


def check_count(n: int) -> None:
    """Refuse more regions than a page may hold, before they are read (`contract.MAX_REGIONS`)."""
    if n > contract.MAX_REGIONS:
        raise GtError(f"{n:,} regions, over the {contract.MAX_REGIONS:,} a page may hold (the fusion's limit)")


def gt_page(name: str, image: str, width, height, regions: list[dict], *, page_id: str | None = None,
            stem_path: str | None = None, where: Path | None = None) -> GtPage:
    """A `GtPage` of `regions` ([{"bbox_xyxy", "label" (canonical), "raw", "order"?, "text"?,
    "lines"?}]), checked against the fusion's limits before any array or raster is made; boxes
    repaired as `page_repair.repair_regions` repairs a page's, with one warning naming the file
    (`where`, else `name`).

    Raises:
        GtError: a size that is not a positive number; more regions than `contract.MAX_REGIONS`;
            more overlapping pairs than `contract.MAX_OVERLAPPING_PAIRS`.
    """
    from ..sweep import pairs_exceed

    for key, value in (("width", width), ("height", height)):
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not np.isfinite(value) or value <= 0:
            raise GtError(f"page {key} must be a positive number, got {value!r}")
    check_count(len(regions))
    page, repaired = repair_regions({"image": {"width": width, "height": height}, "regions": regions})
    if repaired:
        log.warning("evaluate: ground truth %s: repaired boxes: %s", where or name, repairs_text(repaired))
    kept = page["regions"]
    xyxy = np.array([r["bbox_xyxy"] for r in kept], np.float64).reshape(-1, 4)
    if pairs_exceed(xyxy, contract.MAX_OVERLAPPING_PAIRS):
        raise GtError(f"over {contract.MAX_OVERLAPPING_PAIRS:,} pairs of overlapping regions (the fusion's limit)")
    order = [r.get("order") for r in kept]
    return GtPage(
        name=name, image=image, width=float(width), height=float(height), xyxy=xyxy,
        coarse=np.array([coarse_for(r["label"]) for r in kept], dtype=object).astype(str).reshape(-1),
        raw=np.array([r["raw"] for r in kept], dtype=object).astype(str).reshape(-1),
        order=np.array([-1 if o is None else o for o in order], np.int64).reshape(-1),
        text=_objects([r.get("text") for r in kept]), lines=_objects([r.get("lines") or [] for r in kept]),
        page_id=page_id, stem_path=stem_path)


def _objects(values: list) -> np.ndarray:
    out = np.empty(len(values), dtype=object)
    out[:] = values
    return out
