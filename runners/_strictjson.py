"""JSON without NaN or Infinity tokens: strict readers refuse them."""

from __future__ import annotations

import json
import math


def _finite(obj):
    """`obj` with NaN/inf floats as None: strict JSON readers refuse bare NaN tokens."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: _finite(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_finite(v) for v in obj]
    return obj


def dumps_strict(obj, **kwargs) -> str:
    """JSON without NaN/Infinity tokens (written as null); one plain dumps when there are none."""
    try:
        return json.dumps(obj, allow_nan=False, **kwargs)
    except ValueError:
        return json.dumps(_finite(obj), allow_nan=False, **kwargs)
