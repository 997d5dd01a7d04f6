"""The hidden `slurm` command group: the helpers the torch/slurm scripts call (the stage list, the
env check, the job plan and ledger, the submit settings). cli.py registers the group."""

from __future__ import annotations

import json
from pathlib import Path

import click

from .cli_kit import Group, config_option, csv_list
from .errors import printable

__all__ = ["slurm"]


def _say(line: str) -> None:
    """Print one line read from the run's job ledger or from Slurm, control characters escaped
    (`errors.printable`): a torn or hand-edited ledger row must not drive the operator's terminal."""
    click.echo(printable(line))


@click.group(cls=Group, hidden=True)
def slurm():
    """Helpers the torch/slurm scripts call (stage list, env check, job ledger)."""


_stages_option = click.option("--stages", default="", help="Comma-separated stages (default: all).")


@slurm.command("stages")
@config_option
@_stages_option
def slurm_stages(config_path, stages):
    """Print 'name<TAB>kind' for each selected stage, in config order."""
    from .config import load_config
    from .slurm.plan import select_stages

    for name, kind in select_stages(load_config(config_path), stages):
        click.echo(f"{name}\t{kind}")


@slurm.command("check-env")
@config_option
@_stages_option
@click.pass_context
def slurm_check_env(ctx, config_path, stages):
    """Exit 3 with one line per selected model stage whose env interpreter is missing."""
    from .config import load_config
    from .errors import EnvError
    from .slurm.limits import check_envs

    problems = check_envs(load_config(config_path), csv_list(stages))
    for msg in problems:
        click.echo(f"newsbag env check: {msg}", err=True)
    if problems:
        ctx.exit(EnvError.exit_code)


@slurm.command("record")
@click.option("--run-dir", required=True, type=click.Path(file_okay=False, path_type=Path))
@click.option("--job-id", required=True)
@click.option("--kind", required=True)
@click.option("--partition", default="")
@click.option("--gres", default="")
@click.option("--stages", default="")
@click.option("--array", default="")
@click.option("--dependency", default="")
@click.option("--log", "log_path", default="")
@click.option("--script", default="")
def slurm_record(run_dir, job_id, kind, partition, gres, stages, array, dependency, log_path, script):
    """Append one submitted job to RUN/slurm/jobs.jsonl."""
    import time

    from .slurm.jobs import record_job

    record_job(run_dir, {"job_id": job_id, "kind": kind, "partition": partition, "gres": gres, "stages": stages,
                         "array": array, "dependency": dependency, "log": log_path, "script": script,
                         "submitted_at": time.strftime("%Y-%m-%dT%H:%M:%S%z")})


@slurm.command("plan")
@config_option
@_stages_option
@click.option("--gpu", "mode", default="split", show_default=True, help="l40s, h200, split or cpu.")
@click.option("--split-h200", default="dell,mineru", show_default=True, help="Stages split mode sends to H200.")
@click.option("--run-dir", type=click.Path(file_okay=False, path_type=Path),
              help="Keep only stages with pending pages in this run (its manifest must exist).")
@click.option("--check-limits/--no-check-limits", default=True, show_default=True,
              help="Refuse requests no node of the partition can ever satisfy (asks sinfo/scontrol).")
@click.option("--shards", type=click.IntRange(min=1), default=1, show_default=True,
              help="Inference jobs are arrays over N manifest slices (with --run-dir: only slices with pending pages).")
@click.option("--retry-failed", is_flag=True,
              help="With --run-dir: pages that crashed or hung their runner count as pending (the jobs run with --retry-failed).")
def slurm_plan(config_path, stages, mode, split_h200, run_dir, check_limits, shards, retry_failed):
    """Print one line per job: kind, partition, gres, mem, time, cpus, extra, script, device, stages, array.

    Resources come from the environment the submit script exports (L40S_PARTITION, L40S_GRES,
    L40S_MEM, L40S_TIME, L40S_CPUS, L40S_EXTRA, the same for H200_ and CPU_). Notes go to stderr.
    """
    import os

    from .config import load_config
    from .errors import ConfigError
    from .slurm.limits import Request, check_limits as check, read_cluster
    from .slurm.plan import job_array, plan_jobs, submit_plan

    config = load_config(config_path)
    names = list(csv_list(stages))
    jobs, notes = plan_jobs(config, names, mode, csv_list(split_h200))
    plan = None
    if run_dir is not None:
        selected = [n for job in jobs for n in job.stages]
        plan = submit_plan(config, selected, run_dir, retry_failed)   # one plan: the stages and the arrays
        pending = set(plan.pending())
        done = [n for n in selected if n not in pending]
        if done:
            notes.append(f"no job for finished stage(s) {','.join(done)}")
        jobs = [replace_stages for job in jobs
                if (replace_stages := _keep(job, pending)) is not None]
    env = os.environ
    rows, requests = [], []
    for job in jobs:
        p = job.env_prefix
        gres = env.get(f"{p}_GRES", "") if p != "CPU" else ""
        cpus = env.get(f"{p}_CPUS", "1")
        res = [env.get(f"{p}_PARTITION", ""), gres, env.get(f"{p}_MEM", ""), env.get(f"{p}_TIME", ""), cpus,
               env.get(f"{p}_EXTRA", "")]
        if not res[0] or not cpus.isdigit():
            raise ConfigError(f"{p}_PARTITION and a numeric {p}_CPUS must be set for the {job.kind} job")
        rows.append([job.kind, *res, job.script, job.device, ",".join(job.stages),
                     job_array(job, shards, plan)])
        requests.append(Request(job.kind, p, res[0], gres, int(cpus), res[2], res[3]))
    if check_limits and requests:
        cluster = read_cluster()
        problems = check(requests, cluster) if cluster else []
        if problems:
            raise ConfigError("; ".join(problems))
    for note in notes:
        click.echo(f"note: {note}", err=True)
    for row in rows:
        click.echo("\t".join(row))


def _keep(job, pending: set):
    """`job` with only its pending stages, or None when none is left."""
    from dataclasses import replace

    left = tuple(s for s in job.stages if s in pending)
    return replace(job, stages=left) if left else None


@slurm.command("remember")
@click.option("--run-dir", required=True, type=click.Path(file_okay=False, path_type=Path))
@click.argument("settings", nargs=-1)
def slurm_remember(run_dir, settings):
    """Record KEY=VALUE submit settings in RUN/slurm/submit.json (a resubmit reuses them)."""
    from .slurm.settings import save_settings

    pairs = dict(s.partition("=")[::2] for s in settings)
    click.echo(str(save_settings(run_dir, pairs)))


@slurm.command("recall")
@click.option("--run-dir", required=True, type=click.Path(file_okay=False, path_type=Path))
def slurm_recall(run_dir):
    """Print the settings a submit into RUN reuses (its first submit's, else its recorded config) as
    KEY<TAB>VALUE lines (nothing if none)."""
    from .slurm.settings import reused_settings

    for key, value in reused_settings(run_dir).items():
        click.echo(f"{key}\t{value}")


@slurm.command("stale")
@click.option("--run-dir", required=True, type=click.Path(file_okay=False, path_type=Path))
@click.option("--cancel", is_flag=True, help="scancel jobs that can never start.")
def slurm_stale(run_dir, cancel):
    """Cancel (or name) this run's jobs that can never start and say which never ran and why; exit 2 while other
    jobs of the run are queued or running."""
    import subprocess

    from .errors import ConfigError
    from .slurm.jobs import describe_jobs, failed_task_states
    from .slurm.queue import live_and_stale_jobs, unrun_lines, why_never_runs

    rows = describe_jobs(run_dir)
    queued = live_and_stale_jobs(rows)
    tasks = failed_task_states(rows)
    for line in unrun_lines(rows, tasks):
        _say(line)
    for r in queued.stale:
        why = why_never_runs(r, rows, tasks)
        if cancel:
            subprocess.run(["scancel", str(r["job_id"])], capture_output=True, timeout=60)
            _say(f"cancelled stale job {r['job_id']} ({r.get('kind')}, stages {r.get('stages')}): "
                       f"it would never start, {why}")
        else:
            _say(f"stale job {r['job_id']} ({r.get('kind')}): it will never start, {why}; "
                       f"cancel with: scancel {r['job_id']}")
    if queued.live:
        names = ", ".join(f"{r['job_id']} ({r.get('kind')} {r['state']})" for r in queued.live)
        ids = " ".join(str(r["job_id"]) for r in queued.live)
        raise ConfigError(f"job(s) {names} of {run_dir} are still queued or running; a second submit would redo "
                          f"their work: wait for them (newsbag status --run-dir {run_dir}), or scancel {ids} and resubmit")


@slurm.command("canary")
@click.option("--run-dir", required=True, type=click.Path(file_okay=False, path_type=Path))
def slurm_canary(run_dir):
    """Make RUN/canary with RUN's first page and print its path."""
    from .slurm.canary import make_canary

    click.echo(str(make_canary(run_dir).resolve()))


@slurm.command("jobs")
@click.option("--run-dir", required=True, type=click.Path(file_okay=False, path_type=Path))
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
def slurm_jobs(run_dir, as_json):
    """Print the recorded jobs of a run with their live Slurm state."""
    from .slurm.jobs import describe_jobs, format_job_lines

    rows = describe_jobs(run_dir)
    if as_json:
        click.echo(json.dumps(rows, indent=1))
    else:
        for line in format_job_lines(rows) or ["no Slurm jobs recorded"]:
            _say(line)
