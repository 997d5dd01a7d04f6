"""Tables as text: TSV files for the leaderboards, aligned columns for the terminal."""

from __future__ import annotations

import csv
import io
from typing import Callable, Sequence, TextIO

__all__ = ["tsv_text", "tsv_writer", "aligned_lines", "number_cell"]


def tsv_writer(fh: TextIO, columns: list[str]) -> Callable[[dict], None]:
    """Write the header to an open text file; return a function that writes one row dict
    (floats with 4 decimals, None as empty), so a table can be written row by row."""
    w = csv.writer(fh, delimiter="\t", lineterminator="\n")
    w.writerow(columns)

    def write(r: dict) -> None:
        w.writerow(["" if r.get(c) is None else (f"{r[c]:.4f}" if isinstance(r[c], float) else r[c]) for c in columns])

    return write


def tsv_text(rows: list[dict], columns: list[str]) -> str:
    """TSV text with a header (`tsv_writer` into a string)."""
    buf = io.StringIO()
    write = tsv_writer(buf, columns)
    for r in rows:
        write(r)
    return buf.getvalue()


def aligned_lines(table: Sequence[Sequence[str]]) -> list[str]:
    """Rows of cells as lines whose columns line up (two spaces apart, no trailing blanks)."""
    widths = [max(len(str(c)) for c in col) for col in zip(*table)]
    return ["  ".join(str(c).ljust(w) for c, w in zip(row, widths)).rstrip() for row in table]


def number_cell(value: float | None) -> str:
    """A measure in a terminal table: 4 decimals, "-" for none."""
    return "-" if value is None else f"{value:.4f}"
