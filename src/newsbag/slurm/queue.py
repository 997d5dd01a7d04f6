"""A run's jobs still queued or running, and those that can never start because a job they wait for failed."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Sequence

from .jobs import current_jobs, ended_badly, failures

__all__ = ["QueuedJobs", "live_and_stale_jobs", "unrun_jobs", "unrun_lines", "why_never_runs"]

_LIVE = ("PENDING", "RUNNING", "CONFIGURING", "COMPLETING", "REQUEUED", "RESIZING", "SUSPENDED", "STOPPED")


@dataclass(frozen=True)
class QueuedJobs:
    """The ledger rows of a run's jobs that Slurm still holds, in ledger order."""

    live: tuple[dict, ...]    # queued or running, and able to start
    stale: tuple[dict, ...]   # pending on a dependency that can never be met (``why_never_runs``)


def live_and_stale_jobs(rows: Sequence[dict]) -> QueuedJobs:
    """The live and the stale ledger rows among `rows` (each with its `state`, ``describe_jobs``)."""
    live, stale = [], []
    for r in rows:
        state = str(r.get("state", ""))
        if state.startswith("PENDING") and _waits_in_vain(r, rows):
            stale.append(r)
        elif any(part.split(" ")[0] in _LIVE for part in state.split(", ")):
            live.append(r)
    return QueuedJobs(tuple(live), tuple(stale))


def unrun_jobs(rows: Sequence[dict]) -> list[dict]:
    """Current rows (``current_jobs``) cancelled because a job they wait for ended badly: they never
    ran, which is no failure of their own (Slurm cancels them itself under --kill-on-invalid-dep)."""
    return [r for r in current_jobs(rows)
            if str(r.get("state", "")).startswith("CANCELLED") and _waits_in_vain(r, rows)]


def unrun_lines(rows: Sequence[dict], states: Mapping[str, str] | None = None,
                unrun: Sequence[dict] | None = None) -> list[str]:
    """One line per current job that never ran because a job it waits for failed, naming that job
    (for `newsbag status` and a resubmit, so it does not read like a scancel or a failure of its own).
    ``unrun``: those of them to describe (default: all, `unrun_jobs`)."""
    return [f"job {r['job_id']} {r.get('kind', '?')} did not run (cancelled): {why_never_runs(r, rows, states)}"
            for r in (unrun_jobs(rows) if unrun is None else unrun)]


def _dependency_ids(row: dict) -> list[str]:
    """Whole jobs `row` waits for with afterok, from its ledger `dependency` ("afterok:36:38").

    One array task ("36_1") is left to Slurm's DependencyNeverSatisfied: the array's row says
    that some task failed, not which, and another task failing does not doom this one.
    """
    ids = []
    for spec in str(row.get("dependency") or "").split(","):
        kind, _, rest = spec.partition(":")
        if kind == "afterok":
            ids += [j for j in rest.split(":") if j and "_" not in j]
    return ids


def _blockers(row: dict, rows: Sequence[dict]) -> list[dict]:
    """Rows of the jobs `row` waits for (afterok) that ended badly (an array: any task)."""
    by_id = {str(r["job_id"]): r for r in rows}
    return [by_id[j] for j in _dependency_ids(row) if j in by_id and ended_badly(by_id[j].get("state"))]


def _waits_in_vain(row: dict, rows: Sequence[dict]) -> bool:
    """Whether `row`'s dependency can never be met: Slurm says so, or a job it waits for already
    ended badly. Slurm re-evaluates dependencies on its own schedule, and an afterok on an array
    only once every task ended, so until then a doomed job still reads PENDING (Dependency)."""
    return "DependencyNeverSatisfied" in str(row.get("state", "")) or bool(_blockers(row, rows))


def why_never_runs(row: dict, rows: Sequence[dict], states: Mapping[str, str] | None = None) -> str | None:
    """Why `row` can never run ("job 38 infer-h200 FAILED, job 11_1 infer-l40s TIMEOUT"), None if it can.

    Args:
        rows: the ledger rows with their `state`, where `row`'s dependencies are looked up.
        states: per-task states (``failed_task_states``), to name an array's failed tasks.
    """
    if not _waits_in_vain(row, rows):
        return None
    named = [f"job {f.label} {b.get('kind', '?')} {f.state}"
             for b in _blockers(row, rows) for f in failures(b, states or {})]
    return ", ".join(named) or "a job it waits for failed"
