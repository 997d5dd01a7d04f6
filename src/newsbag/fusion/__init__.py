"""Fusion of source layouts: geometry, matching, variants, reading order and metrics."""

from .fuse import VARIANTS, describe, fuse_best_single, fuse_consensus
from .variants import DEFAULT_FUSION_CFG, parse_fusion_config

__all__ = ["VARIANTS", "DEFAULT_FUSION_CFG", "describe", "fuse_best_single", "fuse_consensus", "parse_fusion_config"]
