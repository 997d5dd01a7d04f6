"""Pure numpy/scipy post-processing for DB text detection (PP-OCR det) and line grouping.

Boxes are axis-aligned: the newspaper scans this serves are deskewed, and fusion works on
xyxy boxes anyway. No cv2, no pyclipper.
"""

from __future__ import annotations

import numpy as np

import _columns
import _sweep

__all__ = ["db_input_hw", "components_xyxy", "component_stats", "db_boxes", "union_xyxy",
           "group_lines"]


def db_input_hw(height: int, width: int, max_side: int) -> tuple[int, int]:
    """Network input size: long side scaled down to ~``max_side``, both multiples of 32.

    Pages smaller than ``max_side`` are not upscaled (only rounded to the next multiple of 32,
    at least 32): a 1x1 page used to become 2048x2048 and cost 8-10 s for nothing.
    """
    ratio = min(1.0, max_side / max(height, width))
    return (max(32, int(round(height * ratio / 32)) * 32), max(32, int(round(width * ratio / 32)) * 32))


def _ndimage():
    """scipy.ndimage, imported on first use (the DB pass). scipy is most of a text_lines
    runner's start, and the blocks variant that reads a shared pass needs only scipy.sparse."""
    from scipy import ndimage

    return ndimage


def _label(mask: np.ndarray) -> tuple[np.ndarray, int]:
    return _ndimage().label(mask, structure=np.ones((3, 3), dtype=bool))


def _slices_xyxy(labels: np.ndarray) -> np.ndarray:
    slices = _ndimage().find_objects(labels)
    return np.array([[sx.start, sy.start, sx.stop, sy.stop] for sy, sx in slices], dtype=np.float64).reshape(-1, 4)


def components_xyxy(mask: np.ndarray) -> np.ndarray:
    """(N, 4) pixel-edge xyxy boxes of the 8-connected components of a boolean map."""
    labels, n = _label(mask)
    return _slices_xyxy(labels) if n else np.zeros((0, 4))


def component_stats(prob: np.ndarray, labels: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per component 1..n: mean probability over its own pixels, and its length and thickness.

    The mean over the component's pixels is the DB reference's polygon score (PaddleOCR
    ``box_score_slow``; ``box_score_fast`` uses the rotated min-area box, nearly the same
    set). The mean over the upright bounding box is not: a long line on a page skewed by
    1 degree fills a third of its upright box and fell below ``box_threshold`` (nzz 1793
    lost 74 of 87 regions).

    Length and thickness are the sides of the rectangle with the component's second
    moments (a uniform rectangle of side s has variance (s^2 - 1) / 12 on the pixel
    grid): the rotated box the reference unclips, without cv2.

    Returns:
        (n,) mean probability, (n,) length, (n,) thickness, in map pixels.
    """
    if n == 0:
        z = np.zeros(0)
        return z, z, z
    index = np.arange(1, n + 1)
    yy, xx = np.indices(labels.shape, dtype=np.float64)
    ndimage = _ndimage()
    count = ndimage.sum_labels(np.ones(labels.shape), labels, index)
    score = ndimage.sum_labels(prob.astype(np.float64), labels, index) / count
    mx = ndimage.sum_labels(xx, labels, index) / count
    my = ndimage.sum_labels(yy, labels, index) / count
    vxx = ndimage.sum_labels(xx * xx, labels, index) / count - mx * mx
    vyy = ndimage.sum_labels(yy * yy, labels, index) / count - my * my
    vxy = ndimage.sum_labels(xx * yy, labels, index) / count - mx * my
    half_tr, det = (vxx + vyy) / 2, vxx * vyy - vxy * vxy
    root = np.sqrt(np.maximum(half_tr * half_tr - det, 0))
    length = np.sqrt(np.maximum(12 * (half_tr + root) + 1, 1))
    thickness = np.sqrt(np.maximum(12 * (half_tr - root) + 1, 1))
    return score, length, thickness


def db_boxes(prob: np.ndarray, bin_threshold: float = 0.3, box_threshold: float = 0.5,
             unclip_ratio: float = 1.6, min_side: float = 3.0) -> tuple[np.ndarray, np.ndarray]:
    """Text boxes from a DB probability map, in the map's pixels.

    Args:
        prob: (H, W) text probability.
        bin_threshold: pixels above it are text.
        box_threshold: components whose mean probability over their own pixels is below it
            are dropped (`component_stats`).
        unclip_ratio: DB expansion (the network predicts shrunk text kernels): each side of
            the upright box grows by area * ratio / perimeter of the component's rotated
            rectangle, so a skewed line grows by its own thickness, not its box's height.
        min_side: components whose short side (of the rotated rectangle) is below it are
            dropped (noise), and again below ``min_side + 2`` after unclipping, as PP-OCR does.

    Returns:
        (N, 4) float64 xyxy and (N,) float64 scores.
    """
    labels, n = _label(prob > bin_threshold)
    if n == 0:
        return np.zeros((0, 4)), np.zeros(0)
    boxes = _slices_xyxy(labels)
    scores, length, thick = component_stats(prob, labels, n)
    keep = (thick >= min_side) & (scores >= box_threshold)
    boxes, scores, length, thick = boxes[keep], scores[keep], length[keep], thick[keep]
    d = (length * thick * unclip_ratio / np.maximum(2 * (length + thick), 1e-9))[:, None]
    boxes = boxes + np.hstack([-d, -d, d, d])
    keep = thick + 2 * d[:, 0] >= min_side + 2
    return boxes[keep], scores[keep]


def union_xyxy(xyxy: np.ndarray, group: np.ndarray) -> np.ndarray:
    """(K, 4) union box of each group id 0..K-1."""
    k = int(group.max()) + 1 if group.size else 0
    out = np.tile(np.array([np.inf, np.inf, -np.inf, -np.inf]), (k, 1))
    for col, reduce in ((0, np.minimum), (1, np.minimum), (2, np.maximum), (3, np.maximum)):
        reduce.at(out[:, col], group, xyxy[:, col])
    return out


def _components(n: int, i: np.ndarray, j: np.ndarray) -> np.ndarray:
    """(n,) connected-component id per node of the graph with edges (i, j)."""
    from scipy.sparse import coo_matrix  # on first use, like ndimage above
    from scipy.sparse.csgraph import connected_components

    graph = coo_matrix((np.ones(i.size, dtype=np.int8), (i, j)), shape=(n, n))
    return connected_components(graph, directed=False)[1].astype(np.int64)


def group_lines(xyxy: np.ndarray, gap_factor: float = 0.6, word_gap: float = 0.5, row_shift: float = 0.3,
                min_overlap: float = 0.5, indent: float = 0.6, centre_inset: float = 1.0,
                min_h: float = 0.6, min_w: float = 1.0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Group text lines into paragraph blocks that never cross a column gutter.

    Lengths below are in units of the page's median line height ``lh``.

    0. Gutters: ``_columns.find_gutters`` on the line boxes; lines DB ran across a gutter
       are cut there (``split_at_gutters``). Specks (pieces lower than ``min_h`` or
       narrower than ``min_w``: dirt, rules, show-through) are dropped: as one-piece
       blocks they were ~30% of all blocks on the nzz pages and matched nothing.
    1. Rows: DB often splits one printed line at wide word spaces. Pieces whose centres
       lie less than ``row_shift`` x the taller height apart vertically, less than
       ``word_gap`` apart horizontally and with no gutter cell between their centres are
       joined into one row. Centres, not overlap: a short piece overlaps the lines above
       and below it and would chain them into one "row".
    2. Blocks: each row is linked to its nearest row below and above in its column
       (horizontal overlap >= ``min_overlap`` x the narrower row, and left edges within
       1 lh or the overlap also covers ``min_overlap`` of the wider row). Only adjacent
       rows: unclipped DB boxes overlap, so a link skipping a line would look as close as
       a real one and jump over every paragraph cue. A link is kept when
       - the vertical gap (negative when they overlap) is below ``gap_factor`` x the
         smaller row height, and their heights differ by less than 2x (headline);
       - there is no paragraph cue: the upper row ends more than 1 lh left of the lower
         (short last line); the lower row starts ``indent``..4 lh right of the upper and
         ends where it does (indented first line); the lower row is inset by more than
         ``centre_inset`` on both sides (centred heading or dateline).
    Blocks are the connected components of the kept links. Candidate pairs come from a
    sort-and-sweep (rows: a window on the centre height; links: a scan in top/bottom
    order), so time and memory grow with N log N and the answer, not N^2.

    Returns:
        pieces (M, 4), parent (M,) index of the input line of each piece (sorted; a line
        may give several pieces or none), block (M,) ids in 0..K-1.
    """
    if xyxy.shape[0] == 0:
        return np.zeros((0, 4)), np.zeros(0, np.int64), np.zeros(0, np.int64)
    line_h = float(np.median(xyxy[:, 3] - xyxy[:, 1]))
    gutters = _columns.find_gutters(xyxy, line_h)
    pieces, parent = _line_pieces(xyxy, gutters, line_h, min_h, min_w)
    if pieces.shape[0] == 0:
        return pieces, parent, np.zeros(0, np.int64)
    row = _rows(pieces, gutters, line_h, word_gap, row_shift)
    rows = union_xyxy(pieces, row)
    up, lo = _adjacent_rows(rows, line_h, min_overlap)
    keep = _joined_rows(rows, up, lo, line_h, gap_factor, indent, centre_inset)
    block = _components(rows.shape[0], up[keep], lo[keep])
    return pieces, parent, block[row]


def _line_pieces(xyxy: np.ndarray, gutters: _columns.Gutters, line_h: float, min_h: float, min_w: float
                 ) -> tuple[np.ndarray, np.ndarray]:
    """Step 0 of `group_lines`: lines cut at the `gutters`, specks dropped; (pieces, parent line)."""
    pieces, parent = _columns.split_at_gutters(xyxy, gutters, min_piece=2 * line_h)
    ph, pw = pieces[:, 3] - pieces[:, 1], pieces[:, 2] - pieces[:, 0]
    keep = (ph >= min_h * line_h) & (pw >= min_w * line_h)
    return pieces[keep], parent[keep]


def _rows(pieces: np.ndarray, gutters: _columns.Gutters, line_h: float, word_gap: float, row_shift: float) -> np.ndarray:
    """Step 1 of `group_lines`: (M,) row id of each piece."""
    x0, y0, x1, y1 = (pieces[:, k] for k in range(4))
    h = y1 - y0
    yc = (y0 + y1) / 2
    # Row candidates: a pair joins only if |yc_i - yc_j| < row_shift x the taller height, so
    # it lies in the taller piece's window yc +- row_shift * h (1 px wider against rounding).
    reach = row_shift * h + 1.0
    i, j = _sweep.window_pairs(yc, yc - reach, yc + reach)
    shift = np.abs(yc[i] - yc[j]) / np.maximum(h[i], h[j])
    h_gap = np.maximum(x0[i], x0[j]) - np.minimum(x1[i], x1[j])
    near = (shift < row_shift) & (h_gap < word_gap * line_h)
    i, j = i[near], j[near]
    xc = (x0 + x1) / 2
    blocked = _columns.gutter_cells_between(gutters, np.minimum(xc[i], xc[j]), np.maximum(xc[i], xc[j]),
                                            (yc[i] + yc[j]) / 2) > 0
    return _components(pieces.shape[0], i[~blocked], j[~blocked])


def _adjacent_rows(rows: np.ndarray, line_h: float, min_overlap: float) -> tuple[np.ndarray, np.ndarray]:
    """Step 2 of `group_lines`, the candidates: (up, lo) pairs of rows where ``lo`` is the nearest
    row below ``up`` in its column or ``up`` the nearest row above ``lo``."""
    x0, y0, x1, y1 = (rows[:, k] for k in range(4))
    w, h = x1 - x0, y1 - y0
    yc = (y0 + y1) / 2

    def below(up: np.ndarray, lo: np.ndarray) -> np.ndarray:
        """Row ``lo`` lies below row ``up`` in the same column."""
        overlap = np.minimum(x1[up], x1[lo]) - np.maximum(x0[up], x0[lo])
        narrow, wide = np.minimum(w[up], w[lo]), np.maximum(w[up], w[lo])
        aligned = np.abs(x0[up] - x0[lo]) <= line_h
        column = (overlap >= min_overlap * narrow) & (aligned | (overlap >= min_overlap * wide))
        return column & (yc[lo] > yc[up])

    # Only vertically adjacent rows are linked (each row's nearest row below and above in
    # its column): with unclipped, overlapping DB boxes a link skipping one line is as
    # "close" as a real one and would jump over every paragraph cue. Nearest = smallest top
    # (below) or largest bottom (above), ties to the lower index: a scan in that order from
    # the first row that could qualify finds it after a few rows, not N (4,000 lines: 23 s
    # and 1.1 GB dense, well under a second this way).
    idx = np.arange(rows.shape[0])
    h_max = float(h.max())
    by_top = np.lexsort((idx, y0))
    nearest_below = _sweep.first_match(np.searchsorted(y0[by_top], yc - h_max - 1.0, side="left"), by_top, below)
    by_bottom = np.lexsort((idx, -y1))
    nearest_above = _sweep.first_match(np.searchsorted(-y1[by_bottom], -(yc + h_max + 1.0), side="left"), by_bottom,
                                       lambda lo, up: below(up, lo))
    has_below, has_above = nearest_below >= 0, nearest_above >= 0
    up = np.concatenate([np.flatnonzero(has_below), nearest_above[has_above]])
    lo = np.concatenate([nearest_below[has_below], np.flatnonzero(has_above)])
    return up, lo


def _joined_rows(rows: np.ndarray, up: np.ndarray, lo: np.ndarray, line_h: float, gap_factor: float,
                 indent: float, centre_inset: float) -> np.ndarray:
    """Step 2 of `group_lines`, the test: (K,) bool, the links (up, lo) that are close and show no paragraph cue."""
    x0, y0, x1, y1 = (rows[:, k] for k in range(4))
    h = y1 - y0
    gap = y0[lo] - y1[up]
    h_lo, h_hi = np.minimum(h[up], h[lo]), np.maximum(h[up], h[lo])
    close = (gap < gap_factor * h_lo) & (h_hi < 2 * h_lo)
    short_last = x1[up] < x1[lo] - line_h
    step = x0[lo] - x0[up]
    first_line = (step >= indent * line_h) & (step <= 4 * line_h) & (np.abs(x1[lo] - x1[up]) <= 0.5 * line_h)
    centred = (step > centre_inset * line_h) & (x1[up] - x1[lo] > centre_inset * line_h)
    return close & ~short_last & ~first_line & ~centred
