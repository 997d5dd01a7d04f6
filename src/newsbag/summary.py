"""The end of a call: what it did, which layout to trust and where to look, as one JSON object and as lines."""

from __future__ import annotations

from pathlib import Path

from . import rundir

__all__ = ["call_summary", "summary_lines", "DEGENERATE_MEANS"]

# What a degenerate member (`fusion.degenerate`) means for the person reading the summary.
DEGENERATE_MEANS = ("it failed on those pages without saying so (one page-sized box, or almost no text, where the "
                    "other members find dozens of regions); its boxes there are no layout, so read its scores with "
                    "care, or leave it out of the config")


def call_summary(command: str, run_dir: Path, summary) -> dict:
    """The facts a call ends with: its page counts and times (`summary`, a `pipeline.RunSummary`),
    then what the run dir now holds: fusion's recommendation and best source, the gallery,
    exports and transcripts to open, and, after a call that transcribed, what shows older text
    (`transcription.views.stale_text_views`)."""
    run_dir = Path(run_dir)
    fusion = rundir.fusion_summary(run_dir)
    recommended = None
    if fusion:
        variant = fusion.get("recommended_variant")
        row = next((r for r in fusion.get("variant_leaderboard") or () if r.get("name") == variant), {})
        recommended = {"variant": variant, "by": fusion.get("recommended_by"), "score": row.get("score")}
    best = min((r for r in fusion.get("source_leaderboard") or () if r.get("rank") is not None),
               key=lambda r: r["rank"], default=None)
    look_at = {"gallery": rundir.gallery_path(run_dir), "exports": rundir.exports_dir(run_dir)}
    if recommended and recommended["variant"]:
        look_at["transcripts"] = rundir.transcript_dir(run_dir, recommended["variant"])
    return {
        "command": command, "run_dir": str(run_dir), "config": summary.config,
        "pages": summary.pages, **summary.page_counts(), "rejected": len(summary.rejected),
        "nothing_to_do": summary.did_nothing(),
        "seconds": round(summary.seconds, 2),
        "stage_seconds": {k: round(v, 2) for k, v in summary.stage_seconds.items()},
        "recommended": recommended,
        "best_source": None if best is None else {"name": best.get("name"), "score": best.get("score")},
        "degenerate": fusion.get("degenerate_sources") or {},
        "look_at": {k: str(p) for k, p in look_at.items() if _has_files(p)},
        "sources": [o.to_json() for o in summary.sources],
        "builtin": {k: {kk: vv for kk, vv in v.items() if not isinstance(vv, list)}
                    for k, v in summary.builtin.items()},
        "errors": summary.errors,
        "stale": _stale_text(run_dir) if "transcription" in summary.builtin_kinds else [],
    }


def _stale_text(run_dir: Path) -> list[dict]:
    from .transcription.views import stale_text_views   # the export and review rules: only after a call that transcribed

    return stale_text_views(run_dir)


def summary_lines(facts: dict) -> list[str]:
    """Lines for a person (stderr) from `call_summary`'s facts: counts and times, the recommendation
    and why, where to look; a call that did nothing says so in one line before where to look."""
    lines = []
    if facts["nothing_to_do"]:
        lines.append(f"nothing to do: {facts['pages']} pages current")
    else:
        stages = ", ".join(f"{k} {_duration(v)}" for k, v in facts["stage_seconds"].items())
        rejected = f", {facts['rejected']} input(s) rejected" if facts["rejected"] else ""
        lines.append(f"{facts['command']}: {facts['pages']} page(s): {facts['ok']} ok, {facts['failed']} failed, "
                     f"{facts['skipped']} skipped{rejected} in {_duration(facts['seconds'])}"
                     + (f" ({stages})" if stages else ""))
        if facts["recommended"] is not None:
            lines.append(_recommendation(facts["recommended"], facts["best_source"]))
        lines += [f"degenerate member {name} on {d.get('pages')} of {facts['pages']} page(s), e.g. {d.get('example')}: "
                  + DEGENERATE_MEANS for name, d in sorted((facts.get("degenerate") or {}).items())]
    where = facts["look_at"]
    parts = [str(where["gallery"])] if "gallery" in where else []
    parts += [f"{name} in {where[name]}" for name in ("exports", "transcripts") if name in where]
    if parts:
        lines.append("look at: " + "; ".join(parts))
    lines += [f"stale: {_what(o)}: run {o['command']}" for o in facts.get("stale") or ()]
    return lines


def _what(stale: dict) -> str:
    """What a `transcription.views.stale_text_views` entry says is stale."""
    if stale["pages"] is None:
        return "the gallery links older transcripts"
    return f"{stale['output']} shows older text on {stale['pages']} page(s)"


def _recommendation(recommended: dict, best: dict | None) -> str:
    """"recommended: V (why, score S); best source: X (score T)"."""
    best_text = "" if best is None else f"; best source: {best['name']}{_score(best['score'], ' (score {})')}"
    if not recommended["variant"]:
        return f"recommended: none (no fused variant has a score){best_text}"
    by = recommended["by"]
    why = {"config": "pinned by the config", "user": "pinned by the user", "score": "highest score"}.get(by, by)
    return f"recommended: {recommended['variant']} ({why}{_score(recommended['score'], ', score {}')}){best_text}"


def _score(value, template: str) -> str:
    return "" if value is None else template.format(f"{value:.3f}")


def _duration(seconds: float) -> str:
    minutes, secs = divmod(seconds, 60)
    return f"{int(minutes)}m{secs:04.1f}s" if minutes else f"{secs:.1f}s"


def _has_files(path: Path) -> bool:
    return path.is_file() or (path.is_dir() and any(path.iterdir()))
