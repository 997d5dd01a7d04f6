"""Command line: parse options, build a dataclass, call one library function, map errors to exit codes."""

from __future__ import annotations

import json
import logging
import sys
from contextlib import contextmanager
from functools import cache, wraps
from pathlib import Path

import click

from . import __version__
from .cli_suggest import bundle_option, suggest
from .cli_tune import register as register_tuning
from .errors import NewsbagError, did_you_mean

__all__ = ["cli", "main"]

log = logging.getLogger("newsbag")


class _LogFormatter(logging.Formatter):
    """A plain line for users: the time (Slurm logs), "WARNING: "/"ERROR: " when it is one, the
    message; the level and module of every line only at debug level, where a developer reads it."""

    def __init__(self, debug: bool):
        super().__init__("%(asctime)s %(levelname)s %(name)s: %(message)s" if debug
                         else "%(asctime)s %(level_tag)s%(message)s", "%Y-%m-%d %H:%M:%S")

    def formatMessage(self, record: logging.LogRecord) -> str:
        record.level_tag = f"{record.levelname}: " if record.levelno >= logging.WARNING else ""
        return super().formatMessage(record)


class _StderrHandler(logging.StreamHandler):
    """Writes to whatever `sys.stderr` is when a line is logged, not the one it was made with: a
    caller that swaps it (pytest's capture, a program calling `main`) gets the lines, and a
    closed earlier stream never breaks a later call."""

    def __init__(self):
        super().__init__(sys.stderr)

    @property
    def stream(self):
        return sys.stderr

    @stream.setter
    def stream(self, value) -> None:
        pass


def _setup_logging(level: str) -> None:
    root = logging.getLogger()
    debug = level.lower() == "debug"
    handler = getattr(root, "_newsbag_handler", None)
    if handler is None:
        from .progress import is_interactive

        if is_interactive():
            from rich.logging import RichHandler
            from rich.console import Console

            handler = RichHandler(console=Console(stderr=True), show_path=False)
        else:
            handler = _StderrHandler()
        # Added, not put in place of the root's handlers: a program that calls `main` keeps its own
        # (pytest's log capture was dropped by the first call in a process, so tests passed or failed by order).
        root.addHandler(handler)
        root._newsbag_handler = handler  # type: ignore[attr-defined]
    if isinstance(handler, logging.StreamHandler):
        handler.setFormatter(_LogFormatter(debug))
    else:  # rich shows the time and level itself
        handler.setFormatter(logging.Formatter("%(name)s: %(message)s" if debug else "%(message)s"))
    root.setLevel(level.upper())


def _common(func):
    """Options every command shares: --run-dir and --log-level."""

    @click.option("--run-dir", required=True, type=click.Path(file_okay=False, path_type=Path),
                  help="Run directory (`run` and `pages` create it; every command resumes or reads what is there).")
    @click.option("-l", "--log-level", default="info", show_default=True,
                  type=click.Choice(["debug", "info", "warning", "error"], case_sensitive=False))
    @wraps(func)
    def wrapper(*args, log_level: str, **kwargs):
        _setup_logging(log_level)
        return func(*args, **kwargs)

    return wrapper


class ShardType(click.ParamType):
    name = "K/N"

    def convert(self, value, param, ctx):
        if isinstance(value, tuple):
            return value
        try:
            k, n = (int(v) for v in str(value).split("/"))
        except ValueError:
            self.fail(f"{value!r} is not K/N (e.g. 0/4)", param, ctx)
        if n < 1 or not 0 <= k < n:
            self.fail(f"{value!r}: need 0 <= K < N", param, ctx)
        return (k, n)


def _csv(value: str | None) -> tuple[str, ...]:
    return tuple(v.strip() for v in (value or "").split(",") if v.strip())


_config_option = click.option("--config", "config_path", type=click.Path(exists=True, dir_okay=False, path_type=Path),
                              help="Pipeline config JSON (default: the embedded CPU bag).")


def _input_options(func):
    @click.argument("inputs", nargs=-1, metavar="[INPUT]...", type=click.Path(exists=True, path_type=Path))
    @click.option("--input", "input_paths", multiple=True, type=click.Path(exists=True, path_type=Path),
                  help="A page image or a folder of them (repeatable); the same as naming it after the command.")
    @click.option("--input-dir", "input_dirs", multiple=True,
                  type=click.Path(exists=True, file_okay=False, path_type=Path),
                  help="Folder of page images (repeatable).")
    @click.option("--recursive", is_flag=True, help="Descend into sub-folders of --input-dir.")
    @click.option("--manifest", type=click.Path(exists=True, dir_okay=False, path_type=Path),
                  help="File with one image path per line (# comments, relative to the file).")
    @click.option("--max-pages", type=click.IntRange(min=1), help="Take only the first N pages.")
    @click.option("--max-megapixels", type=click.FloatRange(min=0), default=400.0, show_default=True,
                  envvar="NEWSBAG_MAX_MEGAPIXELS",
                  help="Refuse pages whose header declares more pixels, before decoding them (0 = no limit).")
    @wraps(func)
    def wrapper(*args, inputs, input_paths, input_dirs, **kwargs):
        # a single image's id root is its folder (`inputs.list_inputs`), so a file goes where folders go
        return func(*args, input_dirs=(*inputs, *input_paths, *input_dirs), **kwargs)

    return wrapper


# The order a user needs the commands in (click lists them alphabetically).
_COMMAND_ORDER = tuple("run status review fuse export transcribe evaluate suggest tune recommend pages doctor".split())


class _Group(click.Group):
    """A group whose commands list in `_COMMAND_ORDER`, that names the nearest command for a typo,
    and that answers being named alone with its help (exit 2), in the click versions that raise
    an error for it and those that do not."""

    group_class = type   # its sub-groups (slurm) are one too

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        if not args and self.no_args_is_help and not ctx.resilient_parsing:
            click.echo(ctx.get_help(), err=True)
            ctx.exit(2)
        return super().parse_args(ctx, args)

    def list_commands(self, ctx: click.Context) -> list[str]:
        rank = {name: i for i, name in enumerate(_COMMAND_ORDER)}
        return sorted(self.commands, key=lambda name: rank.get(name, len(rank)))

    def resolve_command(self, ctx: click.Context, args: list[str]):
        name = args[0] if args else ""
        if name and not name.startswith("-") and self.get_command(ctx, name) is None:
            shown = [n for n in self.list_commands(ctx) if not self.commands[n].hidden]
            ctx.fail(f"no command {name!r}{did_you_mean(name, shown)} (commands: {', '.join(shown)})")
        return super().resolve_command(ctx, args)


class _SectionedCommand(click.Command):
    """A command whose --help shows its options under headings: `sections` maps a heading to the
    names of its parameters, in order; a parameter no section names goes under the last one."""

    def __init__(self, *args, sections: dict[str, tuple[str, ...]], **kwargs):
        super().__init__(*args, **kwargs)
        self.sections = sections

    def format_options(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        records = {p.name: rec for p in self.get_params(ctx)
                   if isinstance(p, click.Option) and (rec := p.get_help_record(ctx)) is not None}
        headings = list(self.sections)
        for heading in headings:
            rows = [records.pop(name) for name in self.sections[heading] if name in records]
            if heading == headings[-1]:
                rows += records.values()
            if rows:
                with formatter.section(heading):
                    formatter.write_dl(rows)


@click.group(cls=_Group, context_settings={"auto_envvar_prefix": "NEWSBAG", "help_option_names": ["-h", "--help"]})
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


cli.command("suggest")(_common(suggest))
register_tuning(cli, _common)


@cli.command(cls=_SectionedCommand, sections={
    "Input": ("input_paths", "input_dirs", "recursive", "manifest", "max_megapixels"),
    "Run": ("run_dir", "config_path", "device", "workers", "force", "retry_failed", "max_failed_fraction"),
    "Selection": ("stages", "page_ids", "shard", "max_pages"),
    "Output": ("dry_run", "as_json", "log_level")})
@_common
@_input_options
@click.option("--config", "config_path", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="Pipeline config JSON (default: the run's config.resolved.json, else the embedded CPU bag).")
@click.option("--stages", help="Comma-separated stages to run (default: all in the config).")
@click.option("--pages", "page_ids", help="Comma-separated page ids to (re)run.")
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
def run(run_dir, input_dirs, recursive, manifest, max_pages, max_megapixels, config_path, stages, page_ids, shard,
        device, workers, force, retry_failed, max_failed_fraction, dry_run, as_json):
    """Run the pipeline stages over the pages INPUT... (images or folders; resumes finished pages)."""
    from .pipeline import RunOptions, run_pipeline

    opts = RunOptions(run_dir=run_dir, config_path=config_path, input_dirs=tuple(input_dirs),
                      manifest=manifest, recursive=recursive, stages=_csv(stages), max_pages=max_pages,
                      max_megapixels=max_megapixels,
                      page_ids=_csv(page_ids), shard=shard, force=force, device=device, workers=workers,
                      retry_failed=retry_failed, max_failed_fraction=max_failed_fraction)
    if dry_run:
        _print_plan(opts, as_json)
        return
    from .pipeline import RunSummary

    summary = RunSummary(pages=0)
    with _ends_with_summary("run", run_dir, summary, as_json):
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
@_common
@_input_options
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
@_common
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
        click.echo(line)
    for line in [*format_job_lines(jobs), *info["way_out"]]:
        click.echo(f"  {line}")


def _status_info(run_dir: Path):
    """(`status.collect_status` with the run's Slurm jobs and way out added, narrowed to the stages
    the submission selected; the jobs; the stages with work, read once if asked)."""
    from .slurm.jobs import describe_jobs, failed_task_states
    from .slurm.plan import stages_with_work
    from .slurm.recovery import way_out
    from .slurm.settings import selected_stage_names
    from .status import collect_status

    info = collect_status(run_dir)
    whole = dict(info)   # what a resubmit plans by, before the view below narrows it
    jobs = describe_jobs(run_dir)
    info["slurm_jobs"] = jobs
    selected = selected_stage_names(run_dir)
    if selected is not None:  # only what the submission selected; the rest is not "pending"
        info["sources"] = [s for s in info["sources"] if s["source"].split("/")[0] in selected]
        info["builtin"] = {kind: outputs for kind, outputs in info["builtin"].items() if kind in selected}
    work = cache(lambda: stages_with_work(run_dir, whole))  # reads every page's state: once, if asked
    info["way_out"] = way_out(run_dir, jobs, failed_task_states(jobs), pending=work)
    return info, jobs, work


def _builtin_options(workers_help: str = "Processes."):
    def decorate(func):
        @click.option("--config", "config_path", type=click.Path(exists=True, dir_okay=False, path_type=Path),
                      help="Config (default: the run's config.resolved.json; this stage's entry of it is recorded there).")
        @click.option("--force", is_flag=True, help="Redo pages that are already finished.")
        @click.option("--workers", type=click.IntRange(min=1), default=1, show_default=True, help=workers_help)
        @click.option("--json", "as_json", is_flag=True, help="Print the call's summary as JSON on stdout.")
        @wraps(func)
        def wrapper(*args, **kwargs):
            return func(*args, **kwargs)

        return wrapper

    return decorate


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
@_common
@_builtin_options()
def fuse(run_dir, config_path, force, workers, as_json):
    """Fuse the source boxes of a run (CPU only)."""
    _run_builtin_command("fuse", "fusion", run_dir, config_path, force, workers, as_json)


@cli.command()
@_common
@_builtin_options()
def review(run_dir, config_path, force, workers, as_json):
    """Draw review boards and the HTML gallery."""
    _run_builtin_command("review", "review", run_dir, config_path, force, workers, as_json)


class _FormatsType(click.ParamType):
    name = "FORMAT[,FORMAT]"

    def convert(self, value, param, ctx):
        from .export import FORMATS

        if isinstance(value, tuple):
            return value
        names = _csv(value)
        bad = [n for n in names if n not in FORMATS]
        if bad:
            self.fail(f"unknown format {bad[0]!r}{did_you_mean(bad[0], FORMATS)} (choose from {', '.join(FORMATS)}, "
                      "comma-separated)", param, ctx)
        if not names:
            self.fail(f"{value!r}: choose from {', '.join(FORMATS)} (comma-separated)", param, ctx)
        return names


@cli.command()
@_common
@_builtin_options()
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
@_common
@_builtin_options(f"Only 1: {_ONE_RECOGNISER}.")
def transcribe(run_dir, config_path, force, workers, as_json):
    """Read the text of the recommended variant's regions in reading order, as articles."""
    if workers != 1:   # accepted and silently unused before: a user waited for a speed-up that never came
        raise click.BadParameter(f"{workers}: {_ONE_RECOGNISER}; leave it at 1", param_hint="--workers")
    _run_builtin_command("transcribe", "transcription", run_dir, config_path, force, workers, as_json)


@cli.command()
@_common
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
@_config_option
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

    _setup_logging(log_level)
    from dataclasses import replace

    from .pipeline import with_device

    config = with_device(load_config(config_path), device)
    if stages:
        config = replace(config, stages=config.select(list(_csv(stages))))
    with tempfile.TemporaryDirectory(prefix="newsbag-doctor-") as tmp:
        if page is None and not no_page:
            page = _synthetic_page(Path(tmp) / "doctor_page.png")
        rows = run_doctor(config, run_page=None if no_page else str(page))
    click.echo(json.dumps(rows, indent=1) if as_json else format_doctor_table(rows))
    not_ready = [f"{r['stage']}/{r['variant']}" for r in rows if not r["ready"]]
    if not_ready:
        raise EnvError(f"{len(not_ready)} member(s) not ready: {', '.join(not_ready)} (problems listed above)")


@cli.group(hidden=True)
def slurm():
    """Helpers the torch/slurm scripts call (stage list, env check, job ledger)."""


_stages_option = click.option("--stages", default="", help="Comma-separated stages (default: all).")


@slurm.command("stages")
@_config_option
@_stages_option
def slurm_stages(config_path, stages):
    """Print 'name<TAB>kind' for each selected stage, in config order."""
    from .config import load_config
    from .slurm.plan import select_stages

    for name, kind in select_stages(load_config(config_path), stages):
        click.echo(f"{name}\t{kind}")


@slurm.command("check-env")
@_config_option
@_stages_option
@click.pass_context
def slurm_check_env(ctx, config_path, stages):
    """Exit 3 with one line per selected model stage whose env interpreter is missing."""
    from .config import load_config
    from .errors import EnvError
    from .slurm.limits import check_envs

    problems = check_envs(load_config(config_path), _csv(stages))
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
@_config_option
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
    from .slurm.plan import job_array, pending_stages, plan_jobs

    config = load_config(config_path)
    names = list(_csv(stages))
    jobs, notes = plan_jobs(config, names, mode, _csv(split_h200))
    if run_dir is not None:
        selected = [n for job in jobs for n in job.stages]
        pending = set(pending_stages(config, selected, run_dir, retry_failed=retry_failed))
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
                     job_array(config, job, shards, run_dir, retry_failed)])
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
        click.echo(line)
    for r in queued.stale:
        why = why_never_runs(r, rows, tasks)
        if cancel:
            subprocess.run(["scancel", str(r["job_id"])], capture_output=True, timeout=60)
            click.echo(f"cancelled stale job {r['job_id']} ({r.get('kind')}, stages {r.get('stages')}): "
                       f"it would never start, {why}")
        else:
            click.echo(f"stale job {r['job_id']} ({r.get('kind')}): it will never start, {why}; "
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
        click.echo("\n".join(format_job_lines(rows)) if rows else "no Slurm jobs recorded")


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
        click.echo(f"newsbag: error: {message}" + (f"; try '{where} --help'" if where else ""), err=True)
        sys.exit(exc.exit_code)
    except (click.exceptions.Abort, KeyboardInterrupt) as exc:
        click.echo("newsbag: interrupted", err=True)
        _forget_unhandled_interrupt()
        terminated = isinstance(exc, _Terminated) or isinstance(exc.__cause__, _Terminated)
        sys.exit(128 + signal.SIGTERM if terminated else 130)
    except NewsbagError as exc:
        click.echo(f"newsbag: error: {exc}", err=True)
        sys.exit(exc.exit_code)
    except OSError as exc:
        # A write that did not go through newsbag.io (a library writing a file itself): still
        # one line and the documented exit code, not a traceback.
        from .io import DISK_ERRNOS, run_dir_error

        if exc.errno not in DISK_ERRNOS:
            raise
        err = run_dir_error(exc, exc.filename or "the run directory")
        click.echo(f"newsbag: error: {err}", err=True)
        sys.exit(err.exit_code)
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)
    sys.exit(rv if isinstance(rv, int) else 0)
