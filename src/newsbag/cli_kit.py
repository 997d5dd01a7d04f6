"""The click building blocks the command modules share: the group and command classes, the option
decorators every command or stage command takes, and the parameter types. It imports no command
module, so each of them (and cli.py, which registers them) can import it."""

from __future__ import annotations

from functools import wraps
from pathlib import Path

import click

from .errors import did_you_mean
from .logsetup import setup_logging

__all__ = ["Group", "SectionedCommand", "ShardType", "builtin_options", "common", "config_option", "csv_list",
           "input_options", "split_csv"]


def common(func):
    """Options every command shares: --run-dir and --log-level."""

    @click.option("--run-dir", required=True, type=click.Path(file_okay=False, path_type=Path),
                  help="Run directory (`run` and `pages` create it; every command resumes or reads what is there).")
    @click.option("-l", "--log-level", default="info", show_default=True,
                  type=click.Choice(["debug", "info", "warning", "error"], case_sensitive=False))
    @wraps(func)
    def wrapper(*args, log_level: str, **kwargs):
        setup_logging(log_level)
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


def csv_list(value: str | None) -> tuple[str, ...]:
    return tuple(v.strip() for v in (value or "").split(",") if v.strip())


def split_csv(ctx: click.Context, param: click.Parameter, value: str | None) -> tuple[str, ...]:
    """A click callback: a comma-separated option's value as the tuple of its names."""
    return csv_list(value)


config_option = click.option("--config", "config_path", type=click.Path(exists=True, dir_okay=False, path_type=Path),
                             help="Pipeline config JSON (default: the embedded CPU bag).")


def input_options(func):
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


def builtin_options(workers_help: str = "Processes."):
    """Options of the commands that run one builtin stage: --config, --force, --workers, --json."""
    options = (
        click.option("--config", "config_path", type=click.Path(exists=True, dir_okay=False, path_type=Path),
                     help="Config (default: the run's config.resolved.json; this stage's entry of it is recorded there)."),
        click.option("--force", is_flag=True, help="Redo pages that are already finished."),
        click.option("--workers", type=click.IntRange(min=1), default=1, show_default=True, help=workers_help),
        click.option("--json", "as_json", is_flag=True, help="Print the call's summary as JSON on stdout."),
    )

    def decorate(func):
        for add in reversed(options):   # as if stacked on `func` in this order
            func = add(func)
        return func

    return decorate


class Group(click.Group):
    """A group whose commands list in `order` (names it leaves out come last, as added), that names
    the nearest command for a typo, and that answers being named alone with its help (exit 2), in
    the click versions that raise an error for it and those that do not."""

    group_class = type   # its sub-groups (slurm) are one too

    def __init__(self, *args, order: tuple[str, ...] = (), **kwargs):
        super().__init__(*args, **kwargs)
        self.order = order

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        if not args and self.no_args_is_help and not ctx.resilient_parsing:
            click.echo(ctx.get_help(), err=True)
            ctx.exit(2)
        return super().parse_args(ctx, args)

    def list_commands(self, ctx: click.Context) -> list[str]:
        rank = {name: i for i, name in enumerate(self.order)}
        return sorted(self.commands, key=lambda name: rank.get(name, len(rank)))

    def resolve_command(self, ctx: click.Context, args: list[str]):
        name = args[0] if args else ""
        if name and not name.startswith("-") and self.get_command(ctx, name) is None:
            shown = [n for n in self.list_commands(ctx) if not self.commands[n].hidden]
            ctx.fail(f"no command {name!r}{did_you_mean(name, shown)} (commands: {', '.join(shown)})")
        return super().resolve_command(ctx, args)


class SectionedCommand(click.Command):
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
