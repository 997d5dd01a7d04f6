"""Slurm bookkeeping for a run directory: the job ledger, live job states, and the checks the sbatch scripts call."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Iterable, Sequence

from .io import append_jsonl

__all__ = [
    "JOBS_FILE",
    "read_jobs",
    "record_job",
    "job_states",
    "describe_jobs",
    "format_job_lines",
    "select_stages",
    "check_envs",
]

JOBS_FILE = Path("slurm") / "jobs.jsonl"
# States after which a job never runs again (unless requeued by hand).
_BAD = ("FAILED", "CANCELLED", "TIMEOUT", "OUT_OF_MEMORY", "NODE_FAIL", "BOOT_FAIL", "DEADLINE", "PREEMPTED")


def read_jobs(run_dir: str | os.PathLike) -> list[dict]:
    """Jobs the submit scripts recorded in RUN/slurm/jobs.jsonl, in submission order.

    A line cut short by a crash mid-append is skipped rather than failing the whole status.
    """
    path = Path(run_dir) / JOBS_FILE
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        return []
    jobs = []
    for line in lines:
        try:
            rec = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(rec, dict) and rec.get("job_id"):
            jobs.append(rec)
    return jobs


def record_job(run_dir: str | os.PathLike, record: dict) -> None:
    """Append one submitted job to the ledger (one O_APPEND write, safe next to running jobs).

    A line left without its newline by a killed earlier submit is closed first, so it costs
    only itself and not this record too.
    """
    path = Path(run_dir) / JOBS_FILE
    try:
        with open(path, "rb") as fh:
            fh.seek(-1, os.SEEK_END)
            torn = fh.read(1) != b"\n"
    except (FileNotFoundError, OSError):
        torn = False
    if torn:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND)
        try:
            os.write(fd, b"\n")
        finally:
            os.close(fd)
    append_jsonl(path, [record])


def _run(cmd: list[str]) -> str:
    """stdout of a Slurm client command, or "" when it is missing or fails (no accounting, purged ids)."""
    if shutil.which(cmd[0]) is None:
        return ""
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return proc.stdout


def _with_reason(state: str, reason: str) -> str:
    if state == "PENDING" and reason and reason not in ("None", "(null)"):
        return f"{state} ({reason})"
    return state


def _summarise(states: list[str]) -> str:
    """One state for an array: the common one, else counts with failures and running first."""
    if len(set(states)) == 1:
        return states[0]
    counts: dict[str, int] = {}
    for s in states:
        counts[s] = counts.get(s, 0) + 1
    def rank(s: str) -> tuple[int, str]:
        base = s.split(" ")[0]
        return (0 if base in _BAD else 1 if base == "RUNNING" else 2 if base.startswith("PENDING") else 3, s)
    return ", ".join(f"{s} {counts[s]}/{len(states)}" for s in sorted(counts, key=rank))


def job_states(job_ids: Iterable[str]) -> dict[str, str]:
    """Slurm state of each job id, from squeue (live and recently finished) then sacct.

    Args:
        job_ids: job ids as sbatch printed them; an array job id covers all its tasks.

    Returns:
        {job_id: state} for every id Slurm still knows, e.g. "COMPLETED", "RUNNING",
        "PENDING (DependencyNeverSatisfied)"; array tasks also appear as "<id>_<task>" and the
        array id maps to a summary ("COMPLETED" or "FAILED 1/3, COMPLETED 2/3"). {} when
        neither squeue nor sacct is installed or they know none of the ids.
    """
    ids = [str(j) for j in job_ids if str(j).strip()]
    if not ids:
        return {}
    tasks: dict[str, dict[str, str]] = {j: {} for j in ids}
    out = _run(["squeue", "-h", "-t", "all", "-r", "-j", ",".join(ids), "-o", "%i|%F|%K|%T|%r"])
    for line in out.splitlines():
        parts = line.strip().split("|")
        if len(parts) != 5 or parts[1] not in tasks:
            continue
        jid, base, task, state, reason = parts
        tasks[base][jid if task != "N/A" else base] = _with_reason(state, reason)
    missing = [j for j in ids if not tasks[j]]
    if missing:
        out = _run(["sacct", "-n", "-P", "-X", "-j", ",".join(missing), "-o", "JobID,State,Reason"])
        for line in out.splitlines():
            parts = line.strip().split("|")
            if len(parts) < 2:
                continue
            jid, state = parts[0], parts[1].split(" ")[0]  # "CANCELLED by 0" -> CANCELLED
            base = jid.split("_")[0]
            if base in missing:
                tasks[base][jid] = _with_reason(state, parts[2] if len(parts) > 2 else "")
    states: dict[str, str] = {}
    for base, per_task in tasks.items():
        if not per_task:
            continue
        if list(per_task) == [base]:
            states[base] = per_task[base]
            continue
        states.update({k: v for k, v in per_task.items() if k != base})
        states[base] = _summarise([v for k, v in per_task.items() if k != base])
    return states


def describe_jobs(run_dir: str | os.PathLike) -> list[dict]:
    """The ledger rows with a `state` key ("unknown" when Slurm no longer knows the job)."""
    jobs = read_jobs(run_dir)
    states = job_states(j["job_id"] for j in jobs)
    return [{**j, "state": states.get(str(j["job_id"]), "unknown")} for j in jobs]


def format_job_lines(rows: Sequence[dict]) -> list[str]:
    """One human line per job for `newsbag status`."""
    lines = []
    for r in rows:
        array = f" array {r['array']}" if r.get("array") else ""
        dep = f" after {r['dependency']}" if r.get("dependency") else ""
        gres = f" {r['gres']}" if r.get("gres") else ""
        lines.append(
            f"job {r['job_id']} {r.get('kind', '?')}: {r.get('state', 'unknown')}"
            f" [{r.get('partition', '?')}{gres}{array}] stages {r.get('stages', '')}{dep}"
        )
    return lines


def select_stages(config, stages_csv: str | None) -> list[tuple[str, str]]:
    """(name, kind) of the selected stages in config order; unknown names raise ConfigError."""
    names = [s.strip() for s in (stages_csv or "").split(",") if s.strip()]
    return [(s.name, s.kind) for s in config.select(names or None)]


def check_envs(config, stage_names: Sequence[str]) -> list[str]:
    """One message per selected model stage whose env interpreter is missing or not executable."""
    problems = []
    for stage in config.select(list(stage_names) or None):
        if stage.kind != "model":
            continue
        python = stage.env.python
        if not (os.path.isfile(python) and os.access(python, os.X_OK)):
            problems.append(
                f"stage {stage.name}: env {stage.env.name!r} interpreter {python} is missing or not executable;"
                f" create that env or fix envs.{stage.env.name}.python in {config.path}"
            )
    return problems
