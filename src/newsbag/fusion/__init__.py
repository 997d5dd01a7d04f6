"""Fusion of source layouts: geometry, matching, variants, reading order and metrics.

Its modules are imported one by one (`options` with the config, the array ones when the stage
runs), so the package itself imports none of them.
"""

__all__: list[str] = []
