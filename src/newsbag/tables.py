"""Tables as text: TSV files for the leaderboards, aligned columns for the terminal."""

from __future__ import annotations

import csv
import io
from typing import Sequence

__all__ = ["tsv_text", "aligned_lines"]


def tsv_text(rows: list[dict], columns: list[str]) -> str:
    """TSV text with a header; floats with 4 decimals, None as empty."""
    buf = io.StringIO()
    w = csv.writer(buf, delimiter="\t", lineterminator="\n")
    w.writerow(columns)
    for r in rows:
        w.writerow(["" if r.get(c) is None else (f"{r[c]:.4f}" if isinstance(r[c], float) else r[c]) for c in columns])
    return buf.getvalue()


def aligned_lines(table: Sequence[Sequence[str]]) -> list[str]:
    """Rows of cells as lines whose columns line up (two spaces apart, no trailing blanks)."""
    widths = [max(len(str(c)) for c in col) for col in zip(*table)]
    return ["  ".join(str(c).ljust(w) for c, w in zip(row, widths)).rstrip() for row in table]
