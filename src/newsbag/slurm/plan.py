"""The job plan: which stages, and which shards of them, go into which allocation; every partition rule lives here."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from .. import rundir
from ..config import ModelStage, PipelineConfig, load_config
from ..errors import ConfigError

__all__ = [
    "select_stages",
    "MODES",
    "PADDLE_FAMILIES",
    "JobPlan",
    "plan_jobs",
    "submit_plan",
    "pending_stages",
    "stages_with_work",
    "job_array",
]


def select_stages(config, stages_csv: str | None) -> list[tuple[str, str]]:
    """(name, kind) of the selected stages in config order; unknown names raise ConfigError."""
    names = [s.strip() for s in (stages_csv or "").split(",") if s.strip()]
    return [(s.name, s.kind) for s in config.select(names or None)]



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


def submit_plan(config: PipelineConfig, stage_names: Sequence[str], run_dir: Path, retry_failed: bool = False):
    """The run's plan (`planner.plan_run`, which status and ``run --dry-run`` read too) for a submit
    of the selected stages: a page that crashed the runner counts as work only with ``retry_failed``."""
    from ..planner import plan_run
    from ..stage_protocol import Reading

    return plan_run(config, run_dir, stages=config.select(list(stage_names) or None),
                    reading=Reading(retry_failed=retry_failed))


def pending_stages(config: PipelineConfig, stage_names: Sequence[str], run_dir: Path,
                   retry_failed: bool = False) -> list[str]:
    """Selected stages that still have work in `run_dir`, in config order, as `submit_plan` has
    them: a model stage while one of its sources has a page to compute (failed and stale pages
    count: a resubmit redoes them), a builtin stage while a call of it has work (nothing made yet,
    a page not done or whose inputs an earlier stage redoes first, a run-level output such as the
    gallery leaving pages out)."""
    return submit_plan(config, stage_names, run_dir, retry_failed).pending()


def stages_with_work(run_dir: Path) -> set[str] | None:
    """The stages of the run's recorded config that a resubmit would plan a job for
    (`pending_stages`), or None when there is no readable record to say."""
    path = rundir.config_to_run(run_dir, None)
    if path is None:
        return None
    try:
        config = load_config(path)
    except ConfigError:
        return None
    return set(pending_stages(config, [], run_dir))


def job_array(job: JobPlan, shards: int, plan=None) -> str:
    """The ``--array`` of an inference job over `shards` manifest slices ("" for no array).

    Task K runs ``--shard K/N``. With the run's `plan` (`submit_plan`), only the slices where one
    of the job's sources has a page to compute get a task, so a resubmit after one task of 16
    failed queues one GPU allocation, not 16.
    """
    if job.slot == "post" or shards < 2:
        return ""
    tasks = list(range(shards))
    if plan is not None:
        from ..manifest import select_shard

        lacking = plan.todo(job.stages)
        tasks = [k for k in tasks if any(p in lacking for p in select_shard(plan.page_ids, (k, shards)))]
    spans: list[list[int]] = []
    for k in tasks:
        if spans and k == spans[-1][1] + 1:
            spans[-1][1] = k
        else:
            spans.append([k, k])
    return ",".join(f"{a}-{b}" if b > a else str(a) for a, b in spans)
