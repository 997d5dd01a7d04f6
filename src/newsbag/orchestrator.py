"""Run model stages: launch one runner subprocess per source, watch it, record every page outcome.

A runner is killed and restarted (for the pages it has not reached) when it crashes or
makes no progress for `page_timeout_s`; the page it was on is recorded as failed. The
orchestrator then checks every output it was told about, so a runner that exits 0
without writing, or writes invalid JSON, cannot pass a page off as done.
"""

from __future__ import annotations

import json
import logging
import os
import queue
import signal
import subprocess
import threading
import time
from contextlib import contextmanager
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Callable, Iterator

from .config import ModelStage
from .errors import EnvError, GpuPreflightError, RunDirError, RunnerError
from .failures import record_failures
from .io import DISK_ERRNOS, open_appending, remove_dead_temps, run_dir_error
from .manifest import PageRecord
from .source_plan import source_pages
from . import freshness, rundir
from .page_outcomes import (PageOutcome, SourceOutcome, check_output, record_failure, record_not_started,
                            report_record, written_outcome)
from .reports import mark_runner_killed
from .rundir import source_dir
from .runner_events import read_events
from .source_run import (Abort, Blame, Decision, Ended, Isolate, Limits, OverBudget, SourceState, Stop, advance,
                         budget_error, describe_exit, how_it_ended, settle, setup_error)

__all__ = ["run_source"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class _Launch:
    """What `_follow` saw of one runner, once it exited or was killed."""

    in_flight: list[str]  # pages started (alone or as one batch) and not reported when it stopped
    exit_code: int
    reason: str  # exit | page_timeout | job_timeout | aborted
    fatal: dict | None
    setup: dict | None
    end: dict | None


def _kill(proc: subprocess.Popen) -> None:
    for sig, wait in ((signal.SIGTERM, 5), (signal.SIGKILL, 5)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(wait)
            return
        except subprocess.TimeoutExpired:
            continue


@contextmanager
def _interrupts_held() -> Iterator[None]:
    """Ctrl-C and SIGTERM wait until the block ends, then act as they would have.

    For stopping a runner on the way out: a second Ctrl-C there cut the stop short and left
    the runner's report saying ``running``. Only the main thread has signal handlers.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    held: list[int] = []
    previous = {}
    try:
        for sig in (signal.SIGINT, signal.SIGTERM):
            previous[sig] = signal.signal(sig, lambda signum, frame: held.append(signum))
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        if held:
            signal.raise_signal(held[0])


def _send_job(proc: subprocess.Popen, job: dict) -> None:
    """The job goes through the runner's stdin: no job file to leave behind when killed."""
    try:
        proc.stdin.write(json.dumps(job).encode())
        proc.stdin.close()
    except (BrokenPipeError, OSError):  # died before reading it; its exit code says why
        pass


def _launch(stage: ModelStage, variant: str, job: dict, log_path: Path, runners: Path,
            on_page: Callable[[PageOutcome], None], deadline: float,
            stop: Callable[[], bool] = lambda: False) -> _Launch:
    """Start one runner over `job` and follow its events until it exits or is killed.

    The no-progress limit is per page: `page_timeout_s` for a page alone, times the number
    of unfinished pages while a batch is in flight (a batch reports each page as it ends).
    The runner is killed (whole process group) on a timeout, when `stop()` turns true, and on
    any exception here, Ctrl-C included, so it never outlives this call.
    """
    cmd = [stage.env.python, str(runners / f"{stage.family}.py"), "--job", "/dev/stdin"]
    env = {**os.environ, **stage.env.env, "PYTHONUNBUFFERED": "1", "NEWSBAG_PARENT_PID": str(os.getpid())}
    header = f"=== {time.strftime('%Y-%m-%dT%H:%M:%S')} {' '.join(cmd)}\n"
    try:
        log_path.parent.mkdir(parents=True, exist_ok=True)
        log_fh = os.fdopen(open_appending(log_path), "a", encoding="utf-8")
        log_fh.write(header)
        log_fh.flush()
    except OSError as exc:
        if exc.errno in DISK_ERRNOS:
            raise run_dir_error(exc, log_path, len(header)) from None
        raise
    with log_fh:
        try:
            proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=log_fh, env=env,
                                    start_new_session=True, stdin=subprocess.PIPE)
        except FileNotFoundError:
            raise EnvError(f"stage {stage.name}: interpreter {stage.env.python} (env {stage.env.name!r}) "
                           "does not exist; create the env or fix envs in the config") from None
        except PermissionError:
            raise EnvError(f"stage {stage.name}: interpreter {stage.env.python} is not executable") from None
        try:
            result = _follow(stage, proc, job, log_fh, on_page, deadline, stop)
        except BaseException as exc:
            with _interrupts_held():
                _kill(proc)
                _note_killed(job, proc.pid, "newsbag was interrupted (Ctrl-C or SIGTERM) and stopped it"
                             if isinstance(exc, KeyboardInterrupt) else f"newsbag stopped it: {type(exc).__name__}")
            raise
        if result.end is None:
            _note_killed(job, proc.pid, _why_stopped(result, stage))
        return result


def _why_stopped(result: _Launch, stage: ModelStage) -> str:
    """Why a runner ended without its ``end`` event, as its run report records it."""
    if result.reason == "page_timeout":
        return f"newsbag stopped it: no progress for {stage.page_timeout_s:g}s on a page"
    if result.reason == "job_timeout":
        return f"newsbag stopped it: stage timeout {stage.timeout_s:g}s reached"
    if result.reason == "aborted":
        return "newsbag stopped it: too many pages failed (--max-failed-fraction)"
    return f"runner {describe_exit(result.exit_code)}"


def _note_killed(job: dict, pid: int, how: str) -> None:
    """The runner's report says it was killed, not ``running``; a disk that refuses the write
    must not hide why the runner stopped (the report then stays as it was)."""
    try:
        mark_runner_killed(Path(job["out_dir"]), job["report_name"], pid, how)
    except (OSError, RunDirError) as exc:
        log.warning("%s/%s: run report not marked killed: %s", job["stage"], job["variant"], exc)


def _follow(stage: ModelStage, proc: subprocess.Popen, job: dict, log_fh, on_page, deadline: float,
            stop: Callable[[], bool]) -> _Launch:
    q: queue.Queue = queue.Queue()
    threading.Thread(target=read_events, args=(proc.stdout, q, log_fh), daemon=True).start()
    _send_job(proc, job)
    in_flight: list[str] = []
    fatal = setup = end = None
    last_event = time.monotonic()
    reason = "exit"
    while True:
        now = time.monotonic()
        if stop():
            reason = "aborted"
            _kill(proc)
            break
        wait = min(deadline, last_event + stage.page_timeout_s * max(1, len(in_flight))) - now
        if wait <= 0:
            reason = "job_timeout" if deadline <= now else "page_timeout"
            _kill(proc)
            break
        try:
            event = q.get(timeout=min(wait, 1.0))
        except queue.Empty:
            continue
        if event is None:
            break
        last_event = time.monotonic()
        kind = event.get("event")
        if kind == "start" and isinstance(event.get("page_id"), str):
            in_flight = [event["page_id"]]
        elif kind == "batch" and isinstance(event.get("page_ids"), list):
            in_flight = [p for p in event["page_ids"] if isinstance(p, str)]
        elif kind == "done" and isinstance(event.get("page_id"), str):
            outcome = PageOutcome(event["page_id"], event.get("status", "ok"), event.get("error") or event.get("reason"),
                                  event.get("seconds"))
            in_flight = [p for p in in_flight if p != outcome.page_id]
            on_page(outcome)
        elif kind == "setup":
            setup = event
        elif kind == "fatal":
            fatal = event
        elif kind == "end":
            end = event
    code = proc.wait()
    return _Launch(in_flight, code, reason, fatal, setup, end)


def _remove_dead_runner_temps(out_dir: Path, *, again: bool = False) -> None:
    """`io.remove_dead_temps` over every folder a runner of `out_dir` writes into (`again`: for
    one that died since the first sweep)."""
    for folder in rundir.runner_folders(out_dir):
        remove_dead_temps(folder, again=again)


def run_source(
    run_dir: Path,
    stage: ModelStage,
    variant: str,
    pages: list[PageRecord],
    *,
    runners: Path,
    force: bool = False,
    retry_failed: bool = False,
    max_failed_fraction: float | None = None,
    on_page: Callable[[PageOutcome], None] = lambda o: None,
    report_name: str = "run_report.json",
    out_dir: Path | None = None,
    ledger: bool = True,
) -> SourceOutcome:
    """Run one source (stage × variant) over `pages`, resuming finished pages.

    Pages go to the source folder, or to `out_dir` for a runner whose pages are no layout
    source (the transcription stage's recogniser). Failed pages go into logs/failures.jsonl;
    ``ledger=False`` for a caller that writes its own rows of them (transcription: one row a
    page, naming it).

    Crash isolation: the runner reports the page (or batch of pages) in flight. A page alone
    in flight when the runner dies or stalls is failed and not retried in this call; when a
    batch was in flight, its unfinished pages are rerun one at a time, so only the culprit
    fails. Pages that failed before are computed after the others; those that crashed or hung
    the runner before are retried only with `retry_failed` (or `force`). The source stops once
    more than `max_failed_fraction` (default: the stage's) of the pages it computes failed.

    Raises:
        EnvError: the env's interpreter or a library the runner needs is missing.
        GpuPreflightError: a GPU was required, none usable, and CPU fallback refused.
        RunnerError: the runner died before processing any page (the source never started).
    """
    source = _SourceRun(Path(run_dir), stage, variant, runners=runners, force=force, on_page=on_page,
                        report_name=report_name, out_dir=out_dir, ledger=ledger,
                        fraction=stage.max_failed_fraction if max_failed_fraction is None else max_failed_fraction)
    source.plan(pages, retry_failed)
    return source.run()


class _SourceRun:
    """One call of `run_source`: the runners it launches over the source's pages and what it
    records of them. `source_run.settle` decides what follows each launch; this carries it out."""

    def __init__(self, run_dir: Path, stage: ModelStage, variant: str, *, runners: Path, force: bool,
                 on_page: Callable[[PageOutcome], None], report_name: str, out_dir: Path | None, ledger: bool,
                 fraction: float):
        self.run_dir, self.stage, self.variant, self.runners = run_dir, stage, variant, runners
        self.force, self.on_page, self.report_name, self.ledger = force, on_page, report_name, ledger
        self.out_dir = out_dir or source_dir(run_dir, stage.name, variant)
        self.where = f"{stage.name}/{variant}"
        self.log_path = rundir.logs_dir(run_dir) / f"{stage.name}.{variant}.log"
        self.limits = Limits(stage.page_timeout_s, stage.timeout_s, stage.max_restarts, fraction)
        self.outcome = SourceOutcome(self.where, stage.name, variant, stage.family, stage.device,
                                     max_empty_share=stage.max_empty_share)
        self.t0 = time.monotonic()
        self.state = SourceState(0)
        self.held: list[PageOutcome] = []  # pages not run: they crashed or hung the runner last time
        self.remaining: list[PageRecord] = []
        # Outcomes the variant's run report lacks: those decided here (the page a runner died on,
        # invalid output, pages not run) and those of a runner killed before it wrote them down.
        # Every launch gets them (job "settled"); once one ends, they are in the report.
        self.unrecorded: dict[str, PageOutcome] = {}
        self.reported: dict[str, PageOutcome] = {}  # pages the runner launched last settled

    def plan(self, pages: list[PageRecord], retry_failed: bool) -> None:
        """Skip the current pages, hold those that stopped the runner last time; the rest are to do,
        those that failed before last (`source_plan.source_pages`: the rule the planner counts by)."""
        out_dir = self.out_dir
        self.prints = {p.page_id: self.stage.page_fingerprint(self.variant, p.image_sha256) for p in pages}
        self.seen = freshness.page_identities(out_dir, self.prints)  # a page file is removed only while it is this one
        planned = source_pages(out_dir, self.prints, retry_failed=retry_failed, force=self.force,
                               first=self.report_name, now=self.seen)
        self.current = planned.current
        for page in pages:
            if page.page_id in self.current and not self.force:
                self._record(PageOutcome(page.page_id, "skipped"))
            # A valid page made from other parameters, another image or another runner revision is
            # stale: remove it, so that fusion and exports never take it for the page if it now fails.
            # A current one `force` redoes stays: the runner leaves it as it is when the model answers
            # the same (only its `seconds` differ), so no later stage redoes the page; if the page now
            # fails, it is removed once the runner is done (`_close`).
            elif page.page_id not in self.current:
                freshness.remove_stale_page(out_dir, page.page_id, self.seen.get(page.page_id))
        for page_id, before in planned.hold.items():
            why = before.get("error", "it stopped the runner")
            self.held.append(PageOutcome(page_id, "failed", f"not retried: {why} (last run); rerun with --retry-failed"))
        for o in self.held:
            self._record(o)
        if self.held:
            log.warning("%s: %d page(s) that crashed or hung the runner last time are not retried; "
                        "rerun with --retry-failed to try them again", self.where, len(self.held))
        by_id = {p.page_id: p for p in pages}
        todo = [by_id[p] for p in planned.fresh + planned.retry]
        if todo:  # the runner writes there: what killed runners left goes first
            log.info("%s: %d of %d page(s) to compute", self.where, len(todo), len(pages))
            _remove_dead_runner_temps(out_dir)
        self.by_id = {p.page_id: p for p in todo}
        self.remaining = list(todo)
        self.state = SourceState(len(todo))
        self.deadline = time.monotonic() + self.stage.timeout_s

    def run(self) -> SourceOutcome:
        """Launch runners until every page to do is settled, then record what failed."""
        # The ledger gets this call's page failures even when a restarted runner then dies
        # for good (the error below propagates; the pages failed before it stay on record).
        try:
            self._launch_until_settled()
            if self.unrecorded:  # the last runner died, or pages failed after it
                self._write_unrecorded()
        except (EnvError, GpuPreflightError, RunnerError) as exc:
            record_not_started(self.run_dir, self.stage.name, self.variant, exc, self.log_path,
                                self.state.started, self.ledger)
            raise
        else:
            rundir.not_started_path(self.run_dir, self.stage.name, self.variant).unlink(missing_ok=True)
        finally:
            self._close()
        return self.outcome

    def _launch_until_settled(self) -> None:
        while self.remaining:
            error = budget_error(self.state, self.limits)
            if error:
                log.error("%s: %s", self.where, error.removeprefix("not run: "))
                self._fail(self.remaining, error, "NotRun")
                return
            ended = self._launch_once()
            decision = settle(ended, self.state, self.limits)
            self.state = advance(self.state, ended)
            if not self._carry_out(decision, ended):
                return

    def _launch_once(self) -> Ended:
        """One runner over the pages left; its outputs checked as it reports them, and those it
        wrote without saying so settled."""
        job = self._job(self.remaining)
        self.outcome.launches += 1
        self.reported = {}
        result = _launch(self.stage, self.variant, job, self.log_path, self.runners, self._take, self.deadline,
                         lambda: budget_error(self.state, self.limits) is not None
                         and any(p.page_id not in self.outcome.pages for p in self.remaining))
        if result.setup:
            self.outcome.device_used = result.setup.get("device")
            self.outcome.info = {k: v for k, v in result.setup.items() if k not in ("event", "device")}
        if result.end:
            end = result.end
            self.outcome.info.update({k: end[k] for k in ("peak_rss_mb", "mean_page_seconds") if k in end})
        where = f"stage {self.stage.name} variant {self.variant} (env {self.stage.env.name}: {self.stage.env.python})"
        error = setup_error(result.fatal, result.exit_code, bool(self.reported), where, self.log_path)
        if error:
            raise error
        self._settle_written(result)
        if result.end is None:  # killed before its last report write: its last records may be lost
            self.unrecorded.update({k: o for k, o in self.reported.items() if o.status != "skipped"})
            _remove_dead_runner_temps(self.out_dir, again=True)  # and it may have died mid-write
        else:
            for page_id in job["settled"]:
                del self.unrecorded[page_id]
        in_flight = tuple(p for p in result.in_flight if p in self.by_id and p not in self.outcome.pages)
        self.remaining = self._left()
        return Ended(result.reason, result.exit_code, result.setup is not None,
                     tuple(o.status for o in self.reported.values()), in_flight, len(self.remaining))

    def _settle_written(self, result: _Launch) -> None:
        """Before blaming a page for a crash or as missing: one whose `done` was lost but whose
        output is written and current is done. After a crash only the pages in flight are
        looked at; the restarted runner reports the others' outputs itself (skipped)."""
        unsettled = [p for p in self.remaining if p.page_id not in self.outcome.pages
                     and (result.exit_code == 0 or p.page_id in result.in_flight)]
        for page in unsettled:
            if self.force and page.page_id in self.current and freshness.file_identity(
                    self.out_dir / f"{page.page_id}.json") == self.seen.get(page.page_id):
                continue  # the page `force` kept, not one this call wrote
            written = written_outcome(self.out_dir, page.page_id, self.prints[page.page_id])
            if written:
                self._take(written)

    def _carry_out(self, decision: Decision, ended: Ended) -> bool:
        """Act on `decision`; False once no runner is to run over pages again."""
        if isinstance(decision, Abort):
            raise RunnerError(f"stage {self.stage.name} variant {self.variant}: {decision.why}; see {self.log_path}")
        if isinstance(decision, Stop):
            if decision.in_flight_error:
                self._fail([self.by_id[p] for p in ended.in_flight], decision.in_flight_error, decision.error_class)
            self._fail(self._left(), decision.error, decision.error_class)
            return False
        if isinstance(decision, OverBudget):
            return True  # the budget check before the next launch fails what is left
        if isinstance(decision, Blame):
            pages = [self.by_id[p] for p in decision.pages]
            for page in pages:  # one line each in the job's log: the page to look at
                log.error("page %s (%s): %s: %s; rerun with --retry-failed --pages %s --stages %s",
                          page.page_id, page.path, self.where, decision.error, page.page_id, self.stage.name)
            self._fail(pages, decision.error, decision.error_class)
        elif isinstance(decision, Isolate):
            log.warning("%s: runner %s during a batch of %d page(s); rerunning them one at a time",
                        self.where, decision.how, len(decision.pages))
        self.remaining = self._left()
        if self.remaining:
            log.warning("%s: %s; restarting for %d remaining page(s)", self.where,
                        how_it_ended(ended.reason, ended.exit_code, self.stage.page_timeout_s), len(self.remaining))
        return True

    def _write_unrecorded(self) -> None:
        """No runner is left to write the unrecorded outcomes down: one more writes only the
        report (no page, no model load)."""
        result = _launch(self.stage, self.variant, self._job([]), self.log_path, self.runners, lambda o: None,
                         time.monotonic() + self.stage.page_timeout_s)
        if result.end is None:
            log.warning("%s: %d page outcome(s) not written into %s: runner %s; see %s", self.where,
                        len(self.unrecorded), self.report_name, describe_exit(result.exit_code), self.log_path)

    def _close(self) -> None:
        self.outcome.seconds = time.monotonic() - self.t0
        failed = [o for o in self.outcome.pages.values() if o.status == "failed"]
        for o in failed if self.force else ():   # a current page kept for `force` that failed now
            if o.page_id in self.current:
                freshness.remove_stale_page(self.out_dir, o.page_id, self.seen.get(o.page_id))
        # Held pages did not run: their failure is in the ledger since the call it happened in.
        not_run = {o.page_id for o in self.held}
        if self.ledger:
            record_failures(self.run_dir, self.stage.name,
                                   [asdict(o) for o in failed if o.page_id not in not_run], variant=self.variant)

    def _left(self) -> list[PageRecord]:
        return [p for p in self.remaining if p.page_id not in self.outcome.pages]

    def _record(self, o: PageOutcome) -> None:
        self.outcome.pages[o.page_id] = o
        self.on_page(o)

    def _fail(self, pages: list[PageRecord], error: str, error_class: str) -> None:
        for page in pages:
            record_failure(self.out_dir, page, error, error_class, self.prints[page.page_id])
            self.unrecorded[page.page_id] = o = PageOutcome(page.page_id, "failed", error)
            self.state = replace(self.state, failed=self.state.failed + 1)
            self._record(o)

    def _take(self, o: PageOutcome) -> None:
        """Check the output a runner claims as soon as it says so, so progress is live."""
        page = self.by_id.get(o.page_id)
        if page is None:
            return
        if o.status != "failed":  # ok, empty or skipped: each claims an output
            problem = check_output(self.out_dir, page)
            if problem:
                record_failure(self.out_dir, page, problem, "InvalidOutput")
                o = self.unrecorded[o.page_id] = PageOutcome(o.page_id, "failed", problem, o.seconds)
        if o.status == "failed":
            self.state = replace(self.state, failed=self.state.failed + 1)
        self.reported[o.page_id] = o
        self._record(o)

    def _job(self, pages: list[PageRecord]) -> dict:
        stage = self.stage
        return {
            "stage": stage.name, "variant": self.variant, "family": stage.family,
            "params": dict(stage.variants[self.variant]), "device": stage.device,
            # Siblings' params: variants that differ only in post-processing share one model pass.
            "stage_variants": {v: dict(p) for v, p in stage.variants.items()},
            "allow_cpu_fallback": stage.allow_cpu_fallback, "out_dir": str(self.out_dir.resolve()),
            "label_map": dict(stage.label_map), "force": self.force, "report_name": self.report_name,
            "isolate": sorted(self.state.isolate & {p.page_id for p in pages}),
            "max_empty_share": stage.max_empty_share,
            "settled": {k: report_record(o) for k, o in self.unrecorded.items()},
            "pages": [{"page_id": p.page_id, "image_path": p.image_path, "path": p.path, "width": p.width,
                       "height": p.height, "fingerprint": self.prints[p.page_id]} for p in pages],
        }
