"""Which pages of a model source a call computes: the one rule the run (`orchestrator`) skips and
holds pages by, and the planner (`stages.ModelSources`, read by status, ``run --dry-run`` and the
Slurm plan) counts them by."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, Mapping

from . import freshness, rundir
from .failures import is_held, previous_failure

__all__ = ["plan_page", "SourcePages", "source_pages"]


def plan_page(before: dict | None, fingerprint: str, *, retry_failed: bool) -> Literal["fresh", "retry", "hold"]:
    """What a call does with a page it computes, given its failure record `before` (None: none,
    or ignored for `force`): run it among the `fresh` pages, `retry` it after them, or `hold` it
    failed because it crashed or hung the runner with these inputs (`fingerprint`) last time."""
    if before is None or before.get("error_class") == "NotRun":  # never tried: new
        return "fresh"
    if not retry_failed and is_held(before, fingerprint):
        return "hold"
    return "retry"


@dataclass(frozen=True)
class SourcePages:
    """A source's pages as a call finds them: current ones (skipped), and the others in the order
    it takes them, ``fresh`` then ``retry``; ``hold``: page id -> the failure record of each page
    it leaves failed (it stopped the runner last time); ``failed``: the pages with a failure record
    (none read with `force`), from the one listing of them."""

    current: frozenset[str]
    fresh: tuple[str, ...] = ()
    retry: tuple[str, ...] = ()
    hold: Mapping[str, dict] = field(default_factory=dict)
    failed: frozenset[str] = frozenset()

    @property
    def todo(self) -> frozenset[str]:
        """The pages the call computes."""
        return frozenset(self.fresh + self.retry)


def source_pages(out_dir: Path, prints: Mapping[str, str], *, retry_failed: bool = False, force: bool = False,
                 reports: list[dict] | None = None, first: str | None = None,
                 now: dict[str, list[int]] | None = None) -> SourcePages:
    """The pages of `prints` (page id -> the source page's fingerprint now, in the call's order) as
    a call with `retry_failed` and `force` takes them from `out_dir`: those not current
    (`freshness.current_source_pages`; ``reports``, ``first``, ``now`` as there), all of them
    with `force`, each planned by `plan_page`. Only the pages with a failure record are read, and
    `force` reads none."""
    out_dir = Path(out_dir)
    current = frozenset(freshness.current_source_pages(out_dir, dict(prints), reports, first, now))
    failed = set() if force else rundir.page_files(out_dir / rundir.FAILED_DIR)
    planned: dict[str, list[str]] = {"fresh": [], "retry": [], "hold": []}
    held: dict[str, dict] = {}
    for page_id, fingerprint in prints.items():
        if page_id in current and not force:
            continue
        before = previous_failure(out_dir, page_id) if page_id in failed else None
        kind = plan_page(before, fingerprint, retry_failed=retry_failed)
        planned[kind].append(page_id)
        if kind == "hold":
            held[page_id] = before
    return SourcePages(current, tuple(planned["fresh"]), tuple(planned["retry"]), held, frozenset(failed & prints.keys()))
