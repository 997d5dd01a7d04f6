"""Slurm for a run directory: job plan and partition rules, limit checks, submit settings, the job ledger, live states, the way out."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Iterable, Mapping, Sequence

from . import freshness, rundir
from .config import ModelStage, PipelineConfig, load_config
from .errors import ConfigError, InputError, PartialFailure
from .failures import is_held, previous_failure
from .io import append_jsonl, jsonl_lines, read_json, write_json

if TYPE_CHECKING:
    from .pages import PageRecord   # pages imports numpy and Pillow: only where a plan reads the manifest

__all__ = [
    "JOBS_FILE",
    "EXITS_DIR",
    "read_jobs",
    "record_job",
    "job_states",
    "describe_jobs",
    "format_job_lines",
    "select_stages",
    "check_envs",
    "MODES",
    "PADDLE_FAMILIES",
    "JobPlan",
    "plan_jobs",
    "pending_stages",
    "job_array",
    "Request",
    "read_cluster",
    "check_limits",
    "SETTINGS_FILE",
    "SETTING_KEYS",
    "save_settings",
    "load_settings",
    "reused_settings",
    "live_and_stale_jobs",
    "unrun_lines",
    "stages_with_work",
    "why_never_runs",
    "expand_log_path",
    "last_error_line",
    "failed_task_states",
    "way_out",
    "make_canary",
    "selected_stage_names",
    "job_note",
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
        fd = os.open(path, os.O_WRONLY | os.O_APPEND)
        try:
            os.write(fd, b"\n")
        finally:
            os.close(fd)
    append_jsonl(path, [record])


def _call(cmd: list[str]) -> subprocess.CompletedProcess | None:
    """A Slurm client command's result, or None when it is missing or does not return in time."""
    if shutil.which(cmd[0]) is None:
        return None
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None


def _run(cmd: list[str]) -> str:
    """stdout of a Slurm client command, or "" when it is missing or fails (no accounting, purged ids)."""
    proc = _call(cmd)
    return proc.stdout if proc is not None else ""


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
    proc = _call(["squeue", "-h", "-t", "all", "-r", "-j", ",".join(ids), "-o", "%i|%F|%K|%T|%r"])
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
        out = _run(["sacct", "-n", "-P", "-X", "-j", ",".join(missing), "-o", "JobID,State,Reason"])
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


def _exit_code(run_dir: Path, label: str) -> int | None:
    """The exit code job (or task) `label` recorded as it ended (RUN/slurm/exits), None without a record."""
    try:
        return int(read_json(Path(run_dir) / EXITS_DIR / f"{label}.json")["exit_code"])
    except (OSError, ValueError, TypeError, KeyError):
        return None


def _recorded_state(run_dir: Path, label: str, log: str) -> str:
    """How job (or task) `label` ended by its own records: the exit record it wrote, else its log."""
    code = _exit_code(run_dir, label)
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


# --- The job plan: which stages go into which allocation (every partition rule lives here) ---

MODES = ("l40s", "h200", "split", "cpu")
# Paddle's CUDA wheels ship no kernels for the H200 (Hopper): its stages fail there with a
# kernel-image mismatch, so they never go to H200.
PADDLE_FAMILIES = frozenset({"paddle_layout", "paddle_vl15"})
# slot -> (environment prefix of its resources, sbatch script)
SLOTS = {"l40s": ("L40S", "newsbag_infer_l40s.sbatch"), "h200": ("H200", "newsbag_infer_h200.sbatch"),
         "cpu": ("CPU", "newsbag_cpu.sbatch"), "post": ("CPU", "newsbag_fuse_review_cs.sbatch")}


@dataclass(frozen=True)
class JobPlan:
    """One job to submit: its kind (job-name suffix), resource slot, stages and device override."""

    kind: str
    slot: str
    stages: tuple[str, ...]
    device: str = ""  # "" = each stage's configured device; "cpu" on the CPU partition

    @property
    def env_prefix(self) -> str:
        return SLOTS[self.slot][0]

    @property
    def script(self) -> str:
        return SLOTS[self.slot][1]


def _needs_cuda(stage: ModelStage) -> bool:
    return any(bool(params.get("require_cuda")) for params in stage.variants.values())


def plan_jobs(config: PipelineConfig, stage_names: Sequence[str], mode: str,
              split_h200: Sequence[str] = ("dell", "mineru")) -> tuple[list[JobPlan], list[str]]:
    """The jobs of one submission and notes for the user; refuses plans that cannot work.

    Rules: Paddle stages never run on H200 (refused in ``h200`` mode, routed to L40S in
    ``split`` mode); model stages on the CPU partition run with ``--device cpu``, and those
    that require CUDA are refused; fusion, review and every other builtin stage run in one
    CPU job after the inference jobs, never in a GPU allocation.

    Raises:
        ConfigError: unknown mode or stage, or a stage that cannot run where the mode sends it;
            the message names the reason and the fix.
    """
    if mode not in MODES:
        raise ConfigError(f"unknown --gpu {mode!r} (choose {', '.join(MODES[:-1])} or {MODES[-1]})")
    selected = config.select(list(stage_names) or None)
    model = [s for s in selected if isinstance(s, ModelStage)]
    post = tuple(s.name for s in selected if not isinstance(s, ModelStage))
    names = [s.name for s in model]
    paddle = [s.name for s in model if s.family in PADDLE_FAMILIES]
    notes: list[str] = []

    def others(bad: list[str]) -> str:
        return ",".join([n for n in names if n not in bad] + list(post)) or "<none left>"

    jobs: list[JobPlan] = []
    if mode == "h200" and paddle:
        raise ConfigError(
            f"--gpu h200 would run the Paddle stage(s) {', '.join(paddle)} on H200, where Paddle has no CUDA kernels "
            f"for the GPU (kernel image mismatch); use --gpu split (Paddle on L40S, the rest on H200) or --gpu l40s, "
            f"or leave them out with --stages {others(paddle)}")
    if mode == "cpu":
        cuda_only = [s.name for s in model if _needs_cuda(s)]
        if cuda_only:
            raise ConfigError(
                f"--gpu cpu: stage(s) {', '.join(cuda_only)} require CUDA (require_cuda in {config.path}) and cannot run "
                f"on the CPU partition; leave them out with --stages {others(cuda_only)}, or submit them with --gpu split")
        if names:
            jobs.append(JobPlan("infer-cpu", "cpu", tuple(names), device="cpu"))
            notes.append(f"model stage(s) {','.join(names)} run on the CPU partition with --device cpu")
    elif mode in ("l40s", "h200"):
        if names:
            jobs.append(JobPlan(f"infer-{mode}", mode, tuple(names)))
    else:
        routed = [s.name for s in model if s.name in split_h200 and s.family in PADDLE_FAMILIES]
        if routed:
            notes.append(f"Paddle stage(s) {','.join(routed)} go to L40S, not H200 (Paddle has no H200 kernels)")
        h200 = tuple(s.name for s in model if s.name in split_h200 and s.name not in routed)
        l40s = tuple(n for n in names if n not in h200)
        jobs += [JobPlan("infer-l40s", "l40s", l40s)] if l40s else []
        jobs += [JobPlan("infer-h200", "h200", h200)] if h200 else []
    if post:
        jobs.append(JobPlan("fuse-review", "post", post))
    if not jobs:
        raise ConfigError(f"no stage selected for mode {mode}")
    return jobs, notes


def pending_stages(config: PipelineConfig, stage_names: Sequence[str], run_dir: Path,
                   status: dict | None = None, retry_failed: bool = False) -> list[str]:
    """Selected stages that still have work in `run_dir`, in config order.

    A model stage is pending while any of its sources lacks a current page of the manifest
    (failed and stale pages count: a resubmit redoes them). A builtin stage is pending when a
    stage before it is, or when its outputs in `collect_status` say a call of it has work
    (`builtin.has_work`: nothing made yet, a page not done, a run-level output such as the
    gallery leaving pages out). ``status``: the run's `collect_status` when the caller has it;
    ``retry_failed``: pages that crashed the runner count too (`_lacking_pages`).
    """
    from . import builtin
    from .pages import read_pages
    from .status import collect_status

    pages = read_pages(run_dir)
    status = status if status is not None else collect_status(run_dir)
    pending: list[str] = []
    upstream = False   # a stage before this one has work: what it makes next is this one's input
    for stage in config.select(list(stage_names) or None):
        if isinstance(stage, ModelStage):
            todo = bool(_lacking_pages(run_dir, [stage], pages, retry_failed))
        else:
            todo = upstream or builtin.has_work(status["builtin"].get(stage.kind, []), len(pages))
        upstream |= todo
        if todo:
            pending.append(stage.name)
    return pending


def stages_with_work(run_dir: Path, status: dict) -> set[str] | None:
    """The stages of the run's recorded config that a resubmit would plan a job for
    (`pending_stages`), or None when there is no readable record to say."""
    path = rundir.config_to_run(run_dir, None)
    if path is None:
        return None
    try:
        config = load_config(path)
    except ConfigError:
        return None
    return set(pending_stages(config, [], run_dir, status))


def _lacking_pages(run_dir: Path, stages: Sequence[ModelStage], pages: Sequence[PageRecord],
                   retry_failed: bool = False) -> set[str]:
    """The ids of `pages` that a source of `stages` lacks a current page of (failed and stale
    pages count: a resubmit redoes them), by the rule a run skips pages by; one pass per source
    (its run reports are read once), whatever the caller then slices. A page the run would
    leave failed (`is_held`: it crashed the runner) is no work, its job would only fail
    it again, unless the submit passes --retry-failed on (`retry_failed`)."""
    lacking: set[str] = set()
    for stage in stages:
        for v in stage.variants:
            out_dir = rundir.source_dir(run_dir, stage.name, v)
            prints = {p.page_id: stage.page_fingerprint(v, p.image_sha256) for p in pages}
            missing = prints.keys() - freshness.current_source_pages(out_dir, prints)
            # Only the pages with a failure record are read: one listing, not an open per missing page.
            failed = set() if retry_failed else rundir.page_files(out_dir / rundir.FAILED_DIR) & missing
            lacking |= missing - {page_id for page_id in failed
                                  if is_held(previous_failure(out_dir, page_id), prints[page_id])}
    return lacking


def job_array(config: PipelineConfig, job: JobPlan, shards: int, run_dir: Path | None = None,
              retry_failed: bool = False) -> str:
    """The ``--array`` of an inference job over `shards` manifest slices ("" for no array).

    Task K runs ``--shard K/N``. With `run_dir`, only the slices where one of the job's
    sources lacks a finished page get a task, so a resubmit after one task of 16 failed
    queues one GPU allocation, not 16 (`retry_failed`: as in `_lacking_pages`).
    """
    if job.slot == "post" or shards < 2:
        return ""
    tasks = list(range(shards))
    if run_dir is not None:
        from .pages import read_pages, select_shard

        pages = read_pages(run_dir)
        stages = [s for s in config.select(list(job.stages)) if isinstance(s, ModelStage)]
        lacking = _lacking_pages(run_dir, stages, pages, retry_failed)
        tasks = [k for k in tasks if any(p.page_id in lacking for p in select_shard(pages, (k, shards)))]
    spans: list[list[int]] = []
    for k in tasks:
        if spans and k == spans[-1][1] + 1:
            spans[-1][1] = k
        else:
            spans.append([k, k])
    return ",".join(f"{a}-{b}" if b > a else str(a) for a, b in spans)


# --- What a partition can ever give: requests against sinfo/scontrol ---

@dataclass(frozen=True)
class Request:
    """One job's resource request, as the submit script would pass it to sbatch."""

    kind: str
    env_prefix: str  # L40S, H200 or CPU: the variables that set it (L40S_CPUS, ...)
    partition: str
    gres: str
    cpus: int
    mem: str
    time: str


_MEM_UNITS = {"K": 1 / 1024, "M": 1, "G": 1024, "T": 1024 * 1024}


def _mem_mb(value: str) -> float | None:
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([KMGT]?)B?\s*", str(value), re.I)
    return float(m.group(1)) * _MEM_UNITS[(m.group(2) or "M").upper()] if m else None


def _minutes(value: str) -> float | None:
    """Slurm time (M, M:S, H:M:S, D-H, D-H:M, D-H:M:S) in minutes; None for UNLIMITED/INFINITE."""
    value = str(value).strip()
    if value.upper() in ("UNLIMITED", "INFINITE", "NONE", ""):
        return None
    days, _, rest = value.rpartition("-") if "-" in value else ("", "", value)
    try:
        parts = [int(p) for p in rest.split(":")]
        d = int(days) if days else 0
    except ValueError:
        return None
    if days:
        h, m, s = (parts + [0, 0])[:3]
    elif len(parts) == 1:
        h, m, s = 0, parts[0], 0
    elif len(parts) == 2:
        h, m, s = 0, parts[0], parts[1]
    else:
        h, m, s = parts[:3]
    return d * 1440 + h * 60 + m + s / 60


def _gres_counts(text: str) -> dict[str, int]:
    """{"gpu:l40s": 1, "gpu": 2, ...} from a node's Gres string ("gpu:l40s:1(S:0),gpu:h200:1")."""
    out: dict[str, int] = {}
    for item in re.sub(r"\([^)]*\)", "", text or "").split(","):
        parts = item.strip().split(":")
        if not parts or parts[0] in ("", "(null)"):
            continue
        count = int(parts[-1]) if parts[-1].isdigit() else 1
        names = parts[:-1] if parts[-1].isdigit() else parts
        out[names[0]] = out.get(names[0], 0) + count
        if len(names) > 1:
            out[":".join(names[:2])] = out.get(":".join(names[:2]), 0) + count
    return out


def read_cluster() -> dict[str, dict] | None:
    """Partitions with their limits and nodes, from ``scontrol show partition`` and ``sinfo``.

    Returns:
        {partition: {"max_time_min": float|None, "max_mem_mb": float|None, "max_cpus_node": int|None,
        "state": str, "nodes": [{"name", "cpus", "mem_mb", "gres": {name: count}}]}}, or None
        when the Slurm tools are missing or answer nothing.
    """
    parts_out = _run(["scontrol", "-o", "show", "partition"])
    nodes_out = _run(["sinfo", "-h", "-N", "-o", "%N|%P|%c|%m|%G"])
    if not parts_out.strip():
        return None
    cluster: dict[str, dict] = {}
    for line in parts_out.splitlines():
        rec = dict(tok.partition("=")[::2] for tok in line.split() if "=" in tok)
        name = rec.get("PartitionName")
        if not name:
            continue
        max_mem = rec.get("MaxMemPerNode", "UNLIMITED")
        max_cpus = rec.get("MaxCPUsPerNode", "UNLIMITED")
        cluster[name] = {"max_time_min": _minutes(rec.get("MaxTime", "UNLIMITED")),
                         "max_mem_mb": None if max_mem == "UNLIMITED" else _mem_mb(max_mem),
                         "max_cpus_node": int(max_cpus) if max_cpus.isdigit() else None,
                         "state": rec.get("State", "UP"), "nodes": []}
    for line in nodes_out.splitlines():
        fields = line.strip().split("|")
        if len(fields) != 5:
            continue
        node, part, cpus, mem, gres = fields
        part = part.rstrip("*")
        if part in cluster:
            cluster[part]["nodes"].append({"name": node, "cpus": int(cpus) if cpus.isdigit() else 0,
                                           "mem_mb": _mem_mb(mem) or 0.0, "gres": _gres_counts(gres)})
    return cluster


def _fmt_mb(mb: float) -> str:
    return f"{mb / 1024:.0f}G" if mb >= 1024 else f"{mb:.0f}M"


def check_limits(requests: Sequence[Request], cluster: Mapping[str, dict]) -> list[str]:
    """One message per request that no node of its partition can ever satisfy, with the numbers.

    A request can never start when its partition does not exist, its time exceeds the
    partition's MaxTime, or no single node has the CPUs, memory (RealMemory, capped by
    MaxMemPerNode) and GPUs of that type it asks for. Busy nodes are not a reason: those jobs wait.
    """
    problems = []
    for r in requests:
        part = cluster.get(r.partition)
        head = f"{r.kind} job (-p {r.partition} --cpus-per-task={r.cpus} --mem={r.mem} --time={r.time}" + \
               (f" --gres={r.gres})" if r.gres else ")")
        if part is None:
            problems.append(f"{head}: partition {r.partition} does not exist (this cluster has: "
                            f"{', '.join(sorted(cluster))}); set {r.env_prefix}_PARTITION")
            continue
        why = []
        limit = part["max_time_min"]
        want = _minutes(r.time)
        if limit is not None and want is not None and want > limit:
            why.append(f"time {r.time} exceeds the partition's MaxTime of {limit:g} min "
                       f"(set {r.env_prefix}_TIME to at most {int(limit)})")
        want_mb = _mem_mb(r.mem)
        gres_parts = r.gres.split(":") if r.gres else []
        gres_key = ":".join(p for p in gres_parts[:2] if not p.isdigit()) if gres_parts else ""
        gres_n = int(gres_parts[-1]) if gres_parts and gres_parts[-1].isdigit() else (1 if gres_parts else 0)
        nodes = part["nodes"]
        if nodes:
            cpus_cap = [min(n["cpus"], part["max_cpus_node"] or n["cpus"]) for n in nodes]
            mem_cap = [min(n["mem_mb"], part["max_mem_mb"] or n["mem_mb"]) for n in nodes]
            fits = [c >= r.cpus and (want_mb is None or m >= want_mb) and n["gres"].get(gres_key, 0) >= gres_n
                    for n, c, m in zip(nodes, cpus_cap, mem_cap)] if gres_key else \
                   [c >= r.cpus and (want_mb is None or m >= want_mb) for c, m in zip(cpus_cap, mem_cap)]
            if not any(fits):
                if r.cpus > max(cpus_cap):
                    why.append(f"{r.cpus} CPUs asked but its largest node has {max(cpus_cap)} "
                               f"(set {r.env_prefix}_CPUS={max(cpus_cap)} or less)")
                if want_mb is not None and want_mb > max(mem_cap):
                    why.append(f"{r.mem} memory asked but its largest node has {_fmt_mb(max(mem_cap))} "
                               f"(set {r.env_prefix}_MEM={int(max(mem_cap) // 1024)}G or less)")
                if gres_key and not any(n["gres"].get(gres_key, 0) >= gres_n for n in nodes):
                    have = sorted({k for n in nodes for k in n["gres"] if ":" in k}) or ["none"]
                    why.append(f"no node has {gres_n} x {gres_key} (its nodes have: {', '.join(have)}; "
                               f"set {r.env_prefix}_GRES)")
                if not why:
                    why.append("no single node has the CPUs, memory and GPUs together")
        if why:
            problems.append(f"{head} can never start on this cluster: " + "; ".join(why))
    return problems


# --- What a submission remembers, so a resubmit with only --run-dir does the same thing ---

SETTINGS_FILE = Path("slurm") / "submit.json"
SETTING_KEYS = (
    "NEWSBAG_CONFIG", "GPU_MODE", "STAGES", "SHARDS", "SPLIT_H200_STAGES", "NEWSBAG_ALLOW_PARTIAL",
    "NEWSBAG_PY", "BASE", "ACCOUNT",
    *(f"{p}_{k}" for p in ("L40S", "H200", "CPU") for k in ("PARTITION", "MEM", "TIME", "CPUS", "EXTRA")),
    "L40S_GRES", "H200_GRES",
)


def save_settings(run_dir: Path, settings: Mapping[str, str]) -> Path:
    """Write RUN/slurm/submit.json: the settings of the first submission (config path, stage split, resources, flags)."""
    unknown = sorted(set(settings) - set(SETTING_KEYS))
    if unknown:
        raise ConfigError(f"unknown submit setting(s) {', '.join(unknown)} (known: {', '.join(SETTING_KEYS)})")
    bad = [k for k, v in settings.items() if "\n" in str(v) or "\t" in str(v)]
    if bad:
        raise ConfigError(f"submit setting(s) {', '.join(bad)} contain a tab or newline")
    path = Path(run_dir) / SETTINGS_FILE
    write_json(path, {k: str(settings[k]) for k in SETTING_KEYS if k in settings})
    return path


def load_settings(run_dir: Path) -> dict[str, str]:
    """The recorded submit settings ({} for a run never submitted through the scripts)."""
    path = Path(run_dir) / SETTINGS_FILE
    if not path.is_file():
        return {}
    try:
        data = read_json(path)
    except (OSError, ValueError) as exc:
        raise InputError(f"{path} is unreadable ({exc}); delete it to submit with fresh settings") from None
    return {k: str(v) for k, v in data.items() if k in SETTING_KEYS and "\n" not in str(v) and "\t" not in str(v)}


def reused_settings(run_dir: Path) -> dict[str, str]:
    """What a submit into `run_dir` reuses where it is given nothing: the settings of its first
    submit (`load_settings`); for a run made without the scripts (`newsbag run --config F`),
    the config it recorded, which `newsbag run` without --config would use too
    (`rundir.config_to_run`), not the Torch default that would replace it."""
    settings = load_settings(run_dir)
    recorded = rundir.config_to_run(run_dir, None)
    if "NEWSBAG_CONFIG" not in settings and recorded is not None:
        settings["NEWSBAG_CONFIG"] = str(recorded)
    return settings


# --- Jobs of a run that are still queued, and those that can never start ---

_LIVE = ("PENDING", "RUNNING", "CONFIGURING", "COMPLETING", "REQUEUED", "RESIZING", "SUSPENDED", "STOPPED")


def live_and_stale_jobs(rows: Sequence[dict]) -> tuple[list[dict], list[dict]]:
    """(live, stale) ledger rows: stale ones are pending on a dependency that can never be met (``why_never_runs``)."""
    live, stale = [], []
    for r in rows:
        state = str(r.get("state", ""))
        if state.startswith("PENDING") and _waits_in_vain(r, rows):
            stale.append(r)
        elif any(part.split(" ")[0] in _LIVE for part in state.split(", ")):
            live.append(r)
    return live, stale


def _unrun(rows: Sequence[dict]) -> list[dict]:
    """Current rows (``_current``) cancelled because a job they wait for ended badly: they never
    ran, which is no failure of their own (Slurm cancels them itself under --kill-on-invalid-dep)."""
    return [r for r in _current(rows) if str(r.get("state", "")).startswith("CANCELLED") and _waits_in_vain(r, rows)]


def unrun_lines(rows: Sequence[dict], states: Mapping[str, str] | None = None,
                unrun: Sequence[dict] | None = None) -> list[str]:
    """One line per current job that never ran because a job it waits for failed, naming that job
    (for `newsbag status` and a resubmit, so it does not read like a scancel or a failure of its own).
    ``unrun``: those of them to describe (default: all, `_unrun`)."""
    return [f"job {r['job_id']} {r.get('kind', '?')} did not run (cancelled): {why_never_runs(r, rows, states)}"
            for r in (_unrun(rows) if unrun is None else unrun)]


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
    return [by_id[j] for j in _dependency_ids(row) if j in by_id and _failed(by_id[j].get("state"))]


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
    named = [f"job {label} {b.get('kind', '?')} {state}"
             for b in _blockers(row, rows) for label, _, state in _failures(b, states or {})]
    return ", ".join(named) or "a job it waits for failed"


# --- The way out after a failure ---

def expand_log_path(pattern: str, job_id: str, kind: str, task: str | None = None) -> str:
    """The file sbatch wrote for ``--output=pattern`` (%x job name, %j job id, %A array id, %a task)."""
    name = f"newsbag-{kind}"
    out = pattern.replace("%x", name).replace("%A", job_id).replace("%j", job_id)
    return out.replace("%a", task if task is not None else "*")


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


def _failed(state: object) -> bool:
    """Whether a job (or any task of an array summary such as "TIMEOUT 1/16, COMPLETED 15/16") ended badly."""
    return any(part.split(" ")[0] in _BAD for part in str(state).split(", "))


def _stage_set(stages: object) -> set[str]:
    """The names in a stage list ("fusion,review", "a+b"): a ledger row's `stages`, the STAGES setting."""
    return {s.strip() for s in str(stages or "").replace("+", ",").split(",") if s.strip()}


def _current(rows: Sequence[dict]) -> list[dict]:
    """Ledger rows no later job took over, in ledger order.

    A resubmit plans a job for every stage with pending pages, so a later job sharing a stage
    with an earlier one replaces it: the earlier job's failure is history, not a way out.
    """
    current, later = [], set()
    for r in reversed(rows):
        stages = _stage_set(r.get("stages"))
        if not stages & later:
            current.append(r)
        later |= stages
    return current[::-1]


def failed_task_states(rows: Sequence[dict]) -> dict[str, str]:
    """Per-task states (``describe_jobs``' `tasks`) of the current array rows with a task that ended badly, for ``way_out``."""
    return {k: v for r in _current(rows) if r.get("array") and _failed(r.get("state"))
            for k, v in r.get("tasks", {}).items()}


def _failures(row: dict, states: Mapping[str, str]) -> list[tuple[str, str | None, str]]:
    """(label, task, state) of each failed task of an array row ("11_1", "1", "TIMEOUT"), or of the
    job itself for a plain row or one whose task states are not at hand."""
    job_id = str(row["job_id"])
    if row.get("array"):
        prefix = f"{job_id}_"
        tasks = [(k, k[len(prefix):], v.split(" ")[0]) for k, v in states.items()
                 if k.startswith(prefix) and _failed(v)]
        if tasks:
            return tasks
    first_bad = next((p for p in str(row.get("state")).split(", ") if _failed(p)), str(row.get("state")))
    return [(job_id, None, first_bad.split(" ")[0])]


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
    rows = _current(rows)
    lines: list[str] = []
    unrun = _unrun(rows)
    failed = [r for r in rows if _failed(r.get("state")) and r not in unrun]
    work = pending() if pending is not None and (failed or unrun) else None
    if work is not None:
        failed, unrun = ([r for r in group if _stage_set(r.get("stages")) & work] for group in (failed, unrun))
    live, stale = live_and_stale_jobs(rows)
    pages_only = False
    for r in failed:
        for label, task, state in _failures(r, states):
            log_path = expand_log_path(r.get("log", ""), str(r["job_id"]), r.get("kind", "?"), task) if r.get("log") else "?"
            lines.append(f"job {label} {r.get('kind', '?')} {state}: log {log_path}")
            err = last_error_line(log_path) if "*" not in log_path else None
            lines.append(f"    last error: {err or '(none found in the log; read it)'}")
            if _exit_code(run_dir, label) == PartialFailure.exit_code:
                pages_only = True
                lines.append("    exit 4: only some of its pages failed (listed above), the others are done")
    lines += unrun_lines(rows, states, unrun)
    for r in stale:
        lines.append(f"job {r['job_id']} {r.get('kind', '?')} will never start: {why_never_runs(r, rows, states)}")
    if failed or stale or unrun:
        cancel = [str(r["job_id"]) for r in stale + [r for r in live if r not in stale]]
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


def make_canary(run_dir: Path) -> Path:
    """RUN/canary: a run dir whose manifest is the first page of RUN's, for a short canary submit.

    The page keeps its id and image; its `path` is rewritten relative to the canary dir.
    """
    from dataclasses import replace

    from .pages import read_pages, write_pages

    pages = read_pages(run_dir)
    if not pages:
        raise InputError(f"{run_dir} has no pages in manifests/pages.jsonl; build the manifest first")
    canary = Path(run_dir) / "canary"
    first = pages[0]
    path = os.path.relpath((Path(run_dir) / first.path).resolve(), canary.resolve()) if not os.path.isabs(first.path) \
        else first.path
    canary.mkdir(parents=True, exist_ok=True)
    write_pages(canary, [replace(first, path=path)])
    return canary


def selected_stage_names(run_dir: Path) -> set[str] | None:
    """Stages the Slurm submission of `run_dir` selected; None when it selected all (or was not submitted)."""
    return _stage_set(load_settings(run_dir).get("STAGES")) or None


def job_note(stage: str, rows: Sequence[dict], run_dir: Path, pending: Callable[[], set[str] | None]) -> str:
    """What the latest job of `stage` is doing, for a source row with pending, stale or failed pages.

    ``pending``: the stages with work left (`stages_with_work`), asked only once the job ended: a
    stage with none has only failed pages a resubmit would not retry (`is_held`).
    """
    mine = [r for r in rows if stage in _stage_set(r.get("stages"))]
    if not mine:
        return "no job submitted for this stage" if rows else ""
    r = mine[-1]
    state = str(r.get("state", "unknown"))
    ended = state == "COMPLETED" or _failed(state)
    if ended and (work := pending()) is not None and stage not in work:
        return (f"job {r['job_id']} {r.get('kind', '?')} {state}; a page that crashed the runner is not retried "
                f"by a resubmit unless asked: {_resubmit(run_dir)} --retry-failed")
    if _failed(state):
        return f"job {r['job_id']} {r.get('kind', '?')} {state}: see below"
    if state == "COMPLETED":
        return f"job {r['job_id']} {r.get('kind', '?')} COMPLETED; resubmit to retry"
    return f"job {r['job_id']} {r.get('kind', '?')} {state}"
