"""The single contract: `Boxes` (arrays plus metadata) and the source-page JSON schema."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from itertools import chain, repeat
from operator import contains, itemgetter
from typing import Any, Iterable, TypedDict

import numpy as np

from . import labels

__all__ = [
    "MAX_REGIONS",
    "MAX_PAGE_BYTES",
    "MAX_OVERLAPPING_PAIRS",
    "PageMeta",
    "Boxes",
    "SourcePage",
    "Region",
    "validate_source_page",
    "repair_regions", "repairs_text",
    "boxes_from_page",
    "repaired_boxes",
    "region_corners",
    "warnings_with",
    "regions_from_boxes",
    "member_table_records",
    "str_list",
    "float_list",
    "take_rows",
    "column_codes",
]


# Bounds on one page that no layout reaches, so one runaway detector or foreign file cannot take
# fusion past the memory of its node (200,000 boxes in one page took it to 24 GB and an OOM kill).
# The largest pages measured are ~1,500 text lines; fusion was benchmarked to 20,000 boxes a page
# (README "Performance"), and a fused page of 20,000 boxes is 12 MB.
MAX_REGIONS = 100_000
MAX_PAGE_BYTES = 256_000_000
# Overlapping box pairs, on one page's repaired boxes (`io`) and on a page's sources pooled
# (fusion): every reader that pairs boxes holds each pair, and 30,000 boxes piled on one spot
# (3 MB) are 450 million (> 6 GB). Measured: densest real source 2,505, densest pool 11,327;
# the 20,000-box benchmark pool 84,504; a pool at the bound fuses in 0.4 s and 183 MB.
MAX_OVERLAPPING_PAIRS = 1_000_000


class Region(TypedDict, total=False):
    bbox_xyxy: list[float]
    label: str
    # "class" is a keyword; TypedDict functional form would hide the others, so it is
    # documented here and read with region["class"].
    score: float | None
    order: int | None
    text: str | None
    support: list[str]
    members: list[dict]


class SourcePage(TypedDict):
    page_id: str
    image: dict
    source: dict
    regions: list[Region]
    seconds: float


@dataclass(frozen=True)
class PageMeta:
    page_id: str
    width: int
    height: int
    source: str = ""
    image_path: str = ""


def take_rows(a: np.ndarray, index: np.ndarray) -> np.ndarray:
    """``a[index]`` along the first axis for an int or bool `index`, by `take` / `compress`:
    numpy's fancy indexing was 6-10x slower on (N, 4) arrays (2,217 boxes: 37 vs 4 us) and
    2x on columns. A bool mask of another length is refused, as indexing refuses it."""
    index = np.asarray(index)
    if index.dtype == bool:
        if index.shape != a.shape[:1]:
            raise IndexError(f"boolean index of shape {index.shape} for {a.shape[0]} rows")
        return a.compress(index, axis=0)
    return a.take(index, axis=0)


def column_codes(boxes: Boxes, key: str) -> tuple[np.ndarray, np.ndarray]:
    """Sorted names (object array) and (N,) intp codes into them of the string column `key`.

    A dict lookup per run of equal values: np.unique on objects is slow, and pooled columns
    come in runs (one source after another), 2.4 -> 0.3 ms for a 6 x 300-box page.
    """
    values = boxes.data[key]
    n = len(values)
    starts = np.r_[0, np.flatnonzero(values[1:] != values[:-1]) + 1] if n else np.zeros(0, np.intp)
    run_values = values[starts].tolist()
    names = sorted(set(run_values))
    lookup = {v: k for k, v in enumerate(names)}
    codes = np.repeat(np.array([lookup[v] for v in run_values], np.intp), np.diff(np.r_[starts, n]))
    return np.array(names, dtype=object), codes


@dataclass(frozen=True, eq=False)
class Boxes:
    """Boxes of one page as parallel columns; indexing keeps every column aligned.

    Args:
        xyxy: (N, 4) float64 pixel corners in the original page image, x right, y down.
        score: (N,) float32; NaN where the model gives no score (MinerU).
        label: (N,) int8 codes into `labels.LABELS` (canonical labels).
        data: optional per-box columns of length N (``source``, ``raw_label``, ``text``,
            ``order``...).
        meta: page id, size and source name.
    """

    xyxy: np.ndarray
    score: np.ndarray
    label: np.ndarray
    meta: PageMeta
    data: dict[str, np.ndarray] = field(default_factory=dict)

    def __post_init__(self) -> None:
        xyxy = np.asarray(self.xyxy, dtype=np.float64)
        if xyxy.size == 0:
            xyxy = xyxy.reshape(0, 4)
        if xyxy.ndim != 2 or xyxy.shape[1] != 4:
            raise ValueError(f"xyxy must have shape (N, 4), got {xyxy.shape}")
        n = xyxy.shape[0]
        score = np.asarray(self.score, dtype=np.float32).reshape(-1)
        label = np.asarray(self.label, dtype=np.int8).reshape(-1)
        if score.shape != (n,):
            raise ValueError(f"score must have shape ({n},), got {score.shape}")
        if label.shape != (n,):
            raise ValueError(f"label must have shape ({n},), got {label.shape}")
        data = {}
        for key, col in self.data.items():
            col = np.asarray(col)
            if col.shape[:1] != (n,):
                raise ValueError(f"data[{key!r}] must have length {n}, got shape {col.shape}")
            data[key] = col
        for name, arr in (("xyxy", xyxy), ("score", score), ("label", label)):
            arr.flags.writeable = False
            object.__setattr__(self, name, arr)
        object.__setattr__(self, "data", data)

    def __len__(self) -> int:
        return int(self.xyxy.shape[0])

    def __getitem__(self, index: Any) -> Boxes:
        idx = np.asarray(index)
        if idx.dtype != bool:
            idx = idx.astype(np.intp).reshape(-1)
        return Boxes(
            xyxy=take_rows(self.xyxy, idx),
            score=take_rows(self.score, idx),
            label=take_rows(self.label, idx),
            meta=self.meta,
            data={k: take_rows(v, idx) for k, v in self.data.items()},
        )

    @property
    def area(self) -> np.ndarray:
        """(N,) box areas in square pixels (degenerate boxes give 0)."""
        wh = np.clip(self.xyxy[:, 2:] - self.xyxy[:, :2], 0, None)
        return wh[:, 0] * wh[:, 1]

    @property
    def coarse(self) -> np.ndarray:
        """(N,) coarse class names (object array) of each box's canonical label."""
        table = np.array([labels.coarse_for(name) for name in labels.LABELS], dtype=object)
        return table[self.label.astype(np.intp)]

    @property
    def label_names(self) -> np.ndarray:
        return np.array(labels.LABELS, dtype=object)[self.label.astype(np.intp)]

    @classmethod
    def empty(cls, meta: PageMeta, data_keys: Iterable[str] = ()) -> Boxes:
        return cls(
            xyxy=np.zeros((0, 4)), score=np.zeros(0, np.float32), label=np.zeros(0, np.int8),
            meta=meta, data={k: np.zeros(0, dtype=object) for k in data_keys},
        )

    @classmethod
    def concat(cls, parts: list[Boxes], meta: PageMeta | None = None) -> Boxes:
        """Stack boxes of one page. Raises ValueError when page ids or data columns differ
        (a column missing from one part has no values for its boxes)."""
        if not parts:
            if meta is None:
                raise ValueError("concat of no Boxes needs meta")
            return cls.empty(meta)
        ids = {p.meta.page_id for p in parts}
        if len(ids) > 1:
            raise ValueError(f"cannot concat boxes of different pages: {sorted(ids)}")
        columns = [set(p.data) for p in parts]
        keys = set.intersection(*columns)
        if odd := set.union(*columns) - keys:
            raise ValueError(f"cannot concat boxes with different data columns: {sorted(odd)} not in every part")
        return cls(
            xyxy=np.concatenate([p.xyxy for p in parts]).reshape(-1, 4),
            score=np.concatenate([p.score for p in parts]),
            label=np.concatenate([p.label for p in parts]),
            meta=meta or parts[0].meta,
            data={k: np.concatenate([p.data[k] for p in parts]) for k in sorted(keys)},
        )


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


def _column(regions: list[dict], key: str) -> list:
    """Every region's value of `key`, None where missing: a C-level itemgetter pass (2-3x a list
    comprehension of ``r.get``), which falls back to ``r.get`` only when some region lacks it."""
    try:
        return list(map(itemgetter(key), regions))
    except KeyError:
        return [r.get(key) for r in regions]


def region_corners(regions: list[dict]) -> np.ndarray:
    """(N, 4) float64 ``bbox_xyxy`` of regions that passed `validate_source_page` (null -> NaN)."""
    return _corners(_column(regions, "bbox_xyxy"))


def _corners(bboxes: list) -> np.ndarray:
    """(N, 4) float64 corners of ``bbox_xyxy`` lists that passed `validate_source_page`, null -> NaN."""
    try:   # all numbers: one flat C-level pass, half the time of np.array on nested lists
        return np.fromiter(chain.from_iterable(bboxes), np.float64, count=4 * len(bboxes)).reshape(-1, 4)
    except TypeError:   # a null
        return np.array(bboxes, dtype=np.float64).reshape(len(bboxes), 4)


_NUMBER_OR_NULL = frozenset({int, float, type(None)})
_NUMBER = frozenset({int, float})


def _regions_look_valid(regions: list) -> bool:
    """True when every region passes `validate_source_page`'s checks, decided by a few C-level
    passes over the list instead of a Python loop per box and coordinate (22 of 60 ms of
    reading a 6 x 300-box page). False means "look closer": the per-region loop then names
    the first bad region (or accepts what this exact-type test is too strict for)."""
    if not regions:
        return True
    if set(map(type, regions)) != {dict}:
        return False
    bboxes = _column(regions, "bbox_xyxy")
    if set(map(type, bboxes)) != {list} or set(map(len, bboxes)) != {4}:
        return False
    if not set(map(type, chain.from_iterable(bboxes))) <= _NUMBER_OR_NULL:
        return False
    return set(map(type, _column(regions, "label"))) == {str}


def _bad_scores(scores: list) -> np.ndarray:
    """(N,) bool: scores that are present but not a finite number (None is no score, not bad)."""
    if set(map(type, scores)) <= _NUMBER_OR_NULL:
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

    The one place every reader's boxes are repaired (via `io.read_page`):
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
    xyxy = np.array(_column(regions, "bbox_xyxy"), dtype=np.float64)   # null -> NaN
    bad_score = _bad_scores(_column(regions, "score"))
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


_LABEL_CODE = {name: k for k, name in enumerate(labels.LABELS)}
_UNKNOWN = labels.label_code("unknown")


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
    scores = _column(regions, "score")
    bad_score = _bad_scores(scores)
    keep, fixed, _, counts = _repair_boxes(xyxy, bad_score, page["image"])
    if counts:
        xyxy = fixed
        if bad_score.any():
            scores = [None if b else v for v, b in zip(scores, bad_score.tolist())]
        if not keep.all():
            kept = np.flatnonzero(keep).tolist()
            regions, scores, xyxy = [regions[i] for i in kept], [scores[i] for i in kept], xyxy[keep]
    columns = _region_columns(page, source, regions, xyxy, scores)
    columns["data"].update({k: np.full(len(regions), v, object) for k, v in (extra or {}).items()})
    return Boxes(**columns), counts


def boxes_from_page(page: dict, source: str | None = None) -> Boxes:
    """Columns of a source or fused page dict; the canonical ``class`` gives the label code."""
    regions = page["regions"]
    src = source or f"{page['source'].get('stage', '')}/{page['source'].get('variant', '')}"
    xyxy = np.array(_column(regions, "bbox_xyxy"), dtype=np.float64).reshape(len(regions), 4)
    return Boxes(**_region_columns(page, src, regions, xyxy, _column(regions, "score")))


def _region_columns(page: dict, src: str, regions: list[dict], xyxy: np.ndarray, scores: list) -> dict:
    """`Boxes` keyword arguments of a page's regions, given their corners and scores."""
    meta = PageMeta(
        page_id=page["page_id"], width=int(page["image"]["width"]),
        height=int(page["image"]["height"]), source=src, image_path=page["image"]["path"],
    )
    n = len(regions)
    if set(map(type, scores)) <= _NUMBER_OR_NULL:
        score = np.array(scores, dtype=np.float64).astype(np.float32)   # null -> NaN
    else:
        score = np.array([np.nan if s is None else s for s in scores], dtype=np.float32)
    classes = _column(regions, "class")
    if set(map(type, classes)) <= {str}:
        label = np.fromiter(map(_LABEL_CODE.get, classes, repeat(_UNKNOWN)), dtype=np.int8, count=n)
    else:
        label = np.array([_LABEL_CODE.get(c, _UNKNOWN) if type(c) is str else _UNKNOWN for c in classes], dtype=np.int8)
    orders = _column(regions, "order")
    if set(map(type, orders)) <= {type(None)}:
        order = np.full(n, -1, np.int64)
    else:
        order = np.array([-1 if o is None else int(o) for o in orders], dtype=np.int64)
    data = {
        "source": np.full(n, src, dtype=object),
        "raw_label": np.array(_column(regions, "label"), dtype=object).reshape(n),
        "text": np.array(_column(regions, "text"), dtype=object).reshape(n),
        "order": order,
    }
    if any(map(contains, regions, repeat("article"))):  # fused pages: the article each text/title region belongs to
        data["article"] = np.array([-1 if r.get("article") is None else int(r["article"]) for r in regions], np.int64)
    return {"xyxy": xyxy, "score": score, "label": label, "meta": meta, "data": data}


def _round(values: np.ndarray, ndigits: int) -> np.ndarray:
    """`round(v, ndigits)` of every value, vectorised; the same floats as Python's round.

    rint(v * 10**n) / 10**n is the double nearest to the same decimal unless v * 10**n
    lies next to a half, where Python's correctly rounded result is used instead.
    """
    v = np.asarray(values, np.float64)
    scaled = v * 10.0 ** ndigits
    out = np.rint(scaled) / 10.0 ** ndigits
    near_half = np.abs(scaled - np.floor(scaled) - 0.5) < 1e-6
    if near_half.any():
        out[near_half] = [round(x, ndigits) for x in v[near_half].tolist()]
    return out


def regions_from_boxes(boxes: Boxes) -> list[dict]:
    """Region dicts for JSON; columns named in `data` that are JSON-able are carried over.

    Columns are rounded and turned into Python lists once (no per-element numpy access or
    rounding): fused pages hold thousands of regions.
    """
    n = len(boxes)
    names = boxes.label_names.tolist()
    data = boxes.data
    raw = str_list(data["raw_label"].tolist()) if "raw_label" in data else names
    bbox = _round(boxes.xyxy, 2).tolist()
    scores = float_list(_round(boxes.score, 4))
    order = _int_list(data["order"]) if "order" in data else [None] * n
    text = data["text"].tolist() if "text" in data else [None] * n
    keys = ["bbox_xyxy", "label", "class", "score", "order", "text"]
    cols = [bbox, raw, names, scores, order, text]
    for key in ("support", "members"):
        if key in data:
            keys.append(key)
            cols.append(data[key].tolist())
    if "article" in data:
        keys.append("article")
        cols.append(_int_list(data["article"]))
    if keys == _FUSED_KEYS:   # a fused page's regions: a dict display, half the time of dict(zip(...))
        return [{"bbox_xyxy": b, "label": lab, "class": c, "score": s, "order": o, "text": t, "support": sup,
                 "members": m, "article": a} for b, lab, c, s, o, t, sup, m, a in zip(*cols)]
    return list(map(dict, map(zip, repeat(keys), zip(*cols))))   # C-level: 15 % of the per-region loop


_FUSED_KEYS = ["bbox_xyxy", "label", "class", "score", "order", "text", "support", "members", "article"]


# Column-to-list helpers: the per-element Python pass only when a value needs changing (most
# columns need none, and these lists are built for every region of every fused page).
def str_list(values: list) -> list:
    """`values` as ``str``."""
    return values if set(map(type, values)) <= {str} else [str(v) for v in values]


def float_list(column: np.ndarray) -> list:
    """A float column as a list, None for NaN."""
    values = column.tolist()
    return [None if v != v else v for v in values] if np.isnan(column).any() else values


def _int_list(column: np.ndarray) -> list:
    """An int column as a list, None for negatives (no order, no article)."""
    values = column.tolist()
    if column.dtype.kind in "iu" and not (column < 0).any():
        return values
    return [None if v < 0 else int(v) for v in values]


def member_table_records(table: dict, rows: Iterable[int]) -> list[dict]:
    """Member records (``source``, ``bbox_xyxy``, ``label``, ``score``) of `rows` of a fused page's
    member table: columns with strings as codes into ``sources`` and ``labels``
    (`fusion.fuse.member_table`)."""
    sources, names = table["sources"], table["labels"]
    src, bbox, label, score = table["source"], table["bbox_xyxy"], table["label"], table["score"]
    return [{"source": sources[src[i]], "bbox_xyxy": bbox[i], "label": names[label[i]], "score": score[i]}
            for i in rows]
