"""Box geometry on (N, 4) xyxy arrays: areas, all-pairs matrices and sparse candidate pairs."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import shapely

from ..sweep import pair_intersection, pairs_exceed, sweep, sweep_pairs

__all__ = [
    "Pairs",
    "area",
    "intersection_matrix",
    "iou_matrix",
    "ioa_matrix",
    "candidate_pairs",
    "self_pairs",
    "sources_crowded",
    "subset_pairs",
    "pairs_between",
    "cross_pairs",
    "box_tree",
    "group_extent",
]

# Above this many box pairs an STRtree query beats the dense (N, M) matrix (measured here:
# 100x100 both ~0.1 ms; 300x600 dense ~5 ms vs tree ~1 ms; 1800x1800 ~35 ms vs ~7 ms).
_DENSE_LIMIT = 10_000


def area(xyxy: np.ndarray) -> np.ndarray:
    """(N,) areas of (N, 4) xyxy boxes; inverted or degenerate boxes give 0."""
    wh = np.maximum(xyxy[:, 2:4] - xyxy[:, 0:2], 0)   # np.clip's result (NaN stays NaN), without its overhead
    return wh[:, 0] * wh[:, 1]


def intersection_matrix(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """(N, M) intersection areas of (N, 4) boxes `a` with (M, 4) boxes `b`."""
    w = np.minimum(a[:, None, 2], b[None, :, 2]) - np.maximum(a[:, None, 0], b[None, :, 0])
    h = np.minimum(a[:, None, 3], b[None, :, 3]) - np.maximum(a[:, None, 1], b[None, :, 1])
    return np.clip(w, 0, None) * np.clip(h, 0, None)


def iou_matrix(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """(N, M) intersection over union; 0 where both boxes are degenerate.

    >>> iou_matrix(np.zeros((0, 4)), np.zeros((2, 4))).shape
    (0, 2)
    """
    inter = intersection_matrix(a, b)
    union = area(a)[:, None] + area(b)[None, :] - inter
    return np.divide(inter, union, out=np.zeros_like(inter), where=union > 0)


def ioa_matrix(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """(N, M) share of each box of `a` that lies inside each box of `b` (0 for empty a)."""
    inter = intersection_matrix(a, b)
    area_a = area(a)[:, None]
    return np.divide(inter, area_a, out=np.zeros_like(inter), where=area_a > 0)


def group_extent(xyxy: np.ndarray, group: np.ndarray, n: int) -> np.ndarray:
    """(n, 4) bounding box of the boxes of each group id 0..n-1 (+-inf for an empty group)."""
    ext = np.empty((n, 4))
    ext[:, :2] = np.inf
    ext[:, 2:] = -np.inf
    for k, ufunc in enumerate((np.minimum, np.minimum, np.maximum, np.maximum)):
        ufunc.at(ext[:, k], group, xyxy[:, k])
    return ext


def _diagonals(xyxy: np.ndarray) -> np.ndarray:
    """Each box as its diagonal segment (its envelope is the box)."""
    xyxy = np.ascontiguousarray(xyxy, dtype=np.float64).reshape(-1, 4)
    return shapely.linestrings(np.stack([xyxy[:, 0:2], xyxy[:, 2:4]], axis=1))


def box_tree(xyxy: np.ndarray) -> shapely.STRtree:
    """STRtree of boxes for `candidate_pairs` (build once when `b` is queried many times)."""
    return shapely.STRtree(_diagonals(xyxy))


def candidate_pairs(a: np.ndarray, b: np.ndarray, tree_b: shapely.STRtree | None = None) -> np.ndarray:
    """(2, K) index pairs (i into a, j into b) of boxes that overlap with positive area.

    Small inputs use the dense matrix; large ones an STRtree query (`tree_b`, the
    `box_tree` of b, when given), so the cost grows with the number of overlapping pairs
    rather than N*M.
    """
    ia, ib, _ = _overlaps(a, b, tree_b)
    return np.stack([ia, ib])


def _overlaps(a: np.ndarray, b: np.ndarray, tree_b: shapely.STRtree | None = None
              ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """`candidate_pairs` as (ia, ib, intersection areas): the areas that decide the pairs are
    returned, not computed a second time by `cross_pairs`."""
    if len(a) == 0 or len(b) == 0:
        return np.zeros(0, np.intp), np.zeros(0, np.intp), np.zeros(0)
    if len(a) * len(b) <= _DENSE_LIMIT:
        inter = intersection_matrix(a, b)
        ia, ib = np.nonzero(inter > 0)
        return ia.astype(np.intp), ib.astype(np.intp), inter[ia, ib]
    # Envelope query only: for axis-aligned boxes the envelope test is the exact test, so
    # each box is stored as its diagonal segment (same envelope, built ~2x faster than a
    # polygon) and no predicate runs; the area filter drops mere touches.
    tree = tree_b if tree_b is not None else box_tree(b)
    ia, ib = tree.query(_diagonals(a))
    inter = pair_intersection(a, b, ia, ib)
    keep = inter > 0
    return ia[keep].astype(np.intp, copy=False), ib[keep].astype(np.intp, copy=False), inter[keep]


@dataclass(frozen=True)
class Pairs:
    """Overlapping pairs i < j of one box set with their intersection areas (all (K,))."""

    i: np.ndarray
    j: np.ndarray
    inter: np.ndarray

    def __len__(self) -> int:
        return int(self.i.shape[0])


def self_pairs(xyxy: np.ndarray) -> Pairs:
    """Pairs i < j of `xyxy` that overlap with positive area."""
    if len(xyxy) ** 2 <= _DENSE_LIMIT:
        ia, ib, inter = _overlaps(xyxy, xyxy)
        keep = ia < ib
        return Pairs(ia[keep], ib[keep], inter[keep])
    cand = _sweep_self(xyxy) if len(xyxy) <= _SWEEP_MAX else None
    if cand is None:  # one set of diagonals serves as tree and query (as `candidate_pairs` does, built once)
        diagonals = _diagonals(xyxy)
        ia, ib = shapely.STRtree(diagonals).query(diagonals)
        upper = ia < ib     # each pair once before measuring it: the query gives both orders and (i, i)
        cand = ia[upper], ib[upper]
    inter = pair_intersection(xyxy, xyxy, *cand)
    keep = inter > 0
    return Pairs(cand[0][keep].astype(np.intp, copy=False), cand[1][keep].astype(np.intp, copy=False), inter[keep])


# A sort-and-sweep along y finds the pairs of a few hundred boxes (a consensus round's groups)
# with a third fewer instructions than an STRtree, whose GEOS geometries cost most; on larger
# sets, or where y-ranges overlap more than `_SWEEP_PER_BOX` boxes each, the tree.
_SWEEP_MAX = 1000
_SWEEP_PER_BOX = 4


def _sweep_self(xyxy: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """(i, j), i < j, sorted by i then j: the pairs whose y-ranges overlap (a superset of the
    overlapping pairs), or None when there are too many."""
    o, count = sweep(xyxy, 1)
    n = len(o)
    if count.sum() > _SWEEP_PER_BOX * n:
        return None
    k, p = sweep_pairs(count, 0, n)
    a, b = o[k], o[p]
    i, j = np.minimum(a, b), np.maximum(a, b)
    s = np.argsort(i * n + j, kind="stable")
    return i[s], j[s]


def sources_crowded(xyxy_by_source: dict[str, np.ndarray], limit: int, purpose: str) -> str | None:
    """Why the boxes of several sources, each under the reader's pile bound, cannot be paired
    with one another (None when they can): together they overlap in over `limit` pairs (5,000
    strips across the page and 5,000 down it are 25 million). One rule for fusion's pool and
    review's scores; `purpose` says what is refused ("fuse", "compare")."""
    if not xyxy_by_source or not pairs_exceed(np.concatenate(list(xyxy_by_source.values())), limit):
        return None
    sizes = ", ".join(f"{s} {len(b):,}" for s, b in sorted(xyxy_by_source.items()))
    return f"the sources' boxes overlap in over {limit:,} pairs, too many to {purpose} (boxes per source: {sizes})"


def subset_pairs(pairs: Pairs, mask: np.ndarray) -> Pairs:
    """The pairs among the boxes selected by bool `mask`, renumbered to the subset."""
    new_index = np.cumsum(mask) - 1
    keep = mask[pairs.i] & mask[pairs.j]
    return Pairs(new_index[pairs.i[keep]], new_index[pairs.j[keep]], pairs.inter[keep])


def pairs_between(pairs: Pairs, a: np.ndarray, b: np.ndarray) -> Pairs:
    """``cross_pairs(xyxy[a], xyxy[b])`` taken from `pairs` (`self_pairs(xyxy)`) for disjoint
    bool masks `a` and `b`, instead of a tree query: the same pairs and intersection areas,
    in another order (for callers whose result does not depend on it)."""
    pos_a, pos_b = np.cumsum(a) - 1, np.cumsum(b) - 1
    ab = a[pairs.i] & b[pairs.j]
    ba = b[pairs.i] & a[pairs.j]
    return Pairs(np.concatenate([pos_a[pairs.i[ab]], pos_a[pairs.j[ba]]]),
                 np.concatenate([pos_b[pairs.j[ab]], pos_b[pairs.i[ba]]]),
                 np.concatenate([pairs.inter[ab], pairs.inter[ba]]))


def cross_pairs(a: np.ndarray, b: np.ndarray, tree_b: shapely.STRtree | None = None) -> Pairs:
    """Pairs (i into a, j into b) that overlap, with intersection areas (`tree_b`: see
    `candidate_pairs`)."""
    return Pairs(*_overlaps(a, b, tree_b))
