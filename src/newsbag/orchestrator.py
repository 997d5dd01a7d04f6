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
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable, Iterator

from .config import ModelStage
from .errors import EnvError, GpuPreflightError, RunDirError, RunnerError
from .failures import is_held, previous_failure, record_failures
from .io import DISK_ERRNOS, read_page, remove_dead_temps, write_json, run_dir_error
from .pages import PageRecord
from . import freshness, rundir
from .reports import mark_runner_killed
from .rundir import failure_path, source_dir

__all__ = ["PageOutcome", "SourceOutcome", "run_source", "split_event"]

log = logging.getLogger(__name__)
EVENT_PREFIX = "@@newsbag "
EXIT_MISSING_DEPENDENCY = 3
EXIT_DEVICE_UNAVAILABLE = 5
EXIT_CONTEXT_LOST = 8  # runners/_loop.py: a sticky CUDA error; a fresh runner does the rest


@dataclass(frozen=True)
class PageOutcome:
    page_id: str
    status: str  # ok | empty | skipped | failed
    error: str | None = None  # failed: the error; empty: why nothing usable came back
    seconds: float | None = None


@dataclass
class SourceOutcome:
    source: str
    stage: str
    variant: str
    family: str
    device_requested: str
    device_used: str | None = None
    info: dict = field(default_factory=dict)
    pages: dict[str, PageOutcome] = field(default_factory=dict)
    launches: int = 0
    seconds: float = 0.0

    max_empty_share: float = 0.2

    def counts(self) -> dict[str, int]:
        out = {"ok": 0, "empty": 0, "failed": 0, "skipped": 0}
        for o in self.pages.values():
            out[o.status] = out.get(o.status, 0) + 1
        return out

    def empty_share(self) -> float | None:
        """Empty pages among the pages the model answered in this call (ok + empty)."""
        c = self.counts()
        answered = c["ok"] + c["empty"]
        return c["empty"] / answered if answered else None

    def flags(self) -> list[str]:
        """Warnings for the run report: a model that answers but never parses looks like success."""
        share = self.empty_share()
        if share is None or share <= self.max_empty_share:
            return []
        c = self.counts()
        return [f"{c['empty']} of {c['ok'] + c['empty']} pages empty ({share:.0%}, above {self.max_empty_share:.0%}): "
                f"the model answers but nothing usable parses; see logs/{self.stage}.{self.variant}.log"]

    def to_json(self) -> dict:
        share = self.empty_share()
        return {
            "source": self.source, "stage": self.stage, "variant": self.variant,
            "family": self.family, "device_requested": self.device_requested,
            "device_used": self.device_used, "info": self.info, "counts": self.counts(),
            "empty_share": None if share is None else round(share, 4), "flags": self.flags(),
            "launches": self.launches, "seconds": round(self.seconds, 3),
            "failures": {k: v.error for k, v in self.pages.items() if v.status == "failed"},
            "empty": {k: v.error for k, v in self.pages.items() if v.status == "empty"},
        }


def _describe_exit(code: int) -> str:
    if code in (137, -signal.SIGKILL):  # what the kernel's OOM killer (and Slurm's) sends
        return f"{'exited 137' if code == 137 else 'killed by SIGKILL'} (out of memory?)"
    if code == EXIT_CONTEXT_LOST:
        return f"exited {code} (its CUDA context was lost)"
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exited {code}"


@dataclass
class _Launch:
    done: dict[str, PageOutcome]
    in_flight: list[str]  # pages started (alone or as one batch) and not reported when it stopped
    exit_code: int
    reason: str  # exit | page_timeout | job_timeout | aborted
    fatal: dict | None
    setup: dict | None
    end: dict | None


_STATUSES = ("ok", "empty", "failed", "skipped")


def _parse_event(text: str) -> dict | None:
    """The event a runner line announces, or None when it is malformed (garbage to log).

    Runners are other people's code: only well-formed events reach the watch loop, so a line
    like ``@@newsbag [1,2]`` or a ``done`` without a page id can never crash the run.
    """
    try:
        event = json.loads(text)
    except ValueError:
        return None
    if not isinstance(event, dict) or not isinstance(event.get("event"), str):
        return None
    kind = event["event"]
    if kind in ("start", "done") and not (isinstance(event.get("page_id"), str) and event["page_id"]):
        return None
    if kind == "done":
        seconds = event.get("seconds")
        if event.get("status", "ok") not in _STATUSES or not (
                seconds is None or (isinstance(seconds, (int, float)) and not isinstance(seconds, bool))):
            return None
        if event.get("error") is not None and not isinstance(event["error"], str):
            event = {**event, "error": str(event["error"])}
    if kind == "fatal" and not isinstance(event.get("error", ""), str):
        event = {**event, "error": str(event["error"])}
    return event


def split_event(line: str) -> tuple[str, dict | None]:
    """(the text of one runner stdout line to log, the well-formed event it carries or None).

    An event need not start its line: a model library that prints to stdout without a
    newline (a ``\\r`` progress bar) glues the runner's next event to its text. A malformed
    event is no event: the whole line is text, marked as such.
    """
    text, prefix, payload = line.partition(EVENT_PREFIX)
    if not prefix:
        return line, None
    event = _parse_event(payload)
    if event is None:
        return f"(malformed event ignored) {line}", None
    return text, event


def _reader(stream, q: queue.Queue, log_fh) -> None:
    """Pass well-formed events on; log everything else. Never dies before the stream ends."""
    log_ok = True
    for raw in iter(stream.readline, b""):
        line, event = split_event(raw.decode("utf-8", "replace").rstrip("\n"))
        if event is not None:
            q.put(event)
            if not line:
                continue
        if log_ok:
            try:
                log_fh.write(f"[stdout] {line}\n")
                log_fh.flush()
            except (OSError, ValueError):  # disk full or closed: keep reading events
                log_ok = False
    q.put(None)


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
        log_fh = open(log_path, "a", encoding="utf-8")
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


def _ended(result: _Launch, stage: ModelStage) -> str:
    """How a runner ended, for a log line: a runner newsbag killed for a stall is not said to have
    been killed by the kernel (``out of memory?`` sends Slurm users to raise --mem for a hang)."""
    if result.reason == "page_timeout":
        return f"newsbag stopped the runner after no progress for {stage.page_timeout_s:g}s on a page (page_timeout_s)"
    return f"runner {_describe_exit(result.exit_code)}"


def _why_stopped(result: _Launch, stage: ModelStage) -> str:
    """Why a runner ended without its ``end`` event, as its run report records it."""
    if result.reason == "page_timeout":
        return f"newsbag stopped it: no progress for {stage.page_timeout_s:g}s on a page"
    if result.reason == "job_timeout":
        return f"newsbag stopped it: stage timeout {stage.timeout_s:g}s reached"
    if result.reason == "aborted":
        return "newsbag stopped it: too many pages failed (--max-failed-fraction)"
    return _ended(result, stage)


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
    threading.Thread(target=_reader, args=(proc.stdout, q, log_fh), daemon=True).start()
    _send_job(proc, job)
    done: dict[str, PageOutcome] = {}
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
            done[outcome.page_id] = outcome
            in_flight = [p for p in in_flight if p != outcome.page_id]
            on_page(outcome)
        elif kind == "setup":
            setup = event
        elif kind == "fatal":
            fatal = event
        elif kind == "end":
            end = event
    code = proc.wait()
    return _Launch(done, in_flight, code, reason, fatal, setup, end)


def _record_failure(out_dir: Path, page: PageRecord, error: str, error_class: str, fingerprint: str | None = None) -> None:
    write_json(failure_path(out_dir, page.page_id), {
        "page_id": page.page_id, "path": page.path, "error": error, "error_class": error_class,
        "fingerprint": fingerprint, "at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    })


def _record_not_started(run_dir: Path, stage: str, variant: str, exc: Exception, log_path: Path,
                        started: bool, ledger: bool) -> None:
    """Keep why the source could not run where `status` finds it (`failures.not_started`) and in the
    ledger: the run's own line is gone with its terminal or Slurm log a day later. A disk that
    refuses the write must not hide the error being raised."""
    record = {"page_id": None, "status": "stopped" if started else "not started", "error": str(exc),
              "error_class": type(exc).__name__, "log": os.path.relpath(log_path, run_dir),
              "started": started, "at": time.strftime("%Y-%m-%dT%H:%M:%S%z")}
    try:
        write_json(rundir.not_started_path(run_dir, stage, variant), record)
        if ledger and not started:   # a source that did start has its page failures there
            record_failures(run_dir, stage, [{k: v for k, v in record.items() if k != "at"}], variant=variant)
    except (OSError, RunDirError) as err:
        log.warning("%s/%s: why it did not run is not recorded: %s", stage, variant, err)


def _check_output(out_dir: Path, page: PageRecord) -> str | None:
    """None when the page's output is valid; else the reason, after moving the bad file aside.

    Only the file judged invalid is moved: one that another call's runner wrote since it was
    read is judged in its turn (each turn needs a new write, so this ends).
    """
    path = out_dir / f"{page.page_id}.json"
    while (judged := freshness.file_identity(path)) is not None:
        try:
            read_page(path, page.page_id)
            return None
        except ValueError as exc:
            bad = freshness.set_aside_invalid_page(out_dir, page.page_id, judged)
            if bad is not None:
                reason = str(exc).split(": ", 1)[-1][:200]
                return f"invalid output JSON ({reason}); moved to {bad.name}"
    return "runner reported the page done but wrote no output"


def _written_outcome(out_dir: Path, page_id: str, fingerprint: str) -> PageOutcome | None:
    """The outcome of a page whose `done` never arrived (a cut or lost event, a kill right
    after the write) but whose output is on disk and current; None when it is not."""
    if not freshness.page_is_current(out_dir, page_id, fingerprint):
        return None
    reason = read_page(out_dir / f"{page_id}.json", page_id, members=False).get("empty_reason")
    return PageOutcome(page_id, "empty" if reason else "ok", reason)


def _report_record(o: PageOutcome) -> dict:
    """A page outcome as the runner's run report records it (runners/_loop.py `finish_ok`, `finish_failed`)."""
    key = "error" if o.status == "failed" else "reason"
    return {"status": o.status, "seconds": o.seconds, **({key: o.error} if o.error else {})}


def _remove_dead_runner_temps(out_dir: Path, *, again: bool = False) -> None:
    """`io.remove_dead_temps` over every folder a runner of `out_dir` writes into (`again`: for
    one that died since the first sweep)."""
    for folder in rundir.runner_folders(out_dir):
        remove_dead_temps(folder, again=again)


def _blame(reason: str, exit_code: int, stage: ModelStage) -> tuple[str, str]:
    """Error and error class for the one page a runner was on when it died or stalled."""
    if reason == "page_timeout":
        return f"no progress for {stage.page_timeout_s:g}s on this page; runner killed", "Timeout"
    return f"runner {_describe_exit(exit_code)} while processing this page", "RunnerCrash"


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
    run_dir = Path(run_dir)
    out_dir = out_dir or source_dir(run_dir, stage.name, variant)
    outcome = SourceOutcome(f"{stage.name}/{variant}", stage.name, variant, stage.family, stage.device,
                            max_empty_share=stage.max_empty_share)
    fraction = stage.max_failed_fraction if max_failed_fraction is None else max_failed_fraction
    t0 = time.monotonic()
    label_map = dict(stage.label_map)
    prints = {p.page_id: stage.page_fingerprint(variant, p.image_sha256) for p in pages}
    judged = freshness.page_identities(out_dir, prints)
    current = freshness.current_source_pages(out_dir, prints, first=report_name, now=judged)
    fresh, retried, held = [], [], []
    for page in pages:
        if page.page_id in current and not force:
            o = PageOutcome(page.page_id, "skipped")
            outcome.pages[page.page_id] = o
            on_page(o)
            continue
        # A valid page made from other parameters, another image or another runner revision is
        # stale: remove it, so that fusion and exports never take it for the page if it now fails.
        # A current one `force` redoes stays: the runner leaves it as it is when the model answers
        # the same (only its `seconds` differ), so no later stage redoes the page; if the page now
        # fails, it is removed once the runner is done (below).
        if page.page_id not in current:
            freshness.remove_stale_page(out_dir, page.page_id, judged.get(page.page_id))
        before = None if force else previous_failure(out_dir, page.page_id)
        if before is None or before.get("error_class") == "NotRun":  # never tried: new
            fresh.append(page)
        elif not retry_failed and is_held(before, prints[page.page_id]):
            held.append((page, before))
        else:
            retried.append(page)
    for page, before in held:
        o = PageOutcome(page.page_id, "failed", f"not retried: {before.get('error', 'it stopped the runner')} "
                                               "(last run); rerun with --retry-failed")
        outcome.pages[page.page_id] = o
        on_page(o)
    if held:
        log.warning("%s/%s: %d page(s) that crashed or hung the runner last time are not retried; "
                    "rerun with --retry-failed to try them again", stage.name, variant, len(held))
    todo = fresh + retried  # pages that failed before go last
    if todo:  # the runner writes there: what killed runners left goes first
        _remove_dead_runner_temps(out_dir)
    by_id = {p.page_id: p for p in todo}
    deadline = time.monotonic() + stage.timeout_s
    log_path = rundir.logs_dir(run_dir) / f"{stage.name}.{variant}.log"
    remaining = list(todo)
    isolate: set[str] = set()
    fruitless = 0  # consecutive launches that settled no page
    started = False  # some page was reported or in flight: the source did start
    failed_here: list[str] = []
    # Outcomes the variant's run report lacks: those decided here (the page a runner died on,
    # invalid output, pages not run) and those of a runner killed before it wrote them down.
    # Every launch gets them (job "settled"); once one ends, they are in the report.
    unrecorded: dict[str, PageOutcome] = {}

    def fail(pages_: list[PageRecord], err: str, error_class: str) -> None:
        for page in pages_:
            _record_failure(out_dir, page, err, error_class, prints[page.page_id])
            outcome.pages[page.page_id] = unrecorded[page.page_id] = o = PageOutcome(page.page_id, "failed", err)
            failed_here.append(page.page_id)
            on_page(o)

    def job_for(pages_: list[PageRecord]) -> dict:
        return {
            "stage": stage.name, "variant": variant, "family": stage.family,
            "params": dict(stage.variants[variant]), "device": stage.device,
            # Siblings' params: variants that differ only in post-processing share one model pass.
            "stage_variants": {v: dict(p) for v, p in stage.variants.items()},
            "allow_cpu_fallback": stage.allow_cpu_fallback, "out_dir": str(out_dir.resolve()),
            "label_map": label_map, "force": force, "report_name": report_name,
            "isolate": sorted(isolate & {p.page_id for p in pages_}),
            "max_empty_share": stage.max_empty_share,
            "settled": {k: _report_record(o) for k, o in unrecorded.items()},
            "pages": [{"page_id": p.page_id, "image_path": p.image_path, "path": p.path,
                       "width": p.width, "height": p.height, "fingerprint": prints[p.page_id]} for p in pages_],
        }

    def over_budget() -> bool:
        return fraction < 1 and len(failed_here) > fraction * len(todo)

    # The ledger gets this call's page failures even when a restarted runner then dies
    # for good (the error below propagates; the pages failed before it stay on record).
    try:
        while remaining:
            if over_budget():
                msg = (f"not run: source aborted after {len(failed_here)} of {len(todo)} pages failed "
                       f"(more than {fraction:g}; --max-failed-fraction)")
                log.error("%s/%s: %s", stage.name, variant, msg.removeprefix("not run: "))
                fail(remaining, msg, "NotRun")
                break
            job = job_for(remaining)
            outcome.launches += 1
            reported: dict[str, PageOutcome] = {}

            def settle(o: PageOutcome) -> None:
                """Check the output a runner claims as soon as it says so, so progress is live."""
                page = by_id.get(o.page_id)
                if page is None:
                    return
                if o.status != "failed":  # ok, empty or skipped: each claims an output
                    problem = _check_output(out_dir, page)
                    if problem:
                        _record_failure(out_dir, page, problem, "InvalidOutput")
                        o = unrecorded[o.page_id] = PageOutcome(o.page_id, "failed", problem, o.seconds)
                if o.status == "failed":
                    failed_here.append(o.page_id)
                reported[o.page_id] = outcome.pages[o.page_id] = o
                on_page(o)

            result = _launch(stage, variant, job, log_path, runners, settle, deadline,
                             lambda: over_budget() and any(p.page_id not in outcome.pages for p in remaining))
            if result.setup:
                outcome.device_used = result.setup.get("device")
                outcome.info = {k: v for k, v in result.setup.items() if k not in ("event", "device")}
            if result.end:
                outcome.info.update({k: result.end[k] for k in ("peak_rss_mb", "mean_page_seconds") if k in result.end})
            if result.fatal or (result.exit_code in (EXIT_MISSING_DEPENDENCY, EXIT_DEVICE_UNAVAILABLE) and not reported):
                message = (result.fatal or {}).get("error") or f"runner {_describe_exit(result.exit_code)}"
                where = f"stage {stage.name} variant {variant} (env {stage.env.name}: {stage.env.python})"
                if (result.fatal or {}).get("error_class") == "RunDirError":
                    raise RunDirError(f"{where}: {message}")
                if result.exit_code == EXIT_DEVICE_UNAVAILABLE:
                    raise GpuPreflightError(f"{where}: {message}; see {log_path}")
                if result.exit_code == EXIT_MISSING_DEPENDENCY:
                    raise EnvError(f"{where}: {message}; see {log_path}")
                # Set-up failed for its own reason (CUDA init, kernels, corrupt weights, a bug): say it as it is.
                raise RunnerError(f"{where}: {message}; see {log_path}")
            # Before blaming a page for a crash or as missing: one whose `done` was lost but whose
            # output is written and current is done. After a crash only the pages in flight are
            # looked at; the restarted runner reports the others' outputs itself (skipped).
            unsettled = [p for p in remaining if p.page_id not in outcome.pages
                         and (result.exit_code == 0 or p.page_id in result.in_flight)]
            for page in unsettled:
                if force and page.page_id in current and freshness.file_identity(
                        out_dir / f"{page.page_id}.json") == judged.get(page.page_id):
                    continue  # the page `force` kept, not one this call wrote
                written = _written_outcome(out_dir, page.page_id, prints[page.page_id])
                if written:
                    settle(written)
            if result.end is None:  # killed before its last report write: its last records may be lost
                unrecorded.update({k: o for k, o in reported.items() if o.status != "skipped"})
                _remove_dead_runner_temps(out_dir, again=True)  # and it may have died mid-write
            else:
                for page_id in job["settled"]:
                    del unrecorded[page_id]
            in_flight = [by_id[p] for p in result.in_flight if p in by_id and p not in outcome.pages]
            remaining = [p for p in remaining if p.page_id not in outcome.pages]
            if result.reason == "aborted":
                continue  # the budget check at the top fails what is left
            if result.reason == "job_timeout":
                fail(in_flight, f"stage timeout {stage.timeout_s:g}s reached while processing this page; runner killed", "NotRun")
                fail([p for p in remaining if p not in in_flight], f"not run: stage timeout {stage.timeout_s:g}s reached", "NotRun")
                break
            started = started or bool(reported) or bool(in_flight)
            if len(in_flight) == 1 or (in_flight and all(p.page_id in isolate for p in in_flight)):
                error, error_class = _blame(result.reason, result.exit_code, stage)
                for page in in_flight:  # one line each in the job's log: the page to look at
                    log.error("page %s (%s): %s/%s: %s; rerun with --retry-failed --pages %s --stages %s",
                              page.page_id, page.path, stage.name, variant, error, page.page_id, stage.name)
                fail(in_flight, error, error_class)
                fruitless = 0
            elif in_flight:
                isolate.update(p.page_id for p in in_flight)
                log.warning("%s/%s: runner %s during a batch of %d page(s); rerunning them one at a time",
                            stage.name, variant, "stalled" if result.reason == "page_timeout" else _describe_exit(result.exit_code),
                            len(in_flight))
                fruitless = 0
            elif result.exit_code == 0 and result.reason == "exit":
                remaining = [p for p in remaining if p.page_id not in outcome.pages]
                # Exited cleanly yet skipped pages it was given: they have no output.
                fail(remaining, "runner exited 0 without writing output for this page", "MissingOutput")
                break
            else:
                # A runner that lost its CUDA context on every page it tried is no progress either:
                # a broken GPU must not cost a model load per page until the failure budget ends.
                progressed = (any(o.status != "failed" for o in reported.values())
                              if result.exit_code == EXIT_CONTEXT_LOST else bool(reported))
                fruitless = 0 if progressed else fruitless + 1
                started = started or bool(reported)
                if not started and (result.setup is None or fruitless > stage.max_restarts):
                    # Died before processing any page (import error, broken env, crash at load):
                    # the source never started, which is worse than some pages failing.
                    how = (f"made no progress for {stage.page_timeout_s:g}s" if result.reason == "page_timeout"
                           else _describe_exit(result.exit_code))
                    raise RunnerError(f"stage {stage.name} variant {variant}: runner {how} before processing "
                                      f"any page{'' if result.setup is None else ' (after loading its model)'}; "
                                      f"see {log_path}")
            remaining = [p for p in remaining if p.page_id not in outcome.pages]
            if remaining and fruitless > stage.max_restarts:
                fail(remaining, f"not run: {_ended(result, stage)} {fruitless} times in a row "
                                "before finishing a page", "NotRun")
                break
            if remaining:
                log.warning("%s/%s: %s; restarting for %d remaining page(s)",
                            stage.name, variant, _ended(result, stage), len(remaining))
        if unrecorded:  # the last runner died, or pages failed after it: no runner
            # is left to write them down, so one more writes only the report (no page, no model load).
            result = _launch(stage, variant, job_for([]), log_path, runners, lambda o: None,
                             time.monotonic() + stage.page_timeout_s)
            if result.end is None:
                log.warning("%s/%s: %d page outcome(s) not written into %s: runner %s; see %s",
                            stage.name, variant, len(unrecorded), report_name,
                            _describe_exit(result.exit_code), log_path)
    except (EnvError, GpuPreflightError, RunnerError) as exc:
        _record_not_started(run_dir, stage.name, variant, exc, log_path, started, ledger)
        raise
    else:
        rundir.not_started_path(run_dir, stage.name, variant).unlink(missing_ok=True)
    finally:
        outcome.seconds = time.monotonic() - t0
        failed = [o for o in outcome.pages.values() if o.status == "failed"]
        for o in failed if force else ():   # a current page kept for `force` that failed now
            if o.page_id in current:
                freshness.remove_stale_page(out_dir, o.page_id, judged.get(o.page_id))
        # Held pages did not run: their failure is in the ledger since the call it happened in.
        not_run = {page.page_id for page, _ in held}
        if ledger:
            record_failures(run_dir, stage.name, [asdict(o) for o in failed if o.page_id not in not_run],
                                   variant=variant)
    return outcome
