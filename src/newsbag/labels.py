"""Label vocabularies: canonical label -> coarse class (docs/design.md, Labels).

The raw -> canonical table of each family lives in its own ``runners/<family>.tool.json``
under ``labels`` (read by ``tool_spec.label_table``), so a new family is one script plus one
declaration. Nothing is guessed from substrings: a raw label missing from its family's
table maps to ``unknown`` and is reported, never silently to text.
"""

from __future__ import annotations

import functools
from types import MappingProxyType
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np

__all__ = [
    "CANONICAL",
    "LABELS",
    "COARSE_CLASSES",
    "COARSE",
    "coarse_for",
    "coarse_codes",
    "label_code",
]

# canonical label -> coarse class. Order fixes the int8 codes used by `Boxes.label`.
CANONICAL: MappingProxyType[str, str] = MappingProxyType({
    "text": "text",
    "byline": "text",
    "caption": "text",
    "headline": "title",
    "title": "title",
    "image": "image",
    "advertisement": "image",
    "table": "table",
    "masthead": "other",
    "header": "other",
    "footer": "other",
    "page_number": "other",
    "formula": "other",
    "separator": "other",
    "unknown": "other",
    # A detected text line is evidence of text, not a region: its own coarse class keeps it
    # out of block matching while metrics can still use it.
    "text_line": "line",
})
LABELS: tuple[str, ...] = tuple(CANONICAL)
COARSE_CLASSES: tuple[str, ...] = ("text", "title", "image", "table", "other", "line")
# coarse class -> its int code, the index into COARSE_CLASSES (what `coarse_codes` returns).
COARSE: MappingProxyType[str, int] = MappingProxyType({name: k for k, name in enumerate(COARSE_CLASSES)})

def coarse_for(canonical: str) -> str:
    return CANONICAL.get(canonical, "other")


def coarse_codes(label: np.ndarray) -> np.ndarray:
    """(N,) int8 coarse codes (`COARSE`) of (N,) label codes into `LABELS` (`Boxes.label`)."""
    return _coarse_of_label()[label.astype("intp")]


@functools.cache
def _coarse_of_label() -> np.ndarray:
    # numpy imported here, not with the module: the config reads the label tables above, and
    # loading a config imports no array library (tests/test_builtin.py).
    import numpy as np

    return np.array([COARSE[coarse_for(name)] for name in LABELS], np.int8)


def label_code(canonical: str) -> int:
    """int8 code of a canonical label (``unknown`` for anything else)."""
    try:
        return LABELS.index(canonical)
    except ValueError:
        return LABELS.index("unknown")
