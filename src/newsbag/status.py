"""`newsbag status`: pages done / failed / pending per stage and source, read from the run dir."""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path

from .config import DEFAULT_MAX_EMPTY_SHARE, builtin_options
from .fusion.stage import fused_status
from .io import read_json
from . import rundir
from .rundir import FAILED_DIR, discover_sources, sources_root
from .pages import read_pages, read_rejected

__all__ = ["collect_status"]


def _page_files(folder: Path) -> set[str]:
    """Finished page ids in an output folder (atomic writes: a visible .json is complete)."""
    if not folder.is_dir():
        return set()
    return {p.stem for p in folder.glob("*.json") if not p.name.startswith((".", "run_report", "run_meta"))}


def _empty_pages(folder: Path) -> dict[str, str]:
    """Pages a runner reported ``empty`` (answered, nothing usable), with the reason, from its reports.

    The run reports (one per shard) are read instead of every page file: cheap at 100k pages.
    """
    empty: dict[str, str] = {}
    for path in sorted(folder.glob("run_report*.json")):
        try:
            pages = read_json(path).get("pages", {})
        except (OSError, ValueError):
            continue
        for page_id, rec in pages.items():
            if isinstance(rec, dict) and rec.get("status") == "empty":
                empty[page_id] = rec.get("reason") or ""
            elif page_id in empty:
                empty.pop(page_id)
    return empty


def collect_status(run_dir: Path) -> dict:
    """Counts per source, fusion variant and review; failures with their one-line errors."""
    run_dir = Path(run_dir)
    ids = {p.page_id for p in read_pages(run_dir)}
    expected: dict[str, str] = {}
    max_empty: dict[str, float] = {}
    fusion_cfg: dict = {}  # no fusion stage in the config: `newsbag fuse` uses the defaults
    resolved = run_dir / "config.resolved.json"
    if resolved.exists():
        for stage in read_json(resolved).get("stages", []):
            if stage.get("kind") == "fusion":
                fusion_cfg = builtin_options(stage)
            for variant in stage.get("variants", {}) if stage.get("kind", "model") == "model" else ():
                expected[f"{stage['name']}/{variant}"] = stage["name"]
                max_empty[f"{stage['name']}/{variant}"] = float(stage.get("max_empty_share", DEFAULT_MAX_EMPTY_SHARE))
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
        empty = {k: v for k, v in _empty_pages(folder).items() if k in done}
        share = len(empty) / len(done) if done else None
        limit = max_empty.get(name, DEFAULT_MAX_EMPTY_SHARE)
        sources.append({"source": name, "done": len(done), "failed": len(failed),
                        "pending": len(ids - done - set(failed)), "errors": errors,
                        "empty": len(empty), "empty_share": None if share is None else round(share, 4),
                        "flagged": share is not None and share > limit,
                        "empty_reasons": dict(sorted(empty.items())[:5])})
    fusion = fused_status(run_dir, sorted(ids), fusion_cfg)
    recommended = rundir.recommended_variant(run_dir)
    boards, review_failed = _review_status(run_dir, ids)
    rejected = [asdict(r) for r in read_rejected(run_dir)]
    by_kind: dict[str, int] = {}
    for r in rejected:
        by_kind[r["kind"]] = by_kind.get(r["kind"], 0) + 1
    return {"run_dir": str(run_dir), "pages": len(ids), "rejected": rejected, "rejected_by_kind": by_kind,
            "sources": sources, "fusion": fusion,
            "recommended_variant": recommended, "review_boards": boards, "review_failed": review_failed,
            "gallery": rundir.gallery_path(run_dir).exists()}


def _review_status(run_dir: Path, ids: set[str]) -> tuple[int, int]:
    """(boards drawn, pages whose last review failed) among the manifest's pages."""
    pages = rundir.review_dir(run_dir) / "pages"
    boards = sum(1 for p in pages.glob("*/board.png") if p.parent.name in ids)
    failed = sum(1 for p in pages.glob(f"*/{rundir.REVIEW_FAILED}") if p.parent.name in ids)
    return boards, failed
