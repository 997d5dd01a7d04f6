"""Fusion variant specs: parse the config's "fusion" section into frozen dataclasses.

Schema of the "fusion" section (unknown keys anywhere raise a one-line ValueError)::

    {
      "variants": {                      # name -> recipe; names are folder names
        "<name>": {
          "sources": ["<stage>/<variant> glob", ...],   # fnmatch patterns, e.g. "paddle_layout/*"
          "method": "best_single" | "consensus" | "paragraphs",
          "params": {...}                # optional; keys of the method's params below
        }, ...
      },
      "recommended": null | "<name>",    # pin the recommended variant; null = from the data
      "line_source": null | "<stage>/<variant>",  # text-line evidence for metrics and
                                         # column splitting/filling (never a region source)
      "exclude_from_variants": ["glob", ...]      # sources no variant takes regions from
    }

Keys left out take their value from `DEFAULT_FUSION_CFG` (so an empty section means the
shipped variants); an explicit ``"variants": {}`` means none. A variant is skipped (and reported) when one of its patterns matches no source that ran,
so "P2 = Paddle + Dell" is never silently the same as "P1" on a run without Dell.

Params of "consensus" (`ConsensusParams`): `vote` (source families that must agree),
`t_iou`, `t_ioa` (matching thresholds), `t_cover` (share of a box a family's boxes must
cover to count as agreeing), `solo_score` (a single source keeps a box at this score or
more; null = never), `solo_min_size` ([width, height] in median text-line heights: a box of
one family at least this large is kept; null = never), `t_split` (children must cover this
share of a container to replace it), `prefer` ("support": finer boxes win when at least as
supported, ties broken by `granularity`; "fine"; "coarse"; "rank": the box whose source
comes first in `granularity` wins, ties as "fine"), `granularity` (source globs, preferred granularity
first; "auto": the run's source leaderboard order, best first, measured on all pages before
fusing, a page without a source's output counting as an empty page for it), `t_shadow`
(drop a box when better-ranked kept boxes cover more than this share of it; 1 = never), `weights` ({glob: weight} for coordinate averaging), `split_columns` (cut text
regions at column gutters seen in the text lines), `col_gap` (minimum gutter, share of
page width), `col_slack` (share of page width trimmed from each line end before looking
for gutters, since lines of neighbouring columns often overlap a little), `col_tol` (share
of a region's lines that may cross a gutter, e.g. merged by OCR), `col_min_lines` (whole
lines needed on each side of a gutter), `fill_lines` (add boxes that hold text lines no kept region covers),
`fill_min_lines`, `max_page_share` (boxes covering this share of the page or more are left
out, e.g. one page-sized "figure" from a member that failed on the page; 1 = keep all),
`titles` (text regions that title boxes of the sources cover, or that hold 1-3 lines on average
1.8 x the page's median line height, become "headline"). "best_single" takes no params: per page it keeps the one source with the
best no-ground-truth score (`metrics.page_score`).

Params of "paragraphs" (`ParagraphParams`; `fuse.fuse_paragraphs`, lengths in text-line
heights): `granularity` (as above: the first source with text boxes on the page gives the
blocks), `noise_h`, `noise_score`, `noise_cover`, `noise_tall` (a block lower than `noise_h`
or scored below `noise_score` (only when lower than `noise_tall`, if > 0, and only for blocks of
the text-line family, whose score is a text probability) that other families' text covers less
than `noise_cover` of is dropped), `nest_share`, `nest_max_h`, `nest_poke` (a block lower
than `nest_max_h` that holds `nest_share` of another block and reaches `nest_poke` past a
column gutter of the text lines on both sides is replaced by its lines; 0 = never),
`gutter_min_h` (side-by-side text boxes of
another family at least this tall cut a block at the gap between them; 0 = never),
`split_columns`, `col_gap`, `col_slack`, `col_tol`, `col_min_lines` (as above),
`join`, `join_gap`, `join_indent`, `join_short` (blocks of one column are joined when the
lower one's first row is indented less than `join_indent`, the upper one's last row ends less
than `join_short` before the right edge and they are less than `join_gap` apart),
`lines_back`, `lines_back_cover` (text lines no region holds come back as blocks where other
families' text covers `lines_back_cover` of them; off: on nzz it cost 0.04 IoU F1 for no b1x),
`lines_match` (a text line less than half inside the regions that another family's text box
matches at this IoU comes back as a region; 0 = never),
`t_cover` (support), `max_page_share`, `titles`.
"""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass, field, fields, replace
from typing import Any, Literal

from .. import rundir

__all__ = [
    "ConsensusParams",
    "BestSingleParams",
    "ParagraphParams",
    "Variant",
    "FusionConfig",
    "DEFAULT_FUSION_CFG",
    "RECIPES",
    "OPERATOR_VARIANTS",
    "RECIPE_DOC",
    "METHODS",
    "parse_fusion_config",
    "fusion_source_names",
    "match_sources",
    "needs_order",
    "with_order",
    "AUTO",
]


@dataclass(frozen=True)
class ConsensusParams:
    vote: int = 2
    t_iou: float = 0.5
    t_ioa: float = 0.8
    t_cover: float = 0.5
    solo_score: float | None = None
    solo_min_size: tuple[float, float] | None = None
    t_split: float = 0.6
    prefer: Literal["support", "fine", "coarse", "rank"] = "support"
    granularity: tuple[str, ...] = ()
    weights: tuple[tuple[str, float], ...] = ()
    split_columns: bool = False
    col_gap: float = 0.006
    col_slack: float = 0.01
    col_tol: float = 0.1
    col_min_lines: int = 2
    fill_lines: bool = False
    fill_min_lines: int = 2
    t_shadow: float = 1.0
    max_page_share: float = 1.0
    titles: bool = False


# `"granularity": "auto"`: the run's source leaderboard order, resolved before fusing.
AUTO = "auto"


@dataclass(frozen=True)
class BestSingleParams:
    pass


@dataclass(frozen=True)
class ParagraphParams:
    granularity: tuple[str, ...] = ()
    noise_h: float = 0.7
    noise_score: float = 0.96
    noise_cover: float = 0.3
    noise_tall: float = 1.0
    nest_share: float = 0.8
    nest_max_h: float = 4.0
    nest_poke: float = 2.0
    gutter_min_h: float = 4.0
    split_columns: bool = True
    col_gap: float = 0.006
    col_slack: float = 0.01
    col_tol: float = 0.2
    col_min_lines: int = 4
    join: bool = True
    join_gap: float = 0.3
    join_indent: float = 0.6
    join_short: float = 1.0
    lines_back: bool = False
    lines_back_cover: float = 0.5
    lines_match: float = 0.25
    t_cover: float = 0.5
    max_page_share: float = 0.5
    titles: bool = True


METHODS: dict[str, type] = {"consensus": ConsensusParams, "best_single": BestSingleParams,
                            "paragraphs": ParagraphParams}
# Lengths in text-line heights: any number >= 0 (the other numbers are shares in [0, 1]).
_LINE_UNITS = {"nest_max_h", "nest_poke", "noise_h", "gutter_min_h", "noise_tall", "join_gap", "join_indent", "join_short"}


@dataclass(frozen=True)
class Variant:
    name: str
    sources: tuple[str, ...]
    method: str
    params: ConsensusParams | BestSingleParams | ParagraphParams = field(default_factory=BestSingleParams)


@dataclass(frozen=True)
class FusionConfig:
    variants: tuple[Variant, ...]
    recommended: str | None = None
    line_source: str | None = None
    exclude_from_variants: tuple[str, ...] = ()


_TOP_KEYS = {"variants", "recommended", "line_source", "exclude_from_variants"}
_VARIANT_KEYS = {"sources", "method", "params"}

_PADDLE = ["paddle_layout/*", "paddle_vl15/*"]

# The named recipes: one line each in the leaderboard (`RECIPE_DOC`) and the README.
RECIPES: dict[str, dict[str, Any]] = {
    "best_single": {"sources": ["*"], "method": "best_single"},
    "union": {"sources": ["*"], "method": "consensus", "params": {"vote": 1, "max_page_share": 0.5}},
    "vote": {"sources": ["*"], "method": "consensus",
             "params": {"vote": 2, "prefer": "fine", "split_columns": True, "col_gap": 0.0015,
                        "fill_lines": True, "fill_min_lines": 1, "max_page_share": 0.5, "titles": True}},
    "ranked": {"sources": ["*"], "method": "consensus",
               "params": {"vote": 2, "solo_min_size": [3, 1], "prefer": "rank", "granularity": "auto",
                          "t_shadow": 0.3, "t_iou": 0.9, "split_columns": True, "col_min_lines": 8,
                          "max_page_share": 0.5, "titles": True}},
    "paragraphs": {"sources": ["*"], "method": "paragraphs", "params": {"granularity": "auto"}},
}

# The operators' variants (docs/design.md, Labels), exact: the four Paddle sources are the three
# PP-DocLayout models (paddle_layout/*) and PaddleOCR-VL 1.5's layout boxes (paddle_vl15/*).
OPERATOR_VARIANTS: dict[str, dict[str, Any]] = {
    "S1": {"sources": _PADDLE, "method": "best_single"},
    "S2": {"sources": ["dell/*"], "method": "best_single"},
    "S3": {"sources": ["mineru/*"], "method": "best_single"},
    "P1": {"sources": _PADDLE, "method": "consensus", "params": {"vote": 1}},
    "P2": {"sources": _PADDLE + ["dell/*"], "method": "consensus", "params": {"vote": 1}},
    "P3": {"sources": _PADDLE + ["mineru/*"], "method": "consensus", "params": {"vote": 1}},
    "P4": {"sources": _PADDLE + ["dell/*", "mineru/*"], "method": "consensus", "params": {"vote": 1}},
}

RECIPE_DOC: dict[str, str] = {
    "best_single": "per page, the one source with the best no-ground-truth score",
    "union": "every box of every source (one vote), near-identical boxes averaged; most complete, least structured",
    "vote": "boxes two source families agree on, finest covering granularity, cut at column gutters, "
            "uncovered text lines added back",
    "ranked": "the best-structured source (this run's source leaderboard) lays out the page; the others only "
              "fill areas it left empty; page-sized boxes dropped",
    "paragraphs": "the best-structured source's blocks (this run's source leaderboard), noise no other family sees "
                  "dropped, header blocks built around other blocks across a gutter back to lines, cut at column "
                  "gutters, blocks with no paragraph cue between them joined, lines two families box added",
    "S1": "best single Paddle source per page (PP-DocLayout x3, PaddleOCR-VL 1.5)",
    "S2": "Dell (American Stories) only",
    "S3": "MinerU only",
    "P1": "union of the four Paddle sources",
    "P2": "P1 + Dell",
    "P3": "P1 + MinerU",
    "P4": "P1 + Dell + MinerU",
}

# "paragraphs" is pinned: on held-out nzz halves it is the variant ground truth ranks first,
# while the no-GT score's page-level agreement with GT is only moderate
# (benchmarks/nzz_eval.py; README "Measured quality").
DEFAULT_FUSION_CFG: dict[str, Any] = {
    "variants": {**OPERATOR_VARIANTS, **RECIPES},
    "recommended": "paragraphs",
    "line_source": "text_lines/lines",
    "exclude_from_variants": ["text_lines/lines"],
}


def _check_keys(obj: Any, allowed: set[str], where: str) -> dict:
    if not isinstance(obj, dict):
        raise ValueError(f"{where} must be an object, got {type(obj).__name__}")
    unknown = sorted(set(obj) - allowed)
    if unknown:
        raise ValueError(f"{where}: unknown key(s) {unknown}; allowed: {sorted(allowed)}")
    return obj


def _str_list(value: Any, where: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ValueError(f"{where} must be a list of strings, got {value!r}")
    return tuple(value)


def _parse_params(method: str, raw: Any, where: str) -> ConsensusParams | BestSingleParams | ParagraphParams:
    cls = METHODS[method]
    names = {f.name: f for f in fields(cls)}
    raw = _check_keys(raw or {}, set(names), where)
    values: dict[str, Any] = {}
    for key, value in raw.items():
        if key == "granularity":
            values[key] = (AUTO,) if value == AUTO else _str_list(value, f"{where}.granularity")
        elif key == "weights":
            if not isinstance(value, dict) or not all(isinstance(w, (int, float)) for w in value.values()):
                raise ValueError(f"{where}.weights must map source globs to numbers")
            values[key] = tuple((str(k), float(w)) for k, w in value.items())
        elif key == "prefer":
            if value not in ("support", "fine", "coarse", "rank"):
                raise ValueError(f"{where}.prefer must be support|fine|coarse|rank, got {value!r}")
            values[key] = value
        elif key in ("split_columns", "fill_lines", "titles", "join", "lines_back"):
            if not isinstance(value, bool):
                raise ValueError(f"{where}.{key} must be true or false, got {value!r}")
            values[key] = value
        elif key in ("vote", "fill_min_lines", "col_min_lines"):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{where}.{key} must be an integer >= 1, got {value!r}")
            values[key] = value
        elif key in ("solo_score", "solo_min_size") and value is None:
            values[key] = None
        elif key == "solo_min_size":
            if (not isinstance(value, list) or len(value) != 2
                    or not all(isinstance(v, (int, float)) and not isinstance(v, bool) and v >= 0 for v in value)):
                raise ValueError(f"{where}.solo_min_size must be [width, height] in text-line heights (>= 0), "
                                 f"got {value!r}")
            values[key] = (float(value[0]), float(value[1]))
        elif key in _LINE_UNITS:
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
                raise ValueError(f"{where}.{key} must be a number >= 0 (text-line heights), got {value!r}")
            values[key] = float(value)
        else:
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= 1:
                raise ValueError(f"{where}.{key} must be a number in [0, 1], got {value!r}")
            values[key] = float(value)
    return cls(**values)


def parse_fusion_config(cfg: dict) -> FusionConfig:
    """Validate the "fusion" config section and freeze it.

    Raises:
        ValueError: one line naming the bad key or value and what is allowed.
    """
    given = _check_keys(cfg, _TOP_KEYS, "fusion")
    cfg = {**DEFAULT_FUSION_CFG, **given}
    if "recommended" not in given and cfg["recommended"] not in (cfg.get("variants") or {}):
        cfg["recommended"] = None     # the default pin names a shipped recipe this config dropped
    raw_variants = _check_keys(cfg.get("variants", {}), set(cfg.get("variants", {}) or {}), "fusion.variants")
    variants = []
    for name, spec in raw_variants.items():
        where = f"fusion.variants.{name}"
        if not rundir.is_folder_name(name):
            raise ValueError(f"{where}: variant names must be plain folder names ({rundir.FOLDER_NAME_RULE})")
        spec = _check_keys(spec, _VARIANT_KEYS, where)
        method = spec.get("method")
        if method not in METHODS:
            raise ValueError(f"{where}.method must be one of {sorted(METHODS)}, got {method!r}")
        sources = _str_list(spec.get("sources"), f"{where}.sources")
        if not sources:
            raise ValueError(f"{where}.sources must name at least one source glob")
        variants.append(Variant(name, sources, method, _parse_params(method, spec.get("params"), f"{where}.params")))
    recommended = cfg.get("recommended")
    if recommended is not None and recommended not in raw_variants:
        raise ValueError(f"fusion.recommended {recommended!r} is not a variant; choose from {sorted(raw_variants)}")
    line_source = cfg.get("line_source")
    if line_source is not None and not isinstance(line_source, str):
        raise ValueError(f"fusion.line_source must be a '<stage>/<variant>' string or null, got {line_source!r}")
    exclude = _str_list(cfg.get("exclude_from_variants", []), "fusion.exclude_from_variants")
    return FusionConfig(tuple(variants), recommended, line_source, exclude)


def fusion_source_names(cfg: dict) -> list[tuple[str, str]]:
    """(key, source name or glob) of every source the section itself writes: a variant's
    ``sources``, a ``granularity`` list, ``line_source``, ``exclude_from_variants``. The config
    refuses one that no model stage makes (`builtin.unmatched_source`): a typo there
    ('tesseract/blokcs') left its variant skipped at every fusion, or the pages fused without
    line evidence, with exit 0. The default section's operator variants (Dell, MinerU...) are
    not the config's words and are not listed. `cfg`: a section `parse_fusion_config` accepted."""
    named = []
    for name, spec in (cfg.get("variants") or {}).items():
        named += [(f"fusion.variants.{name}.sources", p) for p in spec["sources"]]
        granularity = (spec.get("params") or {}).get("granularity", AUTO)
        if granularity != AUTO:
            named += [(f"fusion.variants.{name}.params.granularity", p) for p in granularity]
    if cfg.get("line_source") is not None:
        named.append(("fusion.line_source", cfg["line_source"]))
    return named + [("fusion.exclude_from_variants", p) for p in cfg.get("exclude_from_variants", [])]


def match_sources(variant: Variant, available: list[str], exclude: tuple[str, ...] = ()) -> tuple[list[str], str | None]:
    """Sources of `available` the variant takes regions from, and why it is skipped (or None)."""
    pool = [s for s in available if not any(fnmatch.fnmatchcase(s, g) for g in exclude)]
    chosen: list[str] = []
    for pattern in variant.sources:
        hits = [s for s in pool if fnmatch.fnmatchcase(s, pattern)]
        if not hits:
            return [], f"no source matching {pattern!r} ran"
        chosen += [s for s in hits if s not in chosen]
    return sorted(chosen), None


def _wants_order(v: Variant) -> bool:
    return getattr(v.params, "granularity", ()) == (AUTO,)


def needs_order(cfg: FusionConfig) -> bool:
    """True when a variant asks for the source leaderboard order (`"granularity": "auto"`)."""
    return any(_wants_order(v) for v in cfg.variants)


def with_order(cfg: FusionConfig, order: list[str]) -> FusionConfig:
    """`cfg` with every `"granularity": "auto"` replaced by `order` (exact source names)."""
    variants = tuple(replace(v, params=replace(v.params, granularity=tuple(order))) if _wants_order(v) else v
                     for v in cfg.variants)
    return replace(cfg, variants=variants)
