"""No file in src/ or runners/ runs over 500 lines (as ``wc -l`` counts them): a file that long
holds several ideas, and a reader looking for one has to wade through the others."""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
MAX_LINES = 500

def line_count(path: Path) -> int:
    """Lines as ``wc -l`` counts them: newline bytes (a last line without one does not count)."""
    return path.read_bytes().count(b"\n")


def _files() -> dict[str, int]:
    """Every file under src/ and runners/ but caches -> its line count."""
    return {path.relative_to(REPO).as_posix(): line_count(path)
            for folder in ("src", "runners") for path in sorted((REPO / folder).rglob("*"))
            if path.is_file() and "__pycache__" not in path.parts and not path.parent.name.endswith(".egg-info")}


def test_lines_are_counted_as_wc_does(tmp_path):
    (tmp_path / "a").write_bytes(b"one\ntwo\nthree")
    (tmp_path / "b").write_bytes(b"")
    (tmp_path / "c").write_bytes(b"\n\n")
    assert [line_count(tmp_path / n) for n in "abc"] == [2, 0, 2]


def test_no_file_over_500_lines():
    over = {name: n for name, n in _files().items() if n > MAX_LINES}
    assert over == {}, f"files over {MAX_LINES} lines: split them into modules with one job each"

