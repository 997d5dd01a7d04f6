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
import uuid
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable

from . import labels
from .config import ModelStage
from .errors import EnvError, GpuPreflightError, RunDirError, RunnerError
from .io import DISK_ERRNOS, append_jsonl, read_page, write_json, run_dir_error
from .pages import PageRecord
from . import rundir
from .rundir import FAILED_DIR, source_dir

__all__ = ["PageOutcome", "SourceOutcome", "run_source"]

log = logging.getLogger(__name__)
EVENT_PREFIX = "@@newsbag "
EXIT_MISSING_DEPENDENCY = 3
EXIT_DEVICE_UNAVAILABLE = 5


@dataclass(frozen=True)
class PageOutcome:
    page_id: str
    status: str  # ok | skipped | failed
    error: str | None = None
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

    def counts(self) -> dict[str, int]:
        out = {"ok": 0, "failed": 0, "skipped": 0}
        for o in self.pages.values():
            out[o.status] = out.get(o.status, 0) + 1
        return out

    def to_json(self) -> dict:
        return {
            "source": self.source, "stage": self.stage, "variant": self.variant,
            "family": self.family, "device_requested": self.device_requested,
            "device_used": self.device_used, "info": self.info, "counts": self.counts(),
            "launches": self.launches, "seconds": round(self.seconds, 3),
            "failures": {k: v.error for k, v in self.pages.items() if v.status == "failed"},
        }


def _describe_exit(code: int) -> str:
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    if code == 137:
        return "exited 137 (killed: out of memory?)"
    return f"exited {code}"


@dataclass
class _Launch:
    done: dict[str, PageOutcome]
    in_flight: str | None
    exit_code: int
    reason: str  # exit | page_timeout | job_timeout
    fatal: dict | None
    setup: dict | None
    end: dict | None


_STATUSES = ("ok", "failed", "skipped")


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


def _reader(stream, q: queue.Queue, log_fh) -> None:
    """Pass well-formed events on; log everything else. Never dies before the stream ends."""
    log_ok = True
    for raw in iter(stream.readline, b""):
        line = raw.decode("utf-8", "replace").rstrip("\n")
        if line.startswith(EVENT_PREFIX):
            event = _parse_event(line[len(EVENT_PREFIX):])
            if event is not None:
                q.put(event)
                continue
            line = f"(malformed event ignored) {line}"
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


def _launch(stage: ModelStage, variant: str, job: dict, job_path: Path, log_path: Path,
            runners: Path, on_page: Callable[[PageOutcome], None], deadline: float) -> _Launch:
    write_json(job_path, job)
    cmd = [stage.env.python, str(runners / f"{stage.family}.py"), "--job", str(job_path)]
    env = {**os.environ, **stage.env.env, "PYTHONUNBUFFERED": "1"}
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
                                    start_new_session=True, stdin=subprocess.DEVNULL)
        except FileNotFoundError:
            raise EnvError(f"stage {stage.name}: interpreter {stage.env.python} (env {stage.env.name!r}) "
                           "does not exist; create the env or fix envs in the config") from None
        except PermissionError:
            raise EnvError(f"stage {stage.name}: interpreter {stage.env.python} is not executable") from None
        q: queue.Queue = queue.Queue()
        threading.Thread(target=_reader, args=(proc.stdout, q, log_fh), daemon=True).start()
        done: dict[str, PageOutcome] = {}
        in_flight = None
        fatal = setup = end = None
        last_event = time.monotonic()
        reason = "exit"
        while True:
            now = time.monotonic()
            wait = min(deadline, last_event + stage.page_timeout_s) - now
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
            if kind == "start":
                in_flight = event.get("page_id")
            elif kind == "done":
                outcome = PageOutcome(event["page_id"], event.get("status", "ok"), event.get("error"), event.get("seconds"))
                done[outcome.page_id] = outcome
                in_flight = None
                try:
                    on_page(outcome)
                except BaseException:  # e.g. the run dir is full: never leave the runner running
                    _kill(proc)
                    raise
            elif kind == "setup":
                setup = event
            elif kind == "fatal":
                fatal = event
            elif kind == "end":
                end = event
        code = proc.wait()
    job_path.unlink(missing_ok=True)
    return _Launch(done, in_flight, code, reason, fatal, setup, end)


def _record_failure(out_dir: Path, page: PageRecord, error: str, error_class: str) -> None:
    write_json(out_dir / FAILED_DIR / f"{page.page_id}.json", {
        "page_id": page.page_id, "path": page.path, "error": error, "error_class": error_class,
        "at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    })


def _check_output(out_dir: Path, page: PageRecord) -> str | None:
    """None when the page's output is valid; else the reason, after moving the bad file aside."""
    path = out_dir / f"{page.page_id}.json"
    if not path.exists():
        return "runner reported the page done but wrote no output"
    try:
        read_page(path, page.page_id)
    except ValueError as exc:
        bad = out_dir / FAILED_DIR / f"{page.page_id}.invalid.json"
        bad.parent.mkdir(parents=True, exist_ok=True)
        os.replace(path, bad)
        reason = str(exc).split(": ", 1)[-1][:200]
        return f"invalid output JSON ({reason}); moved to {bad.name}"
    return None


def run_source(
    run_dir: Path,
    stage: ModelStage,
    variant: str,
    pages: list[PageRecord],
    *,
    runners: Path,
    force: bool = False,
    on_page: Callable[[PageOutcome], None] = lambda o: None,
    report_name: str = "run_report.json",
    out_dir: Path | None = None,
) -> SourceOutcome:
    """Run one source (stage × variant) over `pages`, resuming finished pages.

    Pages go to the source folder, or to `out_dir` for a runner whose pages are no layout
    source (the transcription stage's recogniser).

    Raises:
        EnvError: the env's interpreter or a library the runner needs is missing.
        GpuPreflightError: a GPU was required, none usable, and CPU fallback refused.
        RunnerError: the runner died before processing any page, on every try.
    """
    run_dir = Path(run_dir)
    out_dir = out_dir or source_dir(run_dir, stage.name, variant)
    outcome = SourceOutcome(f"{stage.name}/{variant}", stage.name, variant, stage.family, stage.device)
    t0 = time.monotonic()
    label_map = dict(labels.FAMILY_TABLES.get(stage.family, {}))
    prints = {p.page_id: rundir.source_fingerprint(stage.family, dict(stage.variants[variant]), stage.volatile,
                                                   label_map, p.sha256) for p in pages}
    todo = []
    for page in pages:
        if not force and rundir.source_is_current(out_dir, page.page_id, prints[page.page_id]):
            o = PageOutcome(page.page_id, "skipped")
            outcome.pages[page.page_id] = o
            on_page(o)
        else:
            # A valid page made from other parameters or another image is stale: remove it so
            # the runner's own skip-if-valid check does not keep it.
            (out_dir / f"{page.page_id}.json").unlink(missing_ok=True)
            todo.append(page)
    by_id = {p.page_id: p for p in todo}
    deadline = time.monotonic() + stage.timeout_s
    log_path = run_dir / "logs" / f"{stage.name}.{variant}.log"
    remaining = list(todo)
    first_error = None

    def fail(pages_: list[PageRecord], err: str, error_class: str) -> None:
        for page in pages_:
            _record_failure(out_dir, page, err, error_class)
            outcome.pages[page.page_id] = o = PageOutcome(page.page_id, "failed", err)
            on_page(o)

    while remaining:
        if outcome.launches > stage.max_restarts:
            fail(remaining, f"not run: runner restarted {stage.max_restarts} times ({first_error})", "RunnerError")
            break
        job = {
            "stage": stage.name, "variant": variant, "family": stage.family,
            "params": dict(stage.variants[variant]), "device": stage.device,
            # Siblings' params: variants that differ only in post-processing share one model pass.
            "stage_variants": {v: dict(p) for v, p in stage.variants.items()},
            "allow_cpu_fallback": stage.allow_cpu_fallback, "out_dir": str(out_dir.resolve()),
            "label_map": label_map, "force": force, "report_name": report_name,
            "pages": [{"page_id": p.page_id, "image_path": p.image_path, "path": p.path,
                       "width": p.width, "height": p.height, "fingerprint": prints[p.page_id]} for p in remaining],
        }
        job_path = run_dir / "jobs" / f"{stage.name}.{variant}.{uuid.uuid4().hex[:8]}.json"
        outcome.launches += 1
        reported: dict[str, PageOutcome] = {}

        def settle(o: PageOutcome) -> None:
            """Check the output a runner claims as soon as it says so, so progress is live."""
            page = by_id.get(o.page_id)
            if page is None:
                return
            if o.status == "ok":
                problem = _check_output(out_dir, page)
                if problem:
                    _record_failure(out_dir, page, problem, "InvalidOutput")
                    o = PageOutcome(o.page_id, "failed", problem, o.seconds)
            reported[o.page_id] = outcome.pages[o.page_id] = o
            on_page(o)

        result = _launch(stage, variant, job, job_path, log_path, runners, settle, deadline)
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
            raise EnvError(f"{where}: {message}; see {log_path}")
        if result.in_flight and result.in_flight in by_id:
            if result.reason == "page_timeout":
                err = f"no progress for {stage.page_timeout_s:g}s on this page; runner killed"
            elif result.reason == "job_timeout":
                err = f"stage timeout {stage.timeout_s:g}s reached; runner killed"
            else:
                err = f"runner {_describe_exit(result.exit_code)} while processing this page"
            fail([by_id[result.in_flight]], err, "RunnerCrash" if result.reason == "exit" else "Timeout")
            first_error = first_error or err
        remaining = [p for p in remaining if p.page_id not in outcome.pages]
        if not remaining:
            break
        if result.reason == "job_timeout":
            fail(remaining, f"not run: stage timeout {stage.timeout_s:g}s reached", "Timeout")
            break
        if result.exit_code == 0 and not result.in_flight:
            # Exited cleanly yet skipped pages it was given: they have no output.
            fail(remaining, "runner exited 0 without writing output for this page", "MissingOutput")
            break
        if not reported and not result.in_flight and result.setup is None:
            # Died before it could load anything: a restart would die the same way.
            raise RunnerError(
                f"stage {stage.name} variant {variant}: runner {_describe_exit(result.exit_code)} "
                f"before processing any page; see {log_path}"
            )
        first_error = first_error or f"runner {_describe_exit(result.exit_code)}"
        log.warning("%s/%s: runner %s; restarting for %d remaining page(s)",
                    stage.name, variant, _describe_exit(result.exit_code), len(remaining))
    outcome.seconds = time.monotonic() - t0
    failures = [asdict(o) | {"stage": stage.name, "variant": variant}
                for o in outcome.pages.values() if o.status == "failed"]
    if failures:
        append_jsonl(run_dir / "logs" / "failures.jsonl",
                     [f | {"at": time.strftime("%Y-%m-%dT%H:%M:%S%z")} for f in failures])
    return outcome
