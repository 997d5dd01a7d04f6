"""`newsbag status`: pages done / failed / pending per stage and source, read from the run dir."""

from __future__ import annotations

from pathlib import Path

from .io import read_json
from .orchestrator import FAILED_DIR, discover_sources, sources_root
from .pages import read_pages

__all__ = ["collect_status"]


def _page_files(folder: Path) -> set[str]:
    """Finished page ids in an output folder (atomic writes: a visible .json is complete)."""
    if not folder.is_dir():
        return set()
    return {p.stem for p in folder.glob("*.json") if not p.name.startswith((".", "run_report", "run_meta"))}


def collect_status(run_dir: Path) -> dict:
    """Counts per source, fusion variant and review; failures with their one-line errors."""
    run_dir = Path(run_dir)
    ids = {p.page_id for p in read_pages(run_dir)}
    expected: dict[str, str] = {}
    resolved = run_dir / "config.resolved.json"
    if resolved.exists():
        for stage in read_json(resolved).get("stages", []):
            for variant in stage.get("variants", {}) if stage.get("kind", "model") == "model" else ():
                expected[f"{stage['name']}/{variant}"] = stage["name"]
    found = set(discover_sources(run_dir))
    sources = []
    for name in sorted(set(expected) | found):
        folder = sources_root(run_dir) / name
        done = _page_files(folder) & ids
        failed_files = {p.stem: p for p in (folder / FAILED_DIR).glob("*.json") if not p.name.endswith(".invalid.json")}
        failed = {k: v for k, v in failed_files.items() if k in ids and k not in done}
        errors = {}
        for page_id, path in sorted(failed.items())[:20]:
            try:
                errors[page_id] = read_json(path).get("error")
            except (OSError, ValueError):
                errors[page_id] = "(unreadable failure record)"
        sources.append({"source": name, "done": len(done), "failed": len(failed),
                        "pending": len(ids - done - set(failed)), "errors": errors})
    fusion_dir = run_dir / "outputs" / "fusion"
    fusion = [{"variant": d.name, "done": len(_page_files(d) & ids)}
              for d in sorted(fusion_dir.glob("*")) if d.is_dir() and not d.name.startswith("_")]
    summary = fusion_dir / "summary.json"
    recommended = read_json(summary).get("recommended_variant") if summary.exists() else None
    boards = sum(1 for p in (run_dir / "review" / "pages").glob("*/board.png")) if (run_dir / "review").exists() else 0
    return {"run_dir": str(run_dir), "pages": len(ids), "sources": sources, "fusion": fusion,
            "recommended_variant": recommended, "review_boards": boards,
            "gallery": (run_dir / "review" / "index.html").exists()}
