"""The way out after a failure: failed jobs' logs and last errors, jobs that never ran, the commands to go on."""

from __future__ import annotations

import os
import re
import shlex
from pathlib import Path
from typing import Callable, Mapping, Sequence

from ..errors import PartialFailure
from .jobs import current_jobs, ended_badly, exit_code, expand_log_path, failures, stage_set
from .queue import live_and_stale_jobs, unrun_jobs, unrun_lines, why_never_runs

__all__ = ["last_error_line", "SUBMIT_CMD", "way_out", "job_note"]


_ERROR_LINE = re.compile(r"error|Error|ERROR|Traceback|Killed|exited [1-9]|CANCELLED|DUE TO TIME LIMIT|oom", re.I)


def last_error_line(path: str | os.PathLike, tail_bytes: int = 65536) -> str | None:
    """The last line of a job log that reads like an error (None if the log is missing or clean)."""
    try:
        with open(path, "rb") as fh:
            fh.seek(0, os.SEEK_END)
            fh.seek(max(0, fh.tell() - tail_bytes))
            lines = fh.read().decode("utf-8", "replace").splitlines()
    except OSError:
        return None
    for line in reversed(lines):
        if line.strip() and _ERROR_LINE.search(line) and "exited 0" not in line:
            return line.strip()
    return None


# How status tells a cluster user to resubmit a run (from the checkout's root).
SUBMIT_CMD = "bash torch/slurm/submit_newsbag_from_dir.sh"


def _resubmit(run_dir: Path, submit_cmd: str = SUBMIT_CMD) -> str:
    """The submit script's resubmit of `run_dir`, quoted to paste as printed (a collection folder may hold spaces)."""
    return f"{submit_cmd} --run-dir {shlex.quote(str(run_dir))}"


def way_out(run_dir: Path, rows: Sequence[dict], states: Mapping[str, str] | None = None,
            submit_cmd: str = SUBMIT_CMD,
            pending: Callable[[], set[str] | None] | None = None) -> list[str]:
    """Lines for `newsbag status`: each failed job's log and last error line, stale jobs, and the commands to go on.

    Jobs a later submit replaced (it took over one of their stages) are left out.

    Args:
        rows: ledger rows with their live `state` (``describe_jobs``), in submission order.
        states: per-task states (``failed_task_states``), to name failed array tasks' logs.
        pending: gives the stages with work left (`stages_with_work`; called only when a job
            failed or never ran, as it reads every page's state); a failed or unrun job none of
            whose stages has any is left out too: it failed after writing its pages, or they
            were redone without it, and no resubmit would plan a job to take it over.
    """
    states = states or {}
    rows = current_jobs(rows)
    lines: list[str] = []
    unrun = unrun_jobs(rows)
    failed = [r for r in rows if ended_badly(r.get("state")) and r not in unrun]
    work = pending() if pending is not None and (failed or unrun) else None
    if work is not None:
        failed, unrun = ([r for r in group if stage_set(r.get("stages")) & work] for group in (failed, unrun))
    queued = live_and_stale_jobs(rows)
    pages_only = False
    for r in failed:
        for f in failures(r, states):
            log_path = expand_log_path(r.get("log", ""), str(r["job_id"]), r.get("kind", "?"), f.task) if r.get("log") else "?"
            lines.append(f"job {f.label} {r.get('kind', '?')} {f.state}: log {log_path}")
            err = last_error_line(log_path) if "*" not in log_path else None
            lines.append(f"    last error: {err or '(none found in the log; read it)'}")
            if exit_code(run_dir, f.label) == PartialFailure.exit_code:
                pages_only = True
                lines.append("    exit 4: only some of its pages failed (listed above), the others are done")
    lines += unrun_lines(rows, states, unrun)
    for r in queued.stale:
        lines.append(f"job {r['job_id']} {r.get('kind', '?')} will never start: {why_never_runs(r, rows, states)}")
    if failed or queued.stale or unrun:
        cancel = [str(r["job_id"]) for r in queued.stale + queued.live]
        if cancel:
            lines.append(f"cancel what is left of this run: scancel {' '.join(cancel)}")
        lines.append(f"after fixing the cause, resubmit (same settings, only stages with pending pages; "
                     f"stale jobs are cancelled): {_resubmit(run_dir, submit_cmd)}")
    if pages_only:
        # A resubmit alone fails the same pages again (one that crashed the runner is not even
        # retried) and Slurm cancels fusion again: the job script forgives exit 4 only when asked.
        lines.append(f"to fuse the pages that did not fail (the failed ones stay listed): "
                     f"NEWSBAG_ALLOW_PARTIAL=1 {_resubmit(run_dir, submit_cmd)}")
    return lines


def job_note(stage: str, rows: Sequence[dict], run_dir: Path, pending: Callable[[], set[str] | None]) -> str:
    """What the latest job of `stage` is doing, for a source row with pending, stale or failed pages.

    ``pending``: the stages with work left (`stages_with_work`), asked only once the job ended: a
    stage with none has only failed pages a resubmit would not retry (`failures.is_held`).
    """
    mine = [r for r in rows if stage in stage_set(r.get("stages"))]
    if not mine:
        return "no job submitted for this stage" if rows else ""
    r = mine[-1]
    state = str(r.get("state", "unknown"))
    ended = state == "COMPLETED" or ended_badly(state)
    if ended and (work := pending()) is not None and stage not in work:
        return (f"job {r['job_id']} {r.get('kind', '?')} {state}; a page that crashed the runner is not retried "
                f"by a resubmit unless asked: {_resubmit(run_dir)} --retry-failed")
    if ended_badly(state):
        return f"job {r['job_id']} {r.get('kind', '?')} {state}: see below"
    if state == "COMPLETED":
        return f"job {r['job_id']} {r.get('kind', '?')} COMPLETED; resubmit to retry"
    return f"job {r['job_id']} {r.get('kind', '?')} {state}"
