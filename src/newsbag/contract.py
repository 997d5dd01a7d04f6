"""The single contract: `Boxes` (arrays plus metadata) and the source-page JSON schema."""

from __future__ import annotations

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
    "NUMBER_OR_NULL",
    "boxes_from_page",
    "region_values",
    "region_columns",
    "region_corners",
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
# Overlapping box pairs, on one page's repaired boxes (`page_reader`) and on a page's sources pooled
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


def region_values(regions: list[dict], key: str) -> list:
    """Every region's value of `key`, None where missing: a C-level itemgetter pass (2-3x a list
    comprehension of ``r.get``), which falls back to ``r.get`` only when some region lacks it."""
    try:
        return list(map(itemgetter(key), regions))
    except KeyError:
        return [r.get(key) for r in regions]


def region_corners(regions: list[dict]) -> np.ndarray:
    """(N, 4) float64 ``bbox_xyxy`` of regions that passed `page_repair.validate_source_page` (null -> NaN)."""
    return _corners(region_values(regions, "bbox_xyxy"))


def _corners(bboxes: list) -> np.ndarray:
    """(N, 4) float64 corners of ``bbox_xyxy`` lists that passed `page_repair.validate_source_page`, null -> NaN."""
    try:   # all numbers: one flat C-level pass, half the time of np.array on nested lists
        return np.fromiter(chain.from_iterable(bboxes), np.float64, count=4 * len(bboxes)).reshape(-1, 4)
    except TypeError:   # a null
        return np.array(bboxes, dtype=np.float64).reshape(len(bboxes), 4)


# The types of a JSON number or null: whole columns are checked by their set of exact types.
NUMBER_OR_NULL = frozenset({int, float, type(None)})
_NUMBER = frozenset({int, float})


_LABEL_CODE = {name: k for k, name in enumerate(labels.LABELS)}
_UNKNOWN = labels.label_code("unknown")


def boxes_from_page(page: dict, source: str | None = None) -> Boxes:
    """Columns of a source or fused page dict; the canonical ``class`` gives the label code."""
    regions = page["regions"]
    src = source or f"{page['source'].get('stage', '')}/{page['source'].get('variant', '')}"
    xyxy = np.array(region_values(regions, "bbox_xyxy"), dtype=np.float64).reshape(len(regions), 4)
    return Boxes(**region_columns(page, src, regions, xyxy, region_values(regions, "score")))


def region_columns(page: dict, src: str, regions: list[dict], xyxy: np.ndarray, scores: list) -> dict:
    """`Boxes` keyword arguments of a page's regions, given their corners and scores."""
    meta = PageMeta(
        page_id=page["page_id"], width=int(page["image"]["width"]),
        height=int(page["image"]["height"]), source=src, image_path=page["image"]["path"],
    )
    n = len(regions)
    if set(map(type, scores)) <= NUMBER_OR_NULL:
        score = np.array(scores, dtype=np.float64).astype(np.float32)   # null -> NaN
    else:
        score = np.array([np.nan if s is None else s for s in scores], dtype=np.float32)
    classes = region_values(regions, "class")
    if set(map(type, classes)) <= {str}:
        label = np.fromiter(map(_LABEL_CODE.get, classes, repeat(_UNKNOWN)), dtype=np.int8, count=n)
    else:
        label = np.array([_LABEL_CODE.get(c, _UNKNOWN) if type(c) is str else _UNKNOWN for c in classes], dtype=np.int8)
    orders = region_values(regions, "order")
    if set(map(type, orders)) <= {type(None)}:
        order = np.full(n, -1, np.int64)
    else:
        order = np.array([-1 if o is None else int(o) for o in orders], dtype=np.int64)
    data = {
        "source": np.full(n, src, dtype=object),
        "raw_label": np.array(region_values(regions, "label"), dtype=object).reshape(n),
        "text": np.array(region_values(regions, "text"), dtype=object).reshape(n),
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
