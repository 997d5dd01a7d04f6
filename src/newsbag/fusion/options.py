"""Fusion variant specs: parse the config's "fusion" section into frozen dataclasses.

The section's keys are declared on `FusionSection`, a variant's on `VariantFields` and each
method's params on its params dataclass (unknown keys anywhere raise a one-line ValueError
offering the nearest key)::

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

Params of each method are declared on `ConsensusParams` and `ParagraphParams` (type, unit,
range, what each does; `builtin.options_markdown("fusion")` renders them as tables);
"best_single" takes none: per page it keeps the one source with the best no-ground-truth score
(`metrics.page_score`).
"""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from ..folder_names import FOLDER_NAME_RULE, is_folder_name
from ..config_fields import STAGE_KEYS
from ..options import REQUIRED, option, parse, values

__all__ = [
    "ConsensusParams",
    "BestSingleParams",
    "ParagraphParams",
    "FusionSection",
    "VariantFields",
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


_LINES = "text-line heights"
_WIDTH = "share of the page width"


def _share(default: float, doc: str, **declared) -> Any:
    """An option that is a share in [0, 1]."""
    return option("number", default, doc, minimum=0, maximum=1, **declared)


def _lines(default: float, doc: str) -> Any:
    """An option that is a length in text-line heights (the page's median line height)."""
    return option("number", default, doc, unit=_LINES, minimum=0)


def _granularity() -> Any:
    return option("strings", (), 'source globs, preferred granularity first; "auto": the run\'s source leaderboard '
                  "order, best first, measured on all pages before fusing", literal="auto")


# The column-cut options both methods share (their col_tol and col_min_lines defaults differ).
def _col_gap() -> Any:
    return _share(0.006, "narrowest gutter between columns", unit=_WIDTH)


def _col_slack() -> Any:
    return _share(0.01, "trimmed from each line end before looking for gutters (lines of neighbouring columns "
                  "often overlap a little)", unit=_WIDTH)


def _col_tol(default: float) -> Any:
    return _share(default, "share of a region's lines that may cross a gutter (merged by OCR)")


def _col_min_lines(default: int) -> Any:
    return option("integer", default, "whole lines needed on each side of a gutter", minimum=1)


@dataclass(frozen=True)
class ConsensusParams:
    vote: int = option("integer", 2, "source families that must agree on a box", minimum=1)
    t_iou: float = _share(0.5, "IoU at which two boxes match")
    t_ioa: float = _share(0.8, "share of the smaller box inside the larger at which two boxes match")
    t_cover: float = _share(0.5, "share of a box a family's boxes must cover to count as agreeing")
    solo_score: float | None = _share(None, "a box one source alone has is kept at this score or more; null: never",
                                      nullable=True)
    solo_min_size: tuple[float, float] | None = option(
        "pair", None, "[width, height]: a box of one family at least this large is kept; null: never",
        unit=_LINES, minimum=0, nullable=True)
    t_split: float = _share(0.6, "children must cover this share of a container to replace it")
    prefer: Literal["support", "fine", "coarse", "rank"] = option(
        "string", "support", "support: finer boxes win when at least as supported (ties by granularity); fine; "
        "coarse; rank: the box whose source comes first in granularity wins",
        choices=("support", "fine", "coarse", "rank"))
    granularity: tuple[str, ...] = _granularity()
    weights: tuple[tuple[str, float], ...] = option("weights", (), "{source glob: weight} for averaging coordinates")
    split_columns: bool = option("boolean", False, "cut text regions at column gutters seen in the text lines")
    col_gap: float = _col_gap()
    col_slack: float = _col_slack()
    col_tol: float = _col_tol(0.1)
    col_min_lines: int = _col_min_lines(2)
    fill_lines: bool = option("boolean", False, "add boxes around text lines no kept region covers")
    fill_min_lines: int = option("integer", 2, "fewest lines such a box holds", minimum=1)
    t_shadow: float = _share(1.0, "drop a box when better-ranked kept boxes cover more than this share of it; 1: never")
    max_page_share: float = _share(1.0, "boxes covering this share of the page or more are left out (one page-sized "
                                   "figure of a member that failed); 1: keep all")
    titles: bool = option("boolean", False, "text regions that title boxes cover, or holding 1-3 lines 1.8x the "
                          "median height, become headlines")


# `"granularity": "auto"`: the run's source leaderboard order, resolved before fusing.
AUTO = "auto"


@dataclass(frozen=True)
class BestSingleParams:
    pass


@dataclass(frozen=True)
class ParagraphParams:
    granularity: tuple[str, ...] = _granularity()
    noise_h: float = _lines(0.7, "a block lower than this that other families' text covers less than noise_cover "
                            "of is dropped")
    noise_score: float = _share(0.96, "a text-line family's block scored below this (and lower than noise_tall) "
                                "that other families' text covers less than noise_cover of is dropped")
    noise_cover: float = _share(0.3, "cover by other families' text that keeps a noise candidate")
    noise_tall: float = _lines(1.0, "noise_score applies to blocks lower than this only; 0: to all")
    nest_share: float = _share(0.8, "a low block holding this share of another block and reaching past a gutter "
                               "on both sides is replaced by its lines")
    nest_max_h: float = _lines(4.0, "highest such a nesting block is")
    nest_poke: float = _lines(2.0, "how far past the gutter it reaches; 0: never")
    gutter_min_h: float = _lines(4.0, "side-by-side text boxes of another family at least this tall cut a block at "
                                 "the gap between them; 0: never")
    split_columns: bool = option("boolean", True, "cut blocks at column gutters seen in the text lines")
    col_gap: float = _col_gap()
    col_slack: float = _col_slack()
    col_tol: float = _col_tol(0.2)
    col_min_lines: int = _col_min_lines(4)
    join: bool = option("boolean", True, "join blocks of one column with no paragraph cue between them")
    join_gap: float = _lines(0.3, "farthest apart two joined blocks are")
    join_indent: float = _lines(0.6, "the lower block's first row is indented less than this")
    join_short: float = _lines(1.0, "the upper block's last row ends less than this before the right edge")
    lines_back: bool = option("boolean", False, "text lines no region holds come back as blocks where other "
                              "families' text covers them (off: on nzz it cost 0.04 IoU F1)")
    lines_back_cover: float = _share(0.5, "cover by other families' text that brings a line back")
    lines_match: float = _share(0.25, "a text line less than half inside the regions another family's text box "
                                "matches at this IoU comes back as a region; 0: never")
    t_cover: float = _share(0.5, "share of a box a family's boxes must cover to count as support")
    max_page_share: float = _share(0.5, "boxes covering this share of the page or more are left out")
    titles: bool = option("boolean", True, "text regions that title boxes cover, or of few tall lines, become "
                          "headlines")


METHODS: dict[str, type] = {"consensus": ConsensusParams, "best_single": BestSingleParams,
                            "paragraphs": ParagraphParams}


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

@dataclass(frozen=True)
class FusionSection:
    """The fusion stage's own keys; a key left out takes its default (`DEFAULT_FUSION_CFG`)."""

    variants: dict = option("object", {**OPERATOR_VARIANTS, **RECIPES}, "name → variant (its keys below); names "
                            "are folder names; `{}`: none", shown="the operators' variants and the recipes")
    # "paragraphs" is pinned: on held-out nzz halves it is the variant ground truth ranks first,
    # while the no-GT score's page-level agreement with GT is only moderate
    # (benchmarks/nzz_eval.py; README "Measured quality").
    recommended: str | None = option("string", "paragraphs", "the recommended variant, pinned; null: chosen from "
                                     "the data (left out while `variants` lacks the default: null)", nullable=True)
    line_source: str | None = option("string", "text_lines/lines", "text-line evidence for metrics and column "
                                     "splitting and filling (never a region source)", shape="'<stage>/<variant>'",
                                     nullable=True)
    exclude_from_variants: tuple[str, ...] = option("strings", ["text_lines/lines"], "source globs no variant "
                                                    "takes regions from")


@dataclass(frozen=True, kw_only=True)
class VariantFields:
    """One fused variant's recipe: the `FusionSection.variants` entries."""

    sources: tuple[str, ...] = option("strings", REQUIRED, "`<stage>/<variant>` globs (fnmatch) of the sources "
                                      "it takes regions from; a variant is skipped when one matches no source "
                                      "that ran", min_items=1)
    method: str = option("string", REQUIRED, "how the sources' boxes are fused (the methods' params below)",
                         choices=tuple(METHODS))
    params: dict | None = option("object", None, "the method's params; null: its defaults", nullable=True)


DEFAULT_FUSION_CFG: dict[str, Any] = values(FusionSection())


def parse_fusion_config(cfg: dict) -> FusionConfig:
    """Validate the "fusion" config section (`FusionSection`, the stage entry's own keys aside) and freeze it.

    Raises:
        ValueError: one line naming the bad key or value and what is allowed.
    """
    section = parse(FusionSection, cfg, "fusion", STAGE_KEYS)
    recommended = section.recommended
    if "recommended" not in cfg and recommended not in section.variants:
        recommended = None     # the default pin names a shipped recipe this config dropped
    variants = tuple(_variant(name, spec) for name, spec in section.variants.items())
    if recommended is not None and recommended not in section.variants:
        raise ValueError(f"fusion.recommended {recommended!r} is not a variant; choose from {sorted(section.variants)}")
    return FusionConfig(variants, recommended, section.line_source, tuple(section.exclude_from_variants))


def _variant(name: str, spec: Any) -> Variant:
    """The variant `name` of the section (`VariantFields`), its params parsed by its method's declaration."""
    where = f"fusion.variants.{name}"
    if not is_folder_name(name):
        raise ValueError(f"{where}: variant names must be plain folder names ({FOLDER_NAME_RULE})")
    recipe = parse(VariantFields, spec, where)
    return Variant(name, recipe.sources, recipe.method, parse(METHODS[recipe.method], recipe.params or {},
                                                              f"{where}.params"))


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
