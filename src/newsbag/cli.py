"""Command line: parse options, build a dataclass, call one library function, map errors to exit codes."""

from __future__ import annotations

import json
import sys
from contextlib import contextmanager
from functools import cache
from pathlib import Path

import click

from . import __version__
from .cli_kit import (Group, SectionedCommand, ShardType, builtin_options, common, config_option, csv_list,
                      input_options, split_csv)
from .cli_slurm import slurm
from .cli_suggest import bundle_option, suggest
from .cli_tune import register as register_tuning
from .errors import NewsbagError, did_you_mean, printable
from .logsetup import setup_logging

__all__ = ["cli", "main"]

# The order a user needs the commands in (click lists them alphabetically).
_COMMAND_ORDER = tuple("run status review fuse export transcribe evaluate suggest tune recommend pages doctor".split())


@click.group(cls=Group, order=_COMMAND_ORDER,
             context_settings={"auto_envvar_prefix": "NEWSBAG", "help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="newsbag")
def cli() -> None:
    """Run layout detectors over newspaper pages, fuse their boxes, and say which layout to trust.

    \b
    Examples:
      newsbag run --input-dir scans/ --recursive --run-dir runs/demo   # every page under scans/
      newsbag run page.png --run-dir runs/one                          # one page
      newsbag status --run-dir runs/demo                               # what is done, what failed
    then open runs/demo/review/index.html; `newsbag COMMAND --help` for each command.
    """


# The commands defined in their own modules: each imports cli_kit, never this module.
cli.command("suggest")(common(suggest))
cli.add_command(slurm)
register_tuning(cli, common)


@cli.command(cls=SectionedCommand, sections={
    "Input": ("input_paths", "input_dirs", "recursive", "manifest", "max_megapixels"),
    "Run": ("run_dir", "config_path", "device", "workers", "force", "retry_failed", "max_failed_fraction"),
    "Selection": ("stages", "page_ids", "shard", "max_pages"),
    "Output": ("dry_run", "as_json", "log_level")})
@common
@input_options
@click.option("--config", "config_path", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="Pipeline config JSON (default: the run's config.resolved.json, else the embedded CPU bag).")
@click.option("--stages", callback=split_csv, help="Comma-separated stages to run (default: all in the config).")
@click.option("--pages", "page_ids", callback=split_csv, help="Comma-separated page ids to (re)run.")
@click.option("--shard", type=ShardType(), help="Run only shard K of N of the pages (K/N, 0-based).")
@click.option("--device", type=click.Choice(["auto", "gpu", "cpu"]), help="Override the device of every model stage.")
@click.option("--workers", type=click.IntRange(min=1), default=1, show_default=True, help="Fusion and review processes.")
@click.option("--force", is_flag=True, help="Redo pages that are already finished.")
@click.option("--retry-failed", is_flag=True,
              help="Also retry pages that crashed or hung their runner last time (others are retried, last).")
@click.option("--max-failed-fraction", type=click.FloatRange(0, 1),
              help="Stop a source once more than this share of its pages failed (default: config, else 0.5).")
@click.option("--dry-run", is_flag=True, help="Print the plan (pages x sources) and write nothing.")
@click.option("--json", "as_json", is_flag=True, help="Print the run summary as JSON on stdout.")
def run(dry_run, as_json, **fields):
    """Run the pipeline stages over the pages INPUT... (images or folders; resumes finished pages)."""
    from .pipeline import RunOptions, RunSummary, run_pipeline

    opts = RunOptions(**fields)   # every other option is named as its field
    if dry_run:
        _print_plan(opts, as_json)
        return
    summary = RunSummary(pages=0)
    with _ends_with_summary("run", opts.run_dir, summary, as_json):
        run_pipeline(opts, summary)


@contextmanager
def _ends_with_summary(command: str, run_dir: Path, summary, as_json: bool):
    """Print the call's summary (`newsbag.summary`) once its stages ran, failed pages or not: lines on
    stderr, or with --json one object on stdout; the error, if any, follows it."""
    try:
        yield
    finally:
        if summary.finished:
            from .summary import call_summary, summary_lines

            facts = call_summary(command, run_dir, summary)
            if as_json:
                click.echo(json.dumps(facts, indent=1))
            else:
                for line in summary_lines(facts):
                    click.echo(line, err=True)


def _print_plan(opts, as_json: bool) -> None:
    from .config import load_run_config
    from .inputs import select_ids
    from .manifest import select_shard
    from .pages import planned_ids
    from .pipeline import plan, with_device

    config = with_device(load_run_config(opts.run_dir, opts.config_path), opts.device)
    stages = config.select(list(opts.stages))
    ids = planned_ids(opts.run_dir, list(opts.input_dirs), opts.manifest, opts.recursive, opts.max_pages)
    rows = plan(config, stages, select_shard(select_ids(ids, opts.page_ids), opts.shard), opts.run_dir)
    if as_json:
        click.echo(json.dumps({"pages": len(ids), "plan": rows}, indent=1))
        return
    click.echo(f"{len(ids)} page(s); config {config.path}")
    for row in rows:
        todo = f" todo {row['todo']} done {row['done']}"
        click.echo(f"  {row['stage']:<16} {row['source']:<32} {row['family']:<14} device {row['device']:<4}{todo}")


@cli.command()
@common
@input_options
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON on stdout.")
def pages(run_dir, input_dirs, recursive, manifest, max_pages, max_megapixels, as_json):
    """Build RUN/manifests/pages.jsonl only (run once before submitting parallel jobs)."""
    from .errors import PartialFailure
    from .images import InputLimits
    from .pages import build_pages

    if not input_dirs and not manifest:
        raise click.UsageError("give --input-dir or --manifest")
    found, rejected = build_pages(run_dir, list(input_dirs), manifest, recursive, max_pages,
                                  InputLimits.from_megapixels(max_megapixels))
    where = run_dir / "manifests" / "pages.jsonl"
    click.echo(json.dumps({"command": "pages", "pages": len(found), "manifest": str(where), "rejected": len(rejected)},
                          indent=1) if as_json else f"{len(found)} page(s) in {where}")
    if rejected:
        raise PartialFailure(f"{len(rejected)} input(s) rejected; see {run_dir / 'manifests' / 'rejected.jsonl'}")


@cli.command()
@common
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
def status(run_dir, as_json):
    """Pages done / failed / pending per stage and source."""
    from .rundir import has_run_state

    if not has_run_state(run_dir):
        raise click.BadParameter(f"{run_dir} is not a run directory (no manifests, outputs or slurm jobs in it); "
                                 "give the folder newsbag run or newsbag pages wrote", param_hint="--run-dir")
    from .slurm.jobs import format_job_lines
    from .slurm.recovery import job_note
    from .status import status_lines

    info, jobs, work = _status_info(run_dir)
    if as_json:
        click.echo(json.dumps(info, indent=1))
        return
    for line in status_lines(info, lambda stage: job_note(stage, jobs, run_dir, work)):
        click.echo(printable(line))
    for line in [*format_job_lines(jobs), *info["way_out"]]:
        click.echo(f"  {printable(line)}")


def _status_info(run_dir: Path):
    """(`status.collect_status` with the run's Slurm jobs and way out added, narrowed to the stages
    the submission selected; the jobs; the stages with work, read once if asked)."""
    from .slurm.jobs import describe_jobs, failed_task_states
    from .slurm.plan import stages_with_work
    from .slurm.recovery import way_out
    from .slurm.settings import selected_stage_names
    from .status import collect_status

    info = collect_status(run_dir)
    jobs = describe_jobs(run_dir)
    info["slurm_jobs"] = jobs
    selected = selected_stage_names(run_dir)
    if selected is not None:  # only what the submission selected; the rest is not "pending"
        info["sources"] = [s for s in info["sources"] if s["source"].split("/")[0] in selected]
        info["builtin"] = {kind: outputs for kind, outputs in info["builtin"].items() if kind in selected}
    work = cache(lambda: stages_with_work(run_dir))  # reads every page's state: once, if asked
    info["way_out"] = way_out(run_dir, jobs, failed_task_states(jobs), pending=work)
    return info, jobs, work


def _run_builtin_command(command: str, kind: str, run_dir: Path, config_path: Path | None, force: bool,
                         workers: int, as_json: bool, overrides: dict | None = None) -> None:
    import time

    from . import rundir
    from .config import BuiltinStage, load_run_config, record_builtin_run, to_jsonable
    from .errors import PartialFailure
    from .manifest import read_pages
    from .pipeline import RunOptions, RunSummary, run_builtin

    config = load_run_config(run_dir, config_path)
    stage = config.builtin(kind)
    if overrides:
        stage = BuiltinStage(stage.name, stage.kind, {**stage.options, **overrides})
    ids = [p.page_id for p in read_pages(run_dir)]
    if not ids:
        raise click.BadParameter(f"{run_dir} has no manifests/pages.jsonl", param_hint="--run-dir")
    # What this call runs with is what the next plain call skips by and status checks by: a config
    # named, or the embedded one where the run recorded none; one-off flags (export's --format...)
    # are not recorded.
    recorded = rundir.config_record(run_dir).exists()
    record = (lambda now: record_builtin_run(now, config, kind)) if config_path is not None or not recorded else None
    summary = RunSummary(pages=len(ids), config=config.path or "")
    started = time.monotonic()
    with _ends_with_summary(command, run_dir, summary, as_json):
        result = to_jsonable(run_builtin(stage, run_dir, ids, RunOptions(run_dir=run_dir, force=force, workers=workers),
                                         summary, record))
        summary.builtin[stage.name] = result
        summary.seconds, summary.finished = time.monotonic() - started, True
    if result.get("failed"):
        raise PartialFailure(f"{kind}: {result['failed']} page(s) failed; see {run_dir / 'logs' / 'failures.jsonl'} "
                             f"and `newsbag status --run-dir {run_dir}`")


@cli.command()
@common
@builtin_options()
def fuse(run_dir, config_path, force, workers, as_json):
    """Fuse the source boxes of a run (CPU only)."""
    _run_builtin_command("fuse", "fusion", run_dir, config_path, force, workers, as_json)


@cli.command()
@common
@builtin_options()
def review(run_dir, config_path, force, workers, as_json):
    """Draw review boards and the HTML gallery."""
    _run_builtin_command("review", "review", run_dir, config_path, force, workers, as_json)


class _FormatsType(click.ParamType):
    name = "FORMAT[,FORMAT]"

    def convert(self, value, param, ctx):
        from .export import FORMATS

        if isinstance(value, tuple):
            return value
        names = csv_list(value)
        bad = [n for n in names if n not in FORMATS]
        if bad:
            self.fail(f"unknown format {bad[0]!r}{did_you_mean(bad[0], FORMATS)} (choose from {', '.join(FORMATS)}, "
                      "comma-separated)", param, ctx)
        if not names:
            self.fail(f"{value!r}: choose from {', '.join(FORMATS)} (comma-separated)", param, ctx)
        return names


@cli.command()
@common
@builtin_options()
@click.option("--format", "formats", type=_FormatsType(),
              help="page-xml, alto and/or coco, comma-separated (default: the config's export stage, else all).")
@click.option("--variant", "variants", multiple=True,
              help="Fused variant to export (repeatable; 'all' = every variant; default: the recommended one).")
@click.option("--sources", is_flag=True, default=None, help="Export every source layout too.")
@bundle_option
def export(run_dir, config_path, force, workers, as_json, formats, variants, sources):
    """Write PAGE-XML, ALTO and COCO exports of the fused (and source) layouts under RUN/exports."""
    overrides = {k: v for k, v in (("formats", list(formats) if formats else None),
                                   ("variants", list(variants) if variants else None),
                                   ("sources", sources)) if v is not None}
    from .export.options import parse_export_cfg
    from .rundir import discover_fused

    try:
        parse_export_cfg(overrides)
    except ValueError as exc:
        raise click.UsageError(str(exc)) from None
    fused = discover_fused(run_dir)
    for name in variants:
        if name != "all" and name not in fused:
            raise click.BadParameter(f"unknown variant {name!r}{did_you_mean(name, fused)} (this run has: "
                                     f"{', '.join(fused) or 'none; run newsbag fuse first'})", param_hint="--variant")
    _run_builtin_command("export", "export", run_dir, config_path, force, workers, as_json, overrides)


_ONE_RECOGNISER = ("transcription reads the pages in one recogniser process, which already uses every core "
                   "(onnxruntime threads) or the GPU; more would each load the model onto the same cores")


@cli.command()
@common
@builtin_options(f"Only 1: {_ONE_RECOGNISER}.")
def transcribe(run_dir, config_path, force, workers, as_json):
    """Read the text of the recommended variant's regions in reading order, as articles."""
    if workers != 1:   # accepted and silently unused before: a user waited for a speed-up that never came
        raise click.BadParameter(f"{workers}: {_ONE_RECOGNISER}; leave it at 1", param_hint="--workers")
    _run_builtin_command("transcribe", "transcription", run_dir, config_path, force, workers, as_json)


@cli.command()
@common
@click.option("--gt", "gt_dir", required=True, type=click.Path(exists=True, path_type=Path),
              help="Ground truth: a folder of PAGE-XML or ALTO files (a Transkribus export too), a COCO JSON file, "
                   "or the nzz format (a folder with annotations/); see the manual's Ground truth page.")
def evaluate(run_dir, gt_dir):
    """Score every source and fusion variant against ground truth."""
    from .evaluate import format_summary, run_evaluate
    from .evaluate_text import evaluate_transcripts, format_transcripts

    from .review.evaluation import write_evaluation_data

    result = run_evaluate(run_dir, gt_dir)
    write_evaluation_data(run_dir)   # the gallery shows this evaluation without a redraw
    unscored = len(result["unscored"])
    click.echo(f"{result['pages']} of {result['pages'] + unscored} run page(s) matched ground truth and are scored"
               + (f"; {unscored} without it are not scored" if unscored else "")
               + (f"; {len(result['unmatched_gt'])} ground-truth page(s) not in the run" if result["unmatched_gt"] else "")
               + (f"; {len(result['bad_gt'])} ground-truth file(s) unusable, skipped" if result["bad_gt"] else ""))
    click.echo(format_summary(result))
    for path in result["written"]:
        click.echo(path)
    transcripts = evaluate_transcripts(run_dir, gt_dir)
    if transcripts:
        click.echo(format_transcripts(transcripts))
        for row in transcripts:
            click.echo(row["written"])


@cli.command()
@config_option
@click.option("--page", "page", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="Image to run through every member (default: a synthetic test page).")
@click.option("--no-page", is_flag=True, help="Check envs and devices only; run no page.")
@click.option("--stages", default="", help="Comma-separated stages to check (default: every model stage).")
@click.option("--device", type=click.Choice(["auto", "gpu", "cpu"]), help="Override the device of every model stage.")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@click.option("-l", "--log-level", default="info", show_default=True,
              type=click.Choice(["debug", "info", "warning", "error"]))
def doctor(config_path, page, no_page, stages, device, as_json, log_level):
    """Check each member's env, imports, device and one real page; exit 3 if any is not ready."""
    import tempfile

    from .config import load_config
    from .doctor import format_doctor_table, run_doctor
    from .errors import EnvError

    setup_logging(log_level)
    from dataclasses import replace

    from .pipeline import with_device

    config = with_device(load_config(config_path), device)
    if stages:
        config = replace(config, stages=config.select(list(csv_list(stages))))
    with tempfile.TemporaryDirectory(prefix="newsbag-doctor-") as tmp:
        if page is None and not no_page:
            page = _synthetic_page(Path(tmp) / "doctor_page.png")
        rows = run_doctor(config, run_page=None if no_page else str(page))
    click.echo(json.dumps(rows, indent=1) if as_json else format_doctor_table(rows))
    not_ready = [f"{r['stage']}/{r['variant']}" for r in rows if not r["ready"]]
    if not_ready:
        raise EnvError(f"{len(not_ready)} member(s) not ready: {', '.join(not_ready)} (problems listed above)")


def _synthetic_page(path: Path) -> Path:
    """A 1200x1600 page with a headline and three columns of real text: every member should find boxes.

    Text, not bars: a member that finds nothing on it is reported ``empty`` and fails the check.
    """
    from PIL import Image, ImageDraw, ImageFont

    im = Image.new("L", (1200, 1600), 255)
    draw = ImageDraw.Draw(im)
    draw.text((100, 60), "THE DAILY NEWSBAG", fill=0, font=ImageFont.load_default(size=72))
    font = ImageFont.load_default(size=20)
    words = "the council met on monday to discuss the new bridge over the river and its cost".split()
    for col in range(3):
        x0 = 80 + col * 360
        for row in range(40):
            line = " ".join(words[(row + col + k) % len(words)] for k in range(5 if row % 9 != 8 else 3))
            draw.text((x0, 220 + row * 32), line, fill=0, font=font)
    im.save(path)
    return path


class _Terminated(KeyboardInterrupt):
    """SIGTERM (kill, Slurm's scancel): unwinds like Ctrl-C, so runners are stopped on the way out."""


def _on_sigterm(signum, frame) -> None:
    raise _Terminated()


def _forget_unhandled_interrupt() -> None:
    """Let ``sys.exit(130)`` stand after a caught Ctrl-C.

    CPython marks a KeyboardInterrupt that leaves a string ``exec`` as unhandled even when it
    is caught later, and under ``python -m`` then kills itself by SIGINT at exit (-2) instead
    of exiting 130. Every lazy import that builds a dataclass or namedtuple runs such an exec,
    so a Ctrl-C under load lands in one now and then. A string exec clears the mark as it starts.
    """
    exec("pass", {})


def main(argv: list[str] | None = None) -> None:
    """Entry point: the only place that turns exceptions into exit codes."""
    import signal
    import threading

    previous = None
    if threading.current_thread() is threading.main_thread():
        previous = signal.signal(signal.SIGTERM, _on_sigterm)
    try:
        rv = cli.main(args=argv, prog_name="newsbag", standalone_mode=False)
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)
    except click.ClickException as exc:
        # click's usage errors in the one shape of every error: one line, with where to read more
        where = exc.ctx.command_path if isinstance(exc, click.UsageError) and exc.ctx is not None else ""
        message = "; ".join(line.strip() for line in exc.format_message().splitlines() if line.strip()).rstrip(".")
        click.echo(f"newsbag: error: {printable(message)}" + (f"; try '{where} --help'" if where else ""), err=True)
        sys.exit(exc.exit_code)
    except (click.exceptions.Abort, KeyboardInterrupt) as exc:
        click.echo("newsbag: interrupted", err=True)
        _forget_unhandled_interrupt()
        terminated = isinstance(exc, _Terminated) or isinstance(exc.__cause__, _Terminated)
        sys.exit(128 + signal.SIGTERM if terminated else 130)
    except NewsbagError as exc:
        click.echo(f"newsbag: error: {printable(str(exc))}", err=True)
        sys.exit(exc.exit_code)
    except OSError as exc:
        # A write that did not go through newsbag.io (a library writing a file itself): still
        # one line and the documented exit code, not a traceback.
        from .io import DISK_ERRNOS, run_dir_error

        if exc.errno not in DISK_ERRNOS:
            raise
        err = run_dir_error(exc, exc.filename or "the run directory")
        click.echo(f"newsbag: error: {printable(str(err))}", err=True)
        sys.exit(err.exit_code)
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)
    sys.exit(rv if isinstance(rv, int) else 0)
