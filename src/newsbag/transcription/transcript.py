"""Transcript geometry (pure): which crops (regions or their lines) a page is read from, in what
order, and how the recognised lines come back together as region, article and page text."""

from __future__ import annotations

import re

import numpy as np

from ..fusion.geometry import area, cross_pairs
from ..fusion.order import reading_order_parts

__all__ = ["column_pieces", "inside_larger", "line_crops", "line_rows", "plan_page", "join_hyphens", "assemble", "take_block_text"]

# A word broken at a line end: a letter, then a hyphen as printed or transcribed (Fraktur's
# double hyphen read as "=", "⸗" or "¬"); the next line goes on with a letter.
_BROKEN = re.compile(r"(?<=[^\W\d_])[-¬⸗=]$")
_GOES_ON = re.compile(r"[^\W\d_]\S*")


def line_crops(region_xyxy: np.ndarray, line_xyxy: np.ndarray, min_cover: float = 0.5
               ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Cut every text line to the regions that hold it.

    A line belongs to a region holding at least `min_cover` of its height and half of
    min(its height, its width) in width, and at least 1 px of each. Its main crop is the region it overlaps most; it
    is read again in another region only side by side with the main crop (a line the
    detector ran across a column gutter is read once per column), never stacked (two
    overlapping regions do not read the same words twice).

    Args:
        region_xyxy: (R, 4) region boxes, pixels.
        line_xyxy: (L, 4) line boxes, pixels.

    Returns:
        crops (K, 4) the line boxes cut to their regions, region index (K,), line index (K,);
        ordered by line, then x.
    """
    region_xyxy = np.asarray(region_xyxy, dtype=np.float64).reshape(-1, 4)
    line_xyxy = np.asarray(line_xyxy, dtype=np.float64).reshape(-1, 4)
    pairs = cross_pairs(line_xyxy, region_xyxy)
    li, ri = pairs.i, pairs.j
    crop = np.concatenate([np.maximum(line_xyxy[li, :2], region_xyxy[ri, :2]),
                           np.minimum(line_xyxy[li, 2:], region_xyxy[ri, 2:])], axis=1).reshape(-1, 4)
    line_h = line_xyxy[li, 3] - line_xyxy[li, 1]
    line_w = line_xyxy[li, 2] - line_xyxy[li, 0]
    crop_w, crop_h = crop[:, 2] - crop[:, 0], crop[:, 3] - crop[:, 1]
    # A crop under 1 px holds nothing to read (the recogniser drops such boxes as degenerate):
    # a page whose only crop is a speck cut at a region edge gets an empty transcript, not a failure.
    keep = (crop_h >= min_cover * line_h) & (crop_w >= 0.5 * np.minimum(line_h, line_w)) \
        & (crop_w >= 1) & (crop_h >= 1)
    li, ri, crop, inter = li[keep], ri[keep], crop[keep], pairs.inter[keep]
    # Main crop of each line: its largest overlap (lexsort's last key is the primary one).
    by_line = np.lexsort((-inter, li))
    li, ri, crop = li[by_line], ri[by_line], crop[by_line]
    first = np.ones(li.shape[0], dtype=bool)
    first[1:] = li[1:] != li[:-1]
    main = crop[np.maximum.accumulate(np.where(first, np.arange(li.shape[0]), 0))]
    x_overlap = np.clip(np.minimum(crop[:, 2], main[:, 2]) - np.maximum(crop[:, 0], main[:, 0]), 0, None)
    keep = first | (x_overlap < 0.5 * (crop[:, 2] - crop[:, 0]))
    li, ri, crop = li[keep], ri[keep], crop[keep]
    order = np.lexsort((crop[:, 0], li))
    return crop[order], ri[order].astype(np.intp), li[order].astype(np.intp)


def line_rows(xyxy: np.ndarray) -> np.ndarray:
    """Reading order of the lines of one region: rows top to bottom, left to right in a row.

    A new row starts where the next line's vertical centre lies more than half the median
    line height below the current row's first line.

    Returns:
        (N,) indices into `xyxy`.
    """
    xyxy = np.asarray(xyxy, dtype=np.float64).reshape(-1, 4)
    if xyxy.shape[0] == 0:
        return np.zeros(0, dtype=np.intp)
    centre = (xyxy[:, 1] + xyxy[:, 3]) / 2
    half = 0.5 * float(np.median(xyxy[:, 3] - xyxy[:, 1]))
    by_y = np.argsort(centre, kind="stable")
    row = np.zeros(by_y.shape[0], dtype=np.intp)
    start = centre[by_y[0]]
    for k, i in enumerate(by_y[1:], 1):  # one pass over sorted centres: a row follows its first line
        if centre[i] - start > half:
            row[k], start = row[k - 1] + 1, centre[i]
        else:
            row[k] = row[k - 1]
    return by_y[np.lexsort((xyxy[by_y, 0], row))]


def inside_larger(xyxy: np.ndarray, share: float = 0.5) -> np.ndarray:
    """(N,) bool: boxes more than `share` of whose area lies inside one larger box (of two equal
    boxes, the later one): a fused layout may keep a paragraph and the block holding it, and
    a transcript that read both would give its words twice.

    >>> inside_larger(np.array([[0, 0, 100, 100], [10, 10, 50, 50], [90, 0, 150, 40], [0, 0, 100, 100]])).tolist()
    [False, True, False, True]
    """
    xyxy = np.asarray(xyxy, dtype=np.float64).reshape(-1, 4)
    pairs = cross_pairs(xyxy, xyxy)
    a = area(xyxy)
    larger = (a[pairs.j] > a[pairs.i]) | ((a[pairs.j] == a[pairs.i]) & (pairs.j < pairs.i))
    held = larger & (pairs.inter > share * a[pairs.i])
    out = np.zeros(len(xyxy), dtype=bool)
    out[pairs.i[held]] = True
    return out


def column_pieces(xyxy: np.ndarray, is_text: np.ndarray, read: np.ndarray, rank: np.ndarray,
                  line_xyxy: np.ndarray | None, width: float, height: float
                  ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """What a page's transcript reads: each read region, or its column parts where the reading
    order cuts text fused across a gutter (`order.reading_order_parts`), each part in its column.

    Args:
        xyxy: (N, 4) all fused regions of the page (the reading order's input).
        is_text: (N,) bool, running text (the regions the order may cut).
        read: (R,) indices of the regions read (text and titles).
        rank: (R,) their reading rank (the fused page's order).
        line_xyxy: (L, 4) text lines, or None.
        width, height: page size, pixels.

    Returns:
        piece_xyxy (P, 4), piece_of (P,) index into `read`, piece_rank (P,), is_part (P,) bool
        (the piece is a column part of a cut region). Without a cut region: the read regions
        and `rank` unchanged.
    """
    xyxy = np.asarray(xyxy, dtype=np.float64).reshape(-1, 4)
    read = np.asarray(read, dtype=np.intp)
    whole = (xyxy[read], np.arange(read.size), np.asarray(rank), np.zeros(read.size, dtype=bool))
    if line_xyxy is None or read.size == 0:
        return whole
    part_xyxy, part_box, part_rank = reading_order_parts(xyxy, width, height, lines=line_xyxy, text=is_text)
    n_parts = np.bincount(part_box, minlength=xyxy.shape[0])
    if not (n_parts[read] > 1).any():
        return whole
    pos = np.full(xyxy.shape[0], -1, dtype=np.intp)
    pos[read] = np.arange(read.size)
    keep = pos[part_box] >= 0
    return part_xyxy[keep], pos[part_box[keep]], part_rank[keep], n_parts[part_box[keep]] > 1


def crop_plan(crops, units: list[str], size_wh: list[int], sample=(), crop_lines: list[list[int]] | None = None
              ) -> dict:
    """What a recogniser runner reads of a page (runners/_plan.py), as JSON: the crops, what each
    is ("line" or "region"), the page size they are in, the page's lines to choose a model on,
    and each region crop's lines among them.

    >>> crop_plan([[0, 0, 10, 5]], ["line"], [10, 5])
    {'crops': [[0.0, 0.0, 10.0, 5.0]], 'units': ['line'], 'size_wh': [10, 5], 'sample': [], 'crop_lines': [[]]}
    """
    return {"crops": np.round(np.asarray(crops, dtype=np.float64).reshape(-1, 4), 2).tolist(), "units": list(units),
            "size_wh": list(size_wh), "sample": np.round(np.asarray(sample, dtype=np.float64).reshape(-1, 4), 2).tolist(),
            "crop_lines": crop_lines if crop_lines is not None else [[] for _ in units]}


def plan_regions(region_xyxy: np.ndarray, region_rank: np.ndarray, line_crops: np.ndarray, line_of: np.ndarray,
                 whole: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The crops to recognise with a recogniser that finds the lines of a region itself: each
    region in `whole` is one crop; the others (text set across columns, where a block reader
    would read each line across the gutter) are read by their lines, `line_crops` and their
    region `line_of` (`plan_page`).

    Returns:
        crops (K, 4) in reading order, their region index (K,) and whether each is a whole
        region (K,) bool (else a text line).

    >>> crops, of, is_region = plan_regions(np.array([[0, 50, 9, 60], [0, 0, 9, 40]]), np.array([1, 0]),
    ...                                     np.zeros((0, 4)), np.zeros(0, int), np.array([True, True]))
    >>> of.tolist(), is_region.tolist()
    ([1, 0], [True, True])
    """
    region_xyxy = np.asarray(region_xyxy, dtype=np.float64).reshape(-1, 4)
    whole = np.asarray(whole, bool)
    by_lines = ~whole[np.asarray(line_of, dtype=np.intp)]
    crops = np.concatenate([np.asarray(line_crops, dtype=np.float64).reshape(-1, 4)[by_lines],
                            region_xyxy[whole]]).reshape(-1, 4)
    region_of = np.concatenate([np.asarray(line_of, dtype=np.intp)[by_lines], np.flatnonzero(whole)]).astype(np.intp)
    is_region = np.arange(len(crops)) >= by_lines.sum()
    order = np.argsort(np.asarray(region_rank)[region_of], kind="stable")   # a region's lines keep their order
    return crops[order], region_of[order], is_region[order]


def plan_page(region_xyxy: np.ndarray, region_rank: np.ndarray, line_xyxy: np.ndarray | None,
              max_solo_lines: float = 2.5) -> tuple[np.ndarray, np.ndarray]:
    """The crops to recognise for a page's text regions, in reading order.

    Args:
        region_xyxy: (R, 4) text and title regions.
        region_rank: (R,) reading-order rank (smaller first).
        line_xyxy: (L, 4) detected text lines, or None when the run has none. A region no
            line falls in is read as one crop when it is at most `max_solo_lines` median
            line heights tall (a headline the line detector missed); taller ones stay unread,
            and so does one whose area the crops already read cover half of (its line was read
            in an overlapping region: reading the region too would repeat the words).

    Returns:
        crops (K, 4) in reading order and their region index (K,).
    """
    region_xyxy = np.asarray(region_xyxy, dtype=np.float64).reshape(-1, 4)
    lines = np.zeros((0, 4)) if line_xyxy is None else np.asarray(line_xyxy, dtype=np.float64).reshape(-1, 4)
    crops, region, _ = line_crops(region_xyxy, lines)
    median_h = float(np.median(lines[:, 3] - lines[:, 1])) if lines.shape[0] else np.inf
    unread = np.setdiff1d(np.arange(region_xyxy.shape[0]), region)
    solo = unread[(region_xyxy[unread, 3] - region_xyxy[unread, 1]) <= max_solo_lines * median_h]
    read = cross_pairs(region_xyxy[solo], crops)
    covered = np.bincount(read.i, read.inter, minlength=len(solo)) / np.maximum(area(region_xyxy[solo]), 1e-9)
    solo = solo[covered < 0.5]
    crops = np.concatenate([crops, region_xyxy[solo]]).reshape(-1, 4)
    region = np.concatenate([region, solo]).astype(np.intp)
    parts = []
    for r in np.argsort(np.asarray(region_rank), kind="stable"):
        mine = np.flatnonzero(region == r)
        parts.append(mine[line_rows(crops[mine])])
    order = np.concatenate(parts) if parts else np.zeros(0, dtype=np.intp)
    return crops[order], region[order]


def join_hyphens(lines: list[str]) -> tuple[list[str], list[str | None]]:
    """The lines of one region with each word broken at a line end made whole on its first line.

    The word's second part moves up to the first. The hyphen is dropped when that part starts
    lower-case (a word the printer broke: "Zei¬" "tung" -> "Zeitung") and kept as "-" otherwise
    (a compound broken at its own hyphen, or a name: "Zürich-" "Stadt" -> "Zürich-Stadt").
    Line breaks stay where they were, so the text still lines up with its lines; the lines as
    read, hyphen included, are what the ground truth's convention compares.

    Args:
        lines: L stripped line texts in reading order.

    Returns:
        the L lines after joining, and per line None or how its line-end hyphen was joined
        ("dropped" or "kept").

    >>> join_hyphens(["die Zei¬", "tung ist", "in Zürich-", "Stadt"])
    (['die Zeitung', 'ist', 'in Zürich-Stadt', ''], ['dropped', None, 'kept', None])
    """
    out, joins = list(lines), [None] * len(lines)
    for k in range(len(out)):
        last = k   # the line whose hyphen ends out[k]: a one-word line moved up passes its own on
        for j in range(k + 1, len(out)):
            tail = _GOES_ON.match(out[j])
            if tail is None or not _BROKEN.search(out[k]):
                break
            joins[last] = "dropped" if tail.group()[0].islower() else "kept"
            out[k] = out[k][:-1] + ("" if joins[last] == "dropped" else "-") + tail.group()
            out[j] = out[j][tail.end():].lstrip()
            if out[j]:
                break
            last = j
    return out, joins


def assemble(n_regions: int, region: np.ndarray, texts: list[str]) -> tuple[list[str], list[str | None]]:
    """Region texts: the recognised lines of each region joined by newlines, in plan order,
    with words broken at line ends made whole (`join_hyphens`).

    Args:
        n_regions: R.
        region: (K,) region index of each recognised line, in reading order.
        texts: K line texts.

    Returns:
        R strings ('' for a region with no line read), and per line how its line-end hyphen
        was joined (None: not joined).
    """
    texts = [t.strip() for t in texts]
    by_region: list[list[int]] = [[] for _ in range(n_regions)]
    for k, r in enumerate(np.asarray(region, dtype=np.intp).tolist()):
        if texts[k]:
            by_region[r].append(k)
    joins: list[str | None] = [None] * len(texts)
    out = []
    for mine in by_region:
        joined, how = join_hyphens([texts[k] for k in mine])
        for k, j in zip(mine, how):
            joins[k] = j
        out.append("\n".join(t for t in joined if t))
    return out, joins


def take_block_text(region_xyxy: np.ndarray, crops: np.ndarray, crop_region: np.ndarray, block_xyxy: np.ndarray,
                    min_inside: float = 0.8, min_cover: float = 0.9) -> tuple[np.ndarray, np.ndarray]:
    """Which regions take the text a page-reading model (PaddleOCR-VL, MinerU) gave its blocks.

    A block belongs to the region holding at least `min_inside` of it (the one holding most).
    A region takes its blocks' text instead of recognising its lines when it has a block and
    at least `min_cover` of its line crops lie (half or more) inside its blocks, so a block
    is never cut in two and a region is never read half by each. A region without crops
    takes the text of any block inside it.

    Args:
        region_xyxy: (R, 4) regions; crops: (K, 4) their line crops; crop_region: (K,) region
            of each crop; block_xyxy: (B, 4) blocks that carry text.

    Returns:
        taken (R,) bool, block_region (B,) region index of each block (-1: none, or a
        region that does not take block text).
    """
    region_xyxy = np.asarray(region_xyxy, dtype=np.float64).reshape(-1, 4)
    crops = np.asarray(crops, dtype=np.float64).reshape(-1, 4)
    block_xyxy = np.asarray(block_xyxy, dtype=np.float64).reshape(-1, 4)
    n_regions, n_blocks = region_xyxy.shape[0], block_xyxy.shape[0]
    block_region = np.full(n_blocks, -1, dtype=np.intp)
    p = cross_pairs(block_xyxy, region_xyxy)
    inside = p.inter >= min_inside * np.maximum(area(block_xyxy)[p.i], 1e-9)
    bi, ri, inter = p.i[inside], p.j[inside], p.inter[inside]
    best = np.lexsort((-inter, bi))
    first = np.r_[True, bi[best][1:] != bi[best][:-1]] if best.size else np.zeros(0, bool)
    block_region[bi[best][first]] = ri[best][first]
    has_block = np.bincount(block_region[block_region >= 0], minlength=n_regions) > 0
    q = cross_pairs(crops, block_xyxy)
    mine = (q.inter >= 0.5 * np.maximum(area(crops)[q.i], 1e-9)) & (block_region[q.j] == np.asarray(crop_region)[q.i])
    covered = np.zeros(crops.shape[0], dtype=bool)
    covered[q.i[mine]] = True
    n_crops = np.bincount(crop_region, minlength=n_regions)
    n_covered = np.bincount(crop_region, covered, minlength=n_regions)
    taken = has_block & (n_covered >= min_cover * n_crops)
    block_region[(block_region >= 0) & ~taken[np.maximum(block_region, 0)]] = -1
    return taken, block_region
