"""One page's regions as the writers need them: integer pixel boxes, class, score, order, support, members."""

from __future__ import annotations

import math
import operator
from dataclasses import dataclass

from ..labels import CANONICAL

__all__ = ["ExportInfo", "ExportLine", "ExportRegion", "page_regions", "reading_order", "region_id", "compact_members",
           "transcript_fits"]


@dataclass(frozen=True)
class ExportInfo:
    """Provenance every exported file carries.

    `layer` is ``fusion/<variant>`` or ``sources/<stage>/<variant>``; `method` the fusion
    method or the source family; `created` an ISO-8601 UTC time (the input page's mtime, so
    a rerun on the same input writes the same bytes); `fingerprint` is `freshness.fingerprint` of
    the input file's identity, the format and its writer's revision, the layer and the tool
    version (a rerun skips a file whose recorded fingerprint matches).
    """

    layer: str
    method: str
    tool: str
    created: str
    fingerprint: str
    image_filename: str


@dataclass(frozen=True)
class ExportWord:
    """A recognised word of a line: integer pixel box, text, confidence."""

    xyxy: tuple[int, int, int, int]
    text: str
    score: float | None


@dataclass(frozen=True)
class ExportLine:
    """A recognised text line of a region (from the transcription stage): integer pixel box, text,
    score, and its words where the recogniser boxed them (Tesseract; PP-OCR reads whole lines)."""

    xyxy: tuple[int, int, int, int]
    text: str
    score: float | None
    words: tuple[ExportWord, ...] = ()


@dataclass(frozen=True)
class ExportRegion:
    """A region ready for a writer.

    `xyxy` are integer pixels of the original page image that cover the region's box, clipped
    to the page (x right, y down); `score` is None when the model gave none; `order` is the
    reading-order index or None; `support` the sources that agree and `members` the fused
    source boxes (fused layers only, empty for a source layer).
    """

    id: str
    xyxy: tuple[int, int, int, int]
    cls: str
    raw_label: str
    score: float | None
    order: int | None
    text: str | None
    support: tuple[str, ...]
    members: tuple[dict, ...]
    lines: tuple[ExportLine, ...] = ()


def region_id(index: int) -> str:
    """XML id of the region at `index` in the page's region list (an NCName: starts with a letter)."""
    return f"r{index:04d}"


def _clip(value: int, high: int) -> int:
    return min(max(value, 0), high)


def _box(xyxy, width: int, height: int) -> tuple[int, int, int, int]:
    """The integer box that covers `xyxy` (start floored, end ceiled), clipped to the page.

    Covering, not rounding: round-half-even took a 1 px box from 1.5 to 2.5 to [2, 2], a
    zero-width region; a covering box keeps every box of positive size at >= 1 px and cuts
    off none of what the model boxed.
    """
    x0, y0, x1, y1 = xyxy
    return (_clip(math.floor(min(x0, x1)), width), _clip(math.floor(min(y0, y1)), height),
            _clip(math.ceil(max(x0, x1)), width), _clip(math.ceil(max(y0, y1)), height))


def _transcribed(transcript: dict | None, width: int, height: int) -> dict[int, tuple[str, tuple[ExportLine, ...]]]:
    """Region index -> (region text, its lines) from a transcript record (`newsbag.transcription`).

    A region read as column parts (one transcript entry per part) gets its parts' text and
    lines in reading order.
    """
    out: dict[int, tuple[str, tuple[ExportLine, ...]]] = {}
    for r in (transcript or {}).get("regions", []):
        lines = tuple(ExportLine(_box(ln["bbox_xyxy"], width, height), ln["text"], ln.get("score"),
                                 tuple(ExportWord(_box(w["bbox_xyxy"], width, height), w["text"], w.get("score"))
                                       for w in ln.get("words", []) if w.get("text")))
                      for ln in r.get("lines", []) if ln.get("text"))
        text, before = out.get(int(r["region"]), ("", ()))
        out[int(r["region"])] = ("\n".join(t for t in (text, r.get("text") or "") if t), before + lines)
    return out


def transcript_fits(page: dict, transcript: dict) -> bool:
    """Whether `transcript` was read from this layout: each entry names one of the page's
    regions and its box lies in that region's box (a column part's box is rounded to 0.01).

    A transcript numbers the regions of the fused page it was read from; once fusion has
    rerun, those numbers name other regions, and its text would land on them.
    """
    regions = page["regions"]
    for r in transcript.get("regions", []):
        i, box = operator.index(r["region"]), r.get("bbox_xyxy")   # a garbled entry raises (TypeError)
        if not 0 <= i < len(regions) or not isinstance(box, list) or len(box) != 4:
            return False
        x0, y0, x1, y1 = regions[i]["bbox_xyxy"]
        if not (box[0] >= x0 - 0.01 and box[1] >= y0 - 0.01 and box[2] <= x1 + 0.01 and box[3] <= y1 + 0.01):
            return False
    return True


def page_regions(page: dict, transcript: dict | None = None) -> list[ExportRegion]:
    """Regions of a page dict that passed `page_reader.read_page`, in stored order.

    Support and members are read here and nowhere else in the exporters, so a change of the
    fused page layout (e.g. members stored once per page) stays in this function. With the
    page's `transcript`, text regions carry their recognised lines and text.
    """
    width, height = int(page["image"]["width"]), int(page["image"]["height"])
    read = _transcribed(transcript, width, height)
    out = []
    for i, r in enumerate(page["regions"]):
        x0, y0, x1, y1 = r["bbox_xyxy"]
        cls = r.get("class") if r.get("class") in CANONICAL else "unknown"
        score = r.get("score")
        if score is not None and (not isinstance(score, (int, float)) or math.isnan(score)):
            score = None
        order = r.get("order")
        text, lines = read.get(i, (r.get("text"), ()))
        out.append(ExportRegion(
            id=region_id(i),
            xyxy=_box((x0, y0, x1, y1), width, height),
            cls=cls, raw_label=str(r.get("label", cls)),
            score=None if score is None else float(score),
            order=order if isinstance(order, int) and not isinstance(order, bool) else None,
            text=text if isinstance(text, str) and text else None,
            support=tuple(str(s) for s in r.get("support") or ()),
            members=tuple(m for m in r.get("members") or () if isinstance(m, dict)),
            lines=lines,
        ))
    return out


def reading_order(regions: list[ExportRegion]) -> list[ExportRegion]:
    """Regions that have a reading-order index, sorted by it (ties keep stored order)."""
    return sorted((r for r in regions if r.order is not None), key=lambda r: r.order)


def compact_members(region: ExportRegion) -> list[dict]:
    """Members as small JSON records: source, raw label, score, integer box."""
    out = []
    for m in region.members:
        box = m.get("bbox_xyxy") or []
        out.append({"source": m.get("source"), "label": m.get("label"), "score": m.get("score"),
                    "bbox_xyxy": [int(round(v)) for v in box]})
    return out
