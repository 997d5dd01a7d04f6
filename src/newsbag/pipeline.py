"""`newsbag run`: resolve pages and stages, then run the stages in order and report."""

from __future__ import annotations

import hashlib
import logging
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Callable

from .config import BuiltinStage, ModelStage, PipelineConfig, load_run_config, record_builtin_run, to_jsonable
from .errors import EnvError, GpuPreflightError, NewsbagError, PartialFailure, RunDirError, RunnerError
from .io import read_json, write_json
from .page_outcomes import SourceOutcome
from . import rundir
from .images import InputLimits
from .inputs import Rejected, select_ids
from .manifest import PageRecord, manifest_pages, read_pages, select_shard
from .pages import build_pages, refresh_pages
from .planner import plan_run
from .progress import track
from .stages import KINDS, ModelSources, run_stage

__all__ = ["RunOptions", "RunSummary", "resolve_pages", "with_device", "plan", "run_builtin", "run_pipeline"]

log = logging.getLogger(__name__)
_REPORTED_FAILURES = 200  # per builtin stage in reports/run_*.json; logs/failures.jsonl has every one


@dataclass(frozen=True)
class RunOptions:
    run_dir: Path
    config_path: Path | None = None
    input_dirs: tuple[Path, ...] = ()
    manifest: Path | None = None
    recursive: bool = False
    stages: tuple[str, ...] = ()
    max_pages: int | None = None
    page_ids: tuple[str, ...] = ()
    shard: tuple[int, int] | None = None
    force: bool = False
    device: str | None = None
    workers: int = 1
    max_megapixels: float | None = None  # header pixel limit for new pages (None: the default)
    retry_failed: bool = False
    max_failed_fraction: float | None = None


# A page's status over the stages of one call: the worst wins (a page failed anywhere failed).
_PAGE_RANK = {"skipped": 0, "ok": 1, "failed": 2}
_COMPUTED = {"ok": "ok", "empty": "ok", "done": "ok", "failed": "failed"}


@dataclass
class RunSummary:
    pages: int
    config: str = ""  # the config file the run ran with (`rundir.config_to_run`)
    rejected: list[Rejected] = field(default_factory=list)
    sources: list[SourceOutcome] = field(default_factory=list)
    builtin: dict[str, dict] = field(default_factory=dict)
    builtin_kinds: list[str] = field(default_factory=list)   # the kind of each builtin stage the call ran
    errors: list[str] = field(default_factory=list)
    seconds: float = 0.0
    stage_seconds: dict[str, float] = field(default_factory=dict)  # per source and builtin stage, in run order
    page_status: dict[str, str] = field(default_factory=dict)  # ok | failed | skipped over this call's stages
    finished: bool = False  # the call got to its end (its stages ran, with or without failures)

    def note_page(self, page_id: str, status: str) -> None:
        """One stage's status of a page (ok, empty, done, failed, skipped)."""
        status = _COMPUTED.get(status, "skipped")
        if _PAGE_RANK[status] >= _PAGE_RANK[self.page_status.get(page_id, "skipped")]:
            self.page_status[page_id] = status

    def page_counts(self) -> dict[str, int]:
        """Pages ok (some stage computed them, none failed), failed (in some stage) and skipped
        (every stage found them current)."""
        counts = dict.fromkeys(_PAGE_RANK, 0)
        for status in self.page_status.values():
            counts[status] += 1
        counts["skipped"] += max(self.pages - len(self.page_status), 0)
        return {k: counts[k] for k in ("ok", "failed", "skipped")}

    def did_nothing(self) -> bool:
        """Every page of every stage was current: no page computed or failed, no input rejected, no error."""
        return not (self.rejected or self.errors or any(s != "skipped" for s in self.page_status.values()))


def resolve_pages(opts: RunOptions) -> tuple[list[PageRecord], list[Rejected]]:
    """Pages of this run: from inputs (merged into the manifest) or the existing manifest."""
    limits = InputLimits.from_megapixels(opts.max_megapixels)
    if opts.input_dirs or opts.manifest:  # --pages is checked and applied there, before anything is written
        pages, rejected = build_pages(opts.run_dir, list(opts.input_dirs), opts.manifest, opts.recursive, opts.max_pages,
                                      limits, opts.page_ids)
        return select_shard(pages, opts.shard), rejected
    if opts.page_ids:  # ids of the whole manifest, then the shard of those
        pages = manifest_pages(opts.run_dir, opts.max_pages)
        wanted = set(select_ids([p.page_id for p in pages], opts.page_ids))
        pages = select_shard([p for p in pages if p.page_id in wanted], opts.shard)
    else:
        pages = manifest_pages(opts.run_dir, opts.max_pages, opts.shard)
    # this call's pages of the manifest: hash again what changed
    return refresh_pages(opts.run_dir, pages, limits)


def with_device(config: PipelineConfig, device: str | None) -> PipelineConfig:
    """The config with every model stage's device replaced (``--device``)."""
    if device is None:
        return config
    return replace(config, stages=tuple(replace(s, device=device) if isinstance(s, ModelStage) else s
                                        for s in config.stages))


def plan(config: PipelineConfig, stages, page_ids: list[str], run_dir: Path) -> list[dict]:
    """Rows of what a run would do: per source, and per output of a builtin stage, pages to run and
    pages already done, as `planner.plan_run` plans the run (an upgrade that bumped a runner's or a
    stage's code revision shows its pages to do, a page whose inputs the run redoes first counts
    to do, as `newsbag status` counts); a page not yet in the manifest has nothing done."""
    wanted = set(page_ids)
    run_plan = plan_run(config, run_dir, stages=stages, records=[r for r in read_pages(run_dir) if r.page_id in wanted])
    n, rows = len(page_ids), []
    for step, stage in zip(run_plan.stages, stages):
        if isinstance(stage, ModelStage):
            where = {"family": stage.family, "env": stage.env.python, "device": stage.device}
            done = [(o.name, o.done) for o in step.outputs]
        else:   # a builtin stage that made nothing yet: one row of its kind
            where = {"family": "(builtin)", "env": "", "device": "cpu"}
            done = [(f"{stage.kind}/{o.name}", o.done) for o in step.outputs] or [(f"{stage.kind}/{stage.kind}", 0)]
        rows += [{"stage": stage.name, "source": source, **where, "pages": n, "done": k, "todo": n - k}
                 for source, k in done]
    return rows


def _report_name(opts: RunOptions) -> str:
    return "run_report.json" if opts.shard is None else f"run_report.shard-{opts.shard[0]}-of-{opts.shard[1]}.json"


def run_pipeline(opts: RunOptions, summary: RunSummary | None = None) -> RunSummary:
    """Run the selected stages over the selected pages; `summary`, when given, is filled in even
    when this raises (the caller reports what ran before the error).

    Raises:
        ConfigError / InputError: before anything is written.
        EnvError, GpuPreflightError: a model env is missing or the GPU is unusable (the
            other stages still ran).
        PartialFailure: some pages failed or were rejected.
        RunDirError: the run dir could not be written (disk full...); the run report is
            still written if the disk takes it (a few KB), and the rerun resumes.
    """
    summary = summary if summary is not None else RunSummary(pages=0)
    t0 = time.monotonic()
    try:
        return _run_pipeline(opts, summary, t0)
    except RunDirError as exc:
        summary.errors.append(str(exc))
        summary.seconds = time.monotonic() - t0
        if Path(opts.run_dir).is_dir():
            try:
                _write_summary(Path(opts.run_dir), opts, summary)
            except (RunDirError, OSError) as again:
                log.error("run report not written either: %s", again)
        raise


def _run_pipeline(opts: RunOptions, summary: RunSummary, t0: float) -> RunSummary:
    config = with_device(load_run_config(opts.run_dir, opts.config_path), opts.device)
    summary.config = config.path
    stages = config.select(list(opts.stages))
    run_dir = Path(opts.run_dir)
    pages, rejected = resolve_pages(opts)  # writes the manifest only once the inputs and --pages are valid
    rundir.update_config_record(run_dir, lambda _: to_jsonable(config.resolved))
    summary.pages, summary.rejected = len(pages), rejected
    page_ids = [p.page_id for p in pages]
    fatal: list[NewsbagError] = []
    # the call's summary (`newsbag.summary`) says it at its end, with the counts
    log.debug("run %s: %d page(s), stages %s", run_dir, len(pages), ",".join(s.name for s in stages))
    for stage in stages:
        if isinstance(stage, ModelStage):
            for variant in stage.variants:
                _run_variant(ModelSources(stage), variant, run_dir, pages, config, opts, summary, fatal)
            rundir.drop_shared_passes(run_dir, stage.name, page_ids)
        elif opts.force or _has_work(config, run_dir, stage, pages, summary):
            summary.builtin[stage.name] = run_builtin(
                stage, run_dir, page_ids, opts, summary, record=lambda now: record_builtin_run(now, config, stage.kind))
        else:   # said as a call of it that found every page current would say it
            summary.builtin_kinds.append(stage.kind)
            summary.builtin[stage.name] = {"ok": 0, "skipped": len(page_ids), "failed": 0, "failures": []}
    summary.seconds = time.monotonic() - t0
    summary.finished = True
    _write_summary(run_dir, opts, summary)
    failed_pages = sum(o.counts()["failed"] for o in summary.sources) + sum(
        int(b.get("failed", 0)) for b in summary.builtin.values())
    for exc_type in (GpuPreflightError, EnvError, RunnerError):
        for exc in fatal:
            if isinstance(exc, exc_type):
                raise exc_type(f"{exc} ({len(fatal)} source(s) could not run; other stages finished)")
    if failed_pages or rejected:
        # Point only at ledgers that exist: with rejected inputs alone there is no failures.jsonl.
        where = [str(p) for p, n in ((rundir.failures_ledger(run_dir), failed_pages), (rundir.rejected_path(run_dir), rejected))
                 if n and p.exists()]
        raise PartialFailure(
            f"{failed_pages} page run(s) failed and {len(rejected)} input(s) rejected; "
            f"see {' and '.join(where + [f'`newsbag status --run-dir {run_dir}`'])}"
        )
    return summary


def _has_work(config: PipelineConfig, run_dir: Path, stage: BuiltinStage, pages: list[PageRecord],
              summary: RunSummary) -> bool:
    """Whether builtin `stage` has work on `pages` now that the stages before it ran: its plan
    (`planner.plan_run`: the rule its run skips pages by) says so, which the log then says, or its
    kind's plan does not cover all it writes (`stages.Kind.planned`) and it always runs. The
    plan's time is the stage's in `summary`."""
    if not KINDS[stage.kind].planned:
        return True
    started = time.monotonic()
    (planned,) = plan_run(config, run_dir, stages=[stage], records=pages).stages
    summary.stage_seconds[stage.name] = time.monotonic() - started
    if planned.work:
        whole = "" if all(o.whole for o in planned.outputs) else ", run-level outputs out of date"
        todo = len(planned.todo()) if planned.outputs else planned.pages   # none made yet: every page
        log.info("%s: %d of %d page(s) to redo%s", stage.name, todo, planned.pages, whole)
    return planned.work


def _run_variant(sources: ModelSources, variant: str, run_dir: Path, pages: list[PageRecord], config: PipelineConfig,
                 opts: RunOptions, summary: RunSummary, fatal: list[NewsbagError]) -> None:
    """Run one source of a model stage over `pages`; `summary` gets its outcome, `fatal` the error
    that kept it from running."""
    label = f"{sources.name}/{variant}"
    started = time.monotonic()
    with track(label, len(pages)) as tracker:
        try:
            outcome = sources.run(run_dir, pages, variant=variant, runners=config.runners_dir, force=opts.force,
                                  retry_failed=opts.retry_failed, max_failed_fraction=opts.max_failed_fraction,
                                  on_page=lambda o: tracker.advance(o.status), report_name=_report_name(opts))
        except (EnvError, GpuPreflightError, RunnerError) as exc:
            log.error("%s", exc)
            fatal.append(exc)
            summary.errors.append(str(exc))
            return
        finally:
            summary.stage_seconds[label] = time.monotonic() - started
    summary.sources.append(outcome)
    for page_id, o in outcome.pages.items():
        summary.note_page(page_id, o.status)
    c = outcome.counts()
    share = outcome.empty_share()
    if _computed(outcome.to_json()):   # a source with every page current says nothing
        log.info("%s: ok %d, empty %d%s, skipped %d, failed %d on %s", label, c["ok"], c["empty"],
                 "" if share is None else f" ({share:.0%})", c["skipped"], c["failed"], outcome.device_used or "-")
    for flag in outcome.flags():
        log.warning("%s: FLAGGED: %s", label, flag)


def run_builtin(stage: BuiltinStage, run_dir: Path, page_ids: list[str], opts: RunOptions, summary: RunSummary,
                record: Callable[[dict | None], dict] | None = None) -> dict:
    """Run one builtin stage (its kind's line in `stages.KINDS`) over `page_ids`; `summary` gets
    each page's status and the stage's time; `record`: the change to the run's config record it
    makes once it holds the stage lock (`stages.run_stage`)."""
    started = time.monotonic()
    summary.builtin_kinds.append(stage.kind)

    def progress(page_id: str, status: str) -> None:
        summary.note_page(page_id, status)
        tracker.advance(status)

    try:
        with track(stage.name, len(page_ids)) as tracker:
            return run_stage(stage.kind, run_dir, page_ids, to_jsonable(stage.options), force=opts.force,
                             workers=opts.workers, progress=progress, record=record)
    finally:   # after its plan's time, when the run planned it (`_has_work`)
        summary.stage_seconds[stage.name] = summary.stage_seconds.get(stage.name, 0.0) + time.monotonic() - started


def _summary_name(opts: RunOptions) -> str:
    """One report per kind of call: its stages, its shard and the pages it names (--pages), so
    calls at once on other pages never overwrite each other's report (and its failures)."""
    name = "-".join(opts.stages) if opts.stages else "all"
    if opts.shard is not None:
        name += f".shard-{opts.shard[0]}-of-{opts.shard[1]}"
    if opts.page_ids:
        name += f".pages-{hashlib.sha256(' '.join(sorted(set(opts.page_ids))).encode()).hexdigest()[:8]}"
    return name


def _computed(entry: dict) -> bool:
    """Whether a report entry (a source's `to_json`, a builtin stage's result) records work: a page
    computed or failed, or a runner launched."""
    counts = entry.get("counts", entry)
    return bool(entry.get("launches") or any(int(counts.get(k) or 0) for k in ("ok", "empty", "failed")))


def _write_summary(run_dir: Path, opts: RunOptions, summary: RunSummary) -> None:
    """What ran where: one report per kind of call (`_summary_name`), so parallel jobs never clash.

    A source or builtin stage that computed nothing in this call keeps its entry from the call
    that did (listed under "kept"), and a call that did nothing at all leaves the report as it
    is: a no-op rerun would otherwise erase which device ran what.
    """
    path = rundir.reports_dir(run_dir) / f"run_{_summary_name(opts)}.json"
    if summary.did_nothing() and path.exists():
        return
    try:
        before = read_json(path)
    except (OSError, ValueError):
        before = {}
    before = before if isinstance(before, dict) else {}
    old_sources = {e.get("source"): e for e in before.get("sources") or () if isinstance(e, dict)}
    old_builtin = before.get("builtin") if isinstance(before.get("builtin"), dict) else {}
    sources, builtin, kept = [], {}, []
    for entry in (o.to_json() for o in summary.sources):
        if not _computed(entry) and entry["source"] in old_sources:
            entry = old_sources[entry["source"]]
            kept.append(entry["source"])
        sources.append(entry)
    for name, result in summary.builtin.items():
        entry = {**{k: v for k, v in result.items() if k in ("recommended_variant", "failed", "ok", "skipped",
                                                               "skipped_variants", "pages", "selected")},
                 "failures": result.get("failures", [])[:_REPORTED_FAILURES]}
        if not _computed(entry) and name in old_builtin:
            entry = old_builtin[name]
            kept.append(name)
        builtin[name] = entry
    write_json(path, {
        "finished": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "config": summary.config,
        "pages": summary.pages,
        "seconds": round(summary.seconds, 2),
        "rejected": [r.__dict__ for r in summary.rejected],
        "sources": sources,
        "builtin": builtin,
        "kept": kept,
        "errors": summary.errors,
    })
