"""The export stage's declared options (stdlib only: the config checks them without importing the writers)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from ..config_fields import STAGE_KEYS
from ..options import option, parse
from . import FORMATS

__all__ = ["ExportParams", "parse_export_cfg", "export_variant_names"]


@dataclass(frozen=True)
class ExportParams:
    """Export options: formats, fused variants (None = the recommended one, or all when the
    run has no recommendation; ("all",) = every fused variant) and whether source layouts go too."""

    formats: tuple[str, ...] = option("strings", ("page-xml", "alto", "coco"), "formats written",
                                      choices=tuple(FORMATS), min_items=1)
    variants: tuple[str, ...] | None = option("strings", None, 'fused variants exported; null: the recommended '
                                              'one (all without one); ["all"]: every one', nullable=True)
    sources: bool = option("boolean", False, "also export every source layout")


def parse_export_cfg(cfg: Mapping[str, Any]) -> ExportParams:
    """Validated export options (formats once each); raises a one-line ValueError on unknown keys or bad values."""
    params = parse(ExportParams, cfg, "export stage", STAGE_KEYS)
    return ExportParams(tuple(dict.fromkeys(params.formats)), params.variants, params.sources)


def export_variant_names(cfg: Mapping[str, Any]) -> list[tuple[str, str]]:
    """(key, name) of the fused variants valid export options name (`builtin.unmatched_variant`):
    a typo'd one was skipped with a warning, exit 0, and nothing of it exported."""
    return [("export.variants", v) for v in cfg.get("variants") or () if v != "all"]
