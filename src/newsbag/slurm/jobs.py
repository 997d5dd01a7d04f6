"""The job ledger (RUN/slurm/jobs.jsonl) and each job's state, from Slurm or from the records the job left."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable, Mapping, Sequence

from ..io import append_jsonl, open_appending, read_json
from ..jsontext import jsonl_lines
from .client import call, read_stdout

__all__ = [
    "JOBS_FILE",
    "EXITS_DIR",
    "read_jobs",
    "record_job",
    "job_states",
    "describe_jobs",
    "exit_code",
    "expand_log_path",
    "format_job_lines",
    "ended_badly",
    "stage_set",
    "current_jobs",
    "failed_task_states",
    "Failure",
    "failures",
]

JOBS_FILE = Path("slurm") / "jobs.jsonl"
# RUN/slurm/exits/<job or J_T>.json: how each job ended, written by the job itself (_newsbag_job.sh),
# for a cluster without accounting, where Slurm forgets a job MinJobAge after it ended.
EXITS_DIR = Path("slurm") / "exits"
# States after which a job never runs again (unless requeued by hand).
_BAD = ("FAILED", "CANCELLED", "TIMEOUT", "OUT_OF_MEMORY", "NODE_FAIL", "BOOT_FAIL", "DEADLINE", "PREEMPTED")


def read_jobs(run_dir: str | os.PathLike) -> list[dict]:
    """Jobs the submit scripts recorded in RUN/slurm/jobs.jsonl, in submission order.

    A line cut short by a crash mid-append is skipped rather than failing the whole status.
    """
    jobs = []
    for _, line in jsonl_lines(Path(run_dir) / JOBS_FILE):
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
        fd = open_appending(path)   # a link planted there is replaced, not written through
        try:
            os.write(fd, b"\n")
        finally:
            os.close(fd)
    append_jsonl(path, [record])


def _with_reason(state: str, reason: str) -> str:
    """The state with Slurm's reason where it says why a job waits or never ran ("CANCELLED
    (DependencyNeverSatisfied)" is Slurm's --kill-on-invalid-dep, not a user's scancel)."""
    if state in ("PENDING", "CANCELLED") and reason and reason not in ("None", "(null)"):
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


def job_states(job_ids: Iterable[str], recorded: Callable[[str], dict[str, str]] | None = None) -> dict[str, str]:
    """Slurm state of each job id, from squeue (live and recently finished) then sacct.

    Args:
        job_ids: job ids as sbatch printed them; an array job id covers all its tasks.
        recorded: for a job neither knows while squeue answers (it ended before MinJobAge and
            there is no accounting), its states from the run's own records
            ({"<id>" or "<id>_<task>": state}, `_recorded_states`). Never asked when squeue is
            missing or cannot reach the controller: a queued job must not read as ended.

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
    proc = call(["squeue", "-h", "-t", "all", "-r", "-j", ",".join(ids), "-o", "%i|%F|%K|%T|%r"])
    # squeue exits 1 with "Invalid job id specified" when it knows none of the ids: it answered.
    answered = proc is not None and (proc.returncode == 0 or "Invalid job id" in proc.stderr)
    out = proc.stdout if proc is not None else ""
    for line in out.splitlines():
        parts = line.strip().split("|")
        if len(parts) != 5 or parts[1] not in tasks:
            continue
        jid, base, task, state, reason = parts
        tasks[base][jid if task != "N/A" else base] = _with_reason(state, reason)
    missing = [j for j in ids if not tasks[j]]
    if missing:
        out = read_stdout(["sacct", "-n", "-P", "-X", "-j", ",".join(missing), "-o", "JobID,State,Reason"])
        for line in out.splitlines():
            parts = line.strip().split("|")
            if len(parts) < 2:
                continue
            jid, state = parts[0], parts[1].split(" ")[0]  # "CANCELLED by 0" -> CANCELLED
            base = jid.split("_")[0]
            if base in missing:
                tasks[base][jid] = _with_reason(state, parts[2] if len(parts) > 2 else "")
    if recorded is not None and answered:
        for base in (j for j in missing if not tasks[j]):
            tasks[base].update(recorded(base))
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
    """The ledger rows with a `state` key, and for an array `tasks` ({"<id>_<task>": state}).

    A job Slurm no longer knows gets its state from the run's own records (`_recorded_states`);
    "unknown" when there are none to read (or Slurm cannot be asked).
    """
    jobs = read_jobs(run_dir)
    by_id = {str(j["job_id"]): j for j in jobs}
    states = job_states(by_id, recorded=lambda job_id: _recorded_states(Path(run_dir), by_id[job_id]))
    rows = []
    for j in jobs:
        job_id = str(j["job_id"])
        row = {**j, "state": states.get(job_id, "unknown")}
        if j.get("array"):
            row["tasks"] = {k: v for k, v in states.items() if k.startswith(f"{job_id}_")}
        rows.append(row)
    return rows


def _array_tasks(spec: str) -> list[str]:
    """The task ids of an ``--array`` spec as the submit script writes it ("0-2,5" -> 0 1 2 5)."""
    tasks: list[str] = []
    for part in str(spec).split(","):
        first, _, last = part.strip().partition("-")
        if first.isdigit() and (not last or last.isdigit()):
            tasks += [str(k) for k in range(int(first), int(last or first) + 1)]
    return tasks


def exit_code(run_dir: Path, label: str) -> int | None:
    """The exit code job (or task) `label` recorded as it ended (RUN/slurm/exits), None without a record."""
    try:
        return int(read_json(Path(run_dir) / EXITS_DIR / f"{label}.json")["exit_code"])
    except (OSError, ValueError, TypeError, KeyError):
        return None


def _recorded_state(run_dir: Path, label: str, log: str) -> str:
    """How job (or task) `label` ended by its own records: the exit record it wrote, else its log."""
    code = exit_code(run_dir, label)
    if code is None:
        # It wrote a log but no record: bash itself was killed (SIGKILL past the time limit's
        # grace, the OOM killer, a node failure). No log: it never started (cancelled while queued).
        return "FAILED (no exit record: killed?)" if os.path.exists(log) else "CANCELLED (never started)"
    return "COMPLETED" if code == 0 else f"FAILED (exit {code})"


def _recorded_states(run_dir: Path, row: dict) -> dict[str, str]:
    """States of a job Slurm forgot, from what it left in the run dir ({} for a row with no log
    pattern: nothing to go by). An array gives one state per task of its ``--array``."""
    pattern = str(row.get("log") or "")
    if not pattern:
        return {}
    job_id, kind = str(row["job_id"]), str(row.get("kind", "?"))
    if not row.get("array"):
        return {job_id: _recorded_state(run_dir, job_id, expand_log_path(pattern, job_id, kind))}
    return {f"{job_id}_{t}": _recorded_state(run_dir, f"{job_id}_{t}", expand_log_path(pattern, job_id, kind, t))
            for t in _array_tasks(row["array"])}


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


def expand_log_path(pattern: str, job_id: str, kind: str, task: str | None = None) -> str:
    """The file sbatch wrote for ``--output=pattern`` (%x job name, %j job id, %A array id, %a task)."""
    name = f"newsbag-{kind}"
    out = pattern.replace("%x", name).replace("%A", job_id).replace("%j", job_id)
    return out.replace("%a", task if task is not None else "*")


# --- Reading ledger rows with their states ---

def ended_badly(state: object) -> bool:
    """Whether a job (or any task of an array summary such as "TIMEOUT 1/16, COMPLETED 15/16") ended badly."""
    return any(part.split(" ")[0] in _BAD for part in str(state).split(", "))


def stage_set(stages: object) -> set[str]:
    """The names in a stage list ("fusion,review", "a+b"): a ledger row's `stages`, the STAGES setting."""
    return {s.strip() for s in str(stages or "").replace("+", ",").split(",") if s.strip()}


def current_jobs(rows: Sequence[dict]) -> list[dict]:
    """Ledger rows no later job took over, in ledger order.

    A resubmit plans a job for every stage with pending pages, so a later job sharing a stage
    with an earlier one replaces it: the earlier job's failure is history, not a way out.
    """
    current, later = [], set()
    for r in reversed(rows):
        stages = stage_set(r.get("stages"))
        if not stages & later:
            current.append(r)
        later |= stages
    return current[::-1]


def failed_task_states(rows: Sequence[dict]) -> dict[str, str]:
    """Per-task states (``describe_jobs``' `tasks`) of the current array rows with a task that ended badly, for ``way_out``."""
    return {k: v for r in current_jobs(rows) if r.get("array") and ended_badly(r.get("state"))
            for k, v in r.get("tasks", {}).items()}


@dataclass(frozen=True)
class Failure:
    """One failed task of an array job ("11_1", task "1", "TIMEOUT"), or a whole job (task None)."""

    label: str          # the job id, or "<job id>_<task>": what its log and exit record are named by
    task: str | None
    state: str          # the bare Slurm state, without its reason


def failures(row: dict, states: Mapping[str, str]) -> list[Failure]:
    """Each failed task of an array row, or the job itself for a plain row or one whose task
    states (``failed_task_states``) are not at hand."""
    job_id = str(row["job_id"])
    if row.get("array"):
        prefix = f"{job_id}_"
        tasks = [Failure(k, k[len(prefix):], v.split(" ")[0]) for k, v in states.items()
                 if k.startswith(prefix) and ended_badly(v)]
        if tasks:
            return tasks
    first_bad = next((p for p in str(row.get("state")).split(", ") if ended_badly(p)), str(row.get("state")))
    return [Failure(job_id, None, first_bad.split(" ")[0])]
