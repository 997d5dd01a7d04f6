"""The page loop every runner shares (stdlib only): skip, detect, write, report.

A family script defines a detector class and ends with ``_loop.main(MyDetector)``:

    class MyDetector:
        def __init__(self, params: dict, device: str, allow_cpu_fallback: bool): ...
            # load the model ONCE; set self.device_used and self.info (dict for the report)
        def detect(self, image_path: str, page: dict) -> list[dict]: ...
            # regions: {"bbox_xyxy": [x0,y0,x1,y1] original pixels, "label": raw label,
            #           "score": float|None, "order": int|None, "text": str|None}
        def close(self) -> None: ...
        # optional: def detect_batch(self, items: list[tuple[str, dict]]) -> list[list[dict]]
        #   used when batch_size (job key, else params key) > 1; a batch that raises is
        #   retried page by page so only the bad page fails. It may also be a generator
        #   yielding one page's regions at a time: each page is then written and reported
        #   as soon as it is yielded (progress per page inside a batch; the orchestrator's
        #   no-progress limit restarts with each page). Use a generator wherever the library
        #   hands pages back one at a time (PaddleOCRVL.predict_iter); a list means the
        #   batch's pages are reported together, each with the batch's time / N.
        # optional: SHARED_PARAMS = ("model_path", ...): the params the model pass depends
        #   on. Variants of one stage that agree on them share one model pass per page. Such
        #   a class also defines ``model_pass(self, image_path) -> JSON`` (the model's part)
        #   and ``from_pass(params, output) -> regions`` (a staticmethod: the variant's own
        #   post-processing), with detect() = from_pass(self.params, model_pass(...)).
        #   run_job sets ``self.shared`` (a `SharedModelOutput`, or None) and, when it is
        #   set, reads a sibling's stored pass itself: a variant whose pages all have one
        #   never constructs the detector (no model load); it does so on the first page
        #   without one.
        # optional: SHARED_FLOOR = "threshold": a score cut that may differ between the
        #   sharing variants. The pass keeps everything above the lowest one
        #   (``self.shared.floor``) and each variant applies its own cut afterwards; only
        #   for families whose later post-processing commutes with that cut.
        # optional: shares_pass(params) -> bool (staticmethod): False where this variant's
        #   pass cannot be shared at all (e.g. a backend whose library post-processes
        #   after the threshold in ways that depend on the other boxes).

The orchestrator starts ``python <family>.py --job /dev/stdin`` and writes the job to the
runner's stdin (so a killed orchestrator leaves no job file behind). This module owns the
rest: the skip-if-valid-output check (made before compute), per-page error capture, timing,
provenance and the exit code, with one helper beside it per job: `_errors` (the exceptions a
detector raises: ``MissingDependency``, ``DeviceUnavailable``; the exit codes), `_events`,
`_writes` (atomic writes), `_page_files`, `_regions` (``clean_regions``, ``NoRegions``),
`_shared` (shared model passes), `_report` (the run report) and `_parent`. Runners never
import newsbag.

Revisions: bump ``"revision"`` in ``<family>.tool.json`` by one whenever a code change makes the
runner write something else for the same image and parameters (a change to a shared helper,
such as ``_regions.clean_regions``, bumps every family using it); the page fingerprint includes it,
so the next run redoes that family's pages, and only those.

Protocol on stdout: one line per event, ``@@newsbag <json>`` (setup / start / done / end /
fatal); everything else a model library prints goes to stderr or is ignored by the orchestrator.
A page is ``ok`` (regions found), ``empty`` (the model answered but nothing usable came back;
the ``done`` event and the report carry the reason), ``skipped`` (already finished) or ``failed``.
Exit codes: 0 all pages ok, empty or skipped; 4 some pages failed; 3 a dependency or the
model's weights are missing; 5 the requested GPU is unusable and CPU fallback is not
allowed; 1 the model could not be set up for another reason (a ``fatal`` event says which);
7 the output folder cannot be written; 8 the CUDA context is lost (a fresh runner does the rest).

The run report is rewritten atomically as pages finish (at most every ``report_flush_s``
seconds, or less often when it is large: `flush_wait`; and always at the end), so a runner
killed by Slurm or the OOM killer leaves a report that matches the page files on disk.
Nothing is written before the model is set up: a runner that refuses to start leaves no
report and no folder behind. Calls running one variant at once on different pages share its
report: each write merges the runner's own page records over the file's under a lock
(`_report._report_lock`), so none drops another's pages.

A runner dies with the orchestrator that started it (``NEWSBAG_PARENT_PID``): Linux
PR_SET_PDEATHSIG plus a parent-pid watch elsewhere; it then kills its own process group, so
no orphan keeps computing (and recording) pages nobody waits for.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import traceback
from dataclasses import dataclass
from pathlib import Path

# emit, log, atomic_write_json and clean_regions are called through their modules: the fake
# runners of the tests replace them there (tests/fake_runners).
import _events
import _regions
import _writes
from _errors import (EXIT_CONTEXT_LOST, EXIT_DEVICE, EXIT_MISSING, EXIT_PAGES_FAILED, EXIT_RUN_DIR, EXIT_SETUP_FAILED,
                     ContextLost, DeviceUnavailable, MissingDependency, RunDirFull, SetupRefused, context_lost,
                     error_line)
from _page_files import file_identity, is_valid_output
from _parent import die_with_parent
from _report import Report
from _shared import SharedModelOutput, shared_for

FAILED_DIR = "_failed"


def _construct(detector_cls, job: dict, where: str):
    """The detector (its model load); a refusal is logged, emitted (``fatal``) and raised as
    `SetupRefused` with the exit code."""
    try:
        return detector_cls(job.get("params", {}), job.get("device", "auto"), bool(job.get("allow_cpu_fallback", True)))
    except (ImportError, MissingDependency) as exc:
        _events.log(f"{where}: missing dependency: {exc}")
        _events.emit("fatal", error_class="MissingDependency", error=str(exc))
        raise SetupRefused(EXIT_MISSING) from None
    except DeviceUnavailable as exc:
        _events.log(f"{where}: device unavailable: {exc}")
        _events.emit("fatal", error_class="DeviceUnavailable", error=str(exc))
        raise SetupRefused(EXIT_DEVICE) from None
    except Exception as exc:  # CUDA init, no kernels for this GPU, corrupt weights, a bug: keep its own words
        error = error_line(exc, 800)
        _events.log(f"{where}: the model could not be set up: {error}")
        _events.log(traceback.format_exc())
        _events.emit("fatal", error_class=type(exc).__name__, error=f"model setup failed: {error}")
        raise SetupRefused(EXIT_SETUP_FAILED) from None


@dataclass(frozen=True)
class WorkUnit:
    """Pages run together: one ``detect_batch`` call (`batch`), else one page through ``detect``."""

    pages: tuple
    batch: bool


def work_units(todo: list[dict], isolate: set[str], batch_size: int | None) -> list[WorkUnit]:
    """The order the pages to do run in: those not in `isolate`, in batches of `batch_size`
    (None: one by one), then each page of `isolate` alone, so no page the orchestrator suspects
    takes others down with it."""
    together = [page for page in todo if page["page_id"] not in isolate]
    if batch_size is None:
        units = [WorkUnit((page,), False) for page in together]
    else:
        units = [WorkUnit(tuple(together[i:i + batch_size]), True) for i in range(0, len(together), batch_size)]
    return units + [WorkUnit((page,), False) for page in todo if page["page_id"] in isolate]


def batch_size_of(job: dict, detector_cls, shared: SharedModelOutput | None) -> int | None:
    """Pages per ``detect_batch`` call: the job's ``batch_size`` (else the params'), when over 1,
    the detector has ``detect_batch`` and no shared model pass is read page by page; else None."""
    size = int(job.get("batch_size") or job.get("params", {}).get("batch_size") or 1)
    return size if size > 1 and shared is None and callable(getattr(detector_cls, "detect_batch", None)) else None


def exit_code(refused: int | None, full: bool, lost: bool, failed: int) -> int:
    """The runner's exit code once its page loop is over: the code of a model that could not be
    set up (`refused`, loaded late for a variant reading shared passes), then a run dir that
    cannot be written, then a lost CUDA context, then failed pages."""
    if refused is not None:
        return refused
    if full:
        return EXIT_RUN_DIR
    if lost:
        return EXIT_CONTEXT_LOST
    return EXIT_PAGES_FAILED if failed else 0


class _PageLoop:
    """One job's pages through its detector: the model loaded once (or not at all while a
    sibling variant's shared pass serves), each page written and reported, each page's error
    kept to that page."""

    def __init__(self, job: dict, detector_cls, report: Report, todo: list[dict]):
        self.job, self.detector_cls, self.report, self.todo = job, detector_cls, report, todo
        self.out_dir = Path(job["out_dir"])
        self.failed_dir = self.out_dir / FAILED_DIR
        self.label_map = job.get("label_map", {})
        self.where = f"{job['stage']}/{job['variant']}"
        self.params = job.get("params", {})
        self.shared = shared_for(job, detector_cls, self.out_dir)
        self.detector = None
        self.own: dict = {}   # the device and model of this job's model, once loaded
        self.made: dict = {}  # the device and model of the pass behind the page being written

    def load(self) -> None:
        """Set up the model (once per job): the setup event and the report say where it runs."""
        job, report = self.job, self.report.data
        t0 = time.perf_counter()
        self.detector = _construct(self.detector_cls, job, self.where)
        setup_seconds = time.perf_counter() - t0
        self.detector.shared = self.shared
        info = dict(getattr(self.detector, "info", {}) or {})
        self.own.update(device=getattr(self.detector, "device_used", "cpu"), model=info.get("model", job["family"]))
        self.made.update(self.own)
        report.pop("shared_pass", None)
        report.update({"device_used": self.own["device"], "setup_seconds": round(setup_seconds, 3), **info})
        _events.emit("setup", device=self.own["device"], seconds=round(setup_seconds, 3), **info)
        _events.log(f"{self.where}: model ready on {self.own['device']} in {setup_seconds:.1f}s; {len(self.todo)} pages to do")
        self.report.write()  # the report exists from the moment the model is loaded

    def from_shared_pass(self, page: dict, stored):
        """The page's regions from a sibling's stored pass (`stored`), else from this variant's own,
        stored for the siblings; `made` says which pass."""
        if stored is None:
            output = self.detector.model_pass(page["image_path"])
            self.made.update(self.own)
            self.shared.put(page, output, self.own)
            return self.detector_cls.from_pass(self.params, output)
        output, by = stored
        if not self.made:  # no model of its own, nor a page yet: say whose pass it reads
            self.report.data.update(device_used=by["device"], setup_seconds=0.0, model=by["model"], shared_pass=True)
            _events.emit("setup", device=by["device"], seconds=0.0, model=by["model"], shared_pass=True)
            _events.log(f"{self.where}: reading the stage's shared model pass (made on {by['device']}); no model loaded")
        self.made.update(by)
        return self.detector_cls.from_pass(self.params, output)

    def finish_ok(self, page: dict, raw, seconds: float) -> None:
        job, page_id = self.job, page["page_id"]
        regions, warnings = _regions.clean_regions(raw, int(page["width"]), int(page["height"]), self.label_map)
        reason = _regions.empty_reason(raw, regions, warnings)
        status = "empty" if reason else "ok"
        source = {"stage": job["stage"], "variant": job["variant"], "family": job["family"], **self.made}
        record = {
            "page_id": page_id,
            "image": {"path": page["path"], "width": int(page["width"]), "height": int(page["height"])},
            "source": {**source, "fingerprint": page["fingerprint"]} if page.get("fingerprint") else source,
            "regions": regions,
            "seconds": round(seconds, 4),
        }
        if warnings:
            record["warnings"] = warnings
        if reason:
            record["empty_reason"] = reason
            _events.log(f"page {page_id} ({page['path']}): {self.where}: empty: {reason}")
        path = self.out_dir / f"{page_id}.json"
        _writes.atomic_write_json(path, record, durable=False, volatile=("seconds",))
        (self.failed_dir / f"{page_id}.json").unlink(missing_ok=True)
        # What this file is (its fingerprint, size and mtime): newsbag's index of the folder, so a
        # rerun and `status` stat the page instead of parsing it (freshness.current_source_pages).
        index = {"fingerprint": page["fingerprint"], "identity": file_identity(path)} if page.get("fingerprint") else {}
        self.report.record(page_id, {
            "status": status, "seconds": round(seconds, 4), "regions": len(regions), "device": self.made["device"],
            **({"reason": reason} if reason else {}), **({"warnings": warnings} if warnings else {}), **index},
            status)
        if self.shared is not None:
            self.shared.release(page_id)
        _events.emit("done", page_id=page_id, status=status, seconds=round(seconds, 4), regions=len(regions),
             **({"reason": reason} if reason else {}))

    def finish_failed(self, page: dict, exc: Exception, seconds: float) -> None:
        page_id = page["page_id"]
        error = error_line(exc)
        _events.log(f"page {page_id} ({page['path']}): {self.where}: {error}")
        _events.log(traceback.format_exc())
        _writes.atomic_write_json(self.failed_dir / f"{page_id}.json", {
            "page_id": page_id, "path": page["path"], "error": error,
            "error_class": type(exc).__name__, "at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        })
        self.report.record(page_id, {"status": "failed", "error": error, "seconds": round(seconds, 4),
                                     **({"device": self.made["device"]} if self.made else {})}, "failed")
        _events.emit("done", page_id=page_id, status="failed", seconds=round(seconds, 4), error=error)

    def run_one(self, page: dict) -> None:
        stored = None if self.shared is None else self.shared.get(page)
        if self.detector is None and stored is None:
            self.load()  # between pages: a load that hangs or crashes is not this page's fault
        _events.emit("start", page_id=page["page_id"])
        t_page = time.perf_counter()
        try:
            raw = (self.detector.detect(page["image_path"], page) if self.shared is None
                   else self.from_shared_pass(page, stored))
            self.finish_ok(page, raw, time.perf_counter() - t_page)
        except RunDirFull:
            raise
        except Exception as exc:  # the page boundary: record and go on
            self.finish_failed(page, exc, time.perf_counter() - t_page)
            if context_lost(exc):
                raise ContextLost(f"page {page['page_id']}: {error_line(exc)}") from exc

    def run_batch(self, batch: list[dict]) -> None:
        """One detect_batch call; if it raises, retry its unfinished pages one by one so only bad pages fail."""
        _events.emit("batch", page_ids=[page["page_id"] for page in batch])
        t_batch = t_page = time.perf_counter()
        finished = 0
        try:
            results = self.detector.detect_batch([(page["image_path"], page) for page in batch])
            streamed = not isinstance(results, (list, tuple))
            if not streamed and len(results) != len(batch):
                raise RuntimeError(f"detect_batch returned {len(results)} results for {len(batch)} pages")
            results = iter(results)
            for page in batch:
                raw = next(results, None)
                if raw is None:
                    raise RuntimeError(f"detect_batch returned {finished} results for {len(batch)} pages")
                now = time.perf_counter()
                seconds = now - t_page if streamed else (now - t_batch) / len(batch)
                t_page = now
                finished += 1
                try:
                    self.finish_ok(page, raw, seconds)
                except RunDirFull:
                    raise
                except Exception as exc:
                    self.finish_failed(page, exc, seconds)
        except RunDirFull:
            raise
        except Exception as exc:
            if context_lost(exc):  # which page caused it is unknown: the orchestrator isolates them
                raise ContextLost(f"a batch of {len(batch) - finished}: {error_line(exc)}") from exc
            _events.log(f"{self.where}: batch of {len(batch)} failed ({error_line(exc)}); retrying its pages one by one")
            for page in batch[finished:]:
                self.run_one(page)

    def run(self, unit: WorkUnit) -> None:
        if unit.batch:
            self.run_batch(list(unit.pages))
        else:
            self.run_one(unit.pages[0])

    def close(self) -> None:
        close = getattr(self.detector, "close", None)
        if close is not None:
            close()


def _split_done(pages: list[dict], out_dir: Path, force: bool) -> tuple[list[dict], dict]:
    """(the pages to do, the records of those already done), each done page announced: the
    skip check is made before any compute (the report on disk may say more of them)."""
    todo, skipped = [], {}
    for page in pages:
        if not force and is_valid_output(out_dir / f"{page['page_id']}.json", page["page_id"], page.get("fingerprint")):
            _events.emit("done", page_id=page["page_id"], status="skipped", seconds=0.0)
            skipped[page["page_id"]] = {"status": "ok", "seconds": None}
        else:
            todo.append(page)
    return todo, skipped


def run_job(job: dict, detector_cls, on_flush=None) -> int:
    """Run every page of `job` through `detector_cls`; returns the runner exit code.

    Args:
        job: the job spec the orchestrator wrote (out_dir, pages, params, device, ...).
        detector_cls: the family's detector class (see the module docstring).
        on_flush: ``on_flush(job, report)`` each time the report is written (MinerU mirrors
            it into run_meta.json); never called when setup is refused.
    """
    die_with_parent()  # before the model loads: a load can take minutes
    out_dir, pages = Path(job["out_dir"]), job["pages"]
    todo, skipped = _split_done(pages, out_dir, bool(job.get("force")))
    report = Report(job, out_dir / job.get("report_name", "run_report.json"), skipped, len(pages) - len(todo),
                     on_flush)
    if not todo:
        report.data.update(state="finished", finished=time.strftime("%Y-%m-%dT%H:%M:%S%z"))
        report.write()
        _events.emit("end", ok=0, empty=0, failed=0, skipped=len(pages))
        return 0
    loop = _PageLoop(job, detector_cls, report, todo)
    batch_size = batch_size_of(job, detector_cls, loop.shared)
    report.data["batch_size"] = batch_size or 1
    if loop.shared is None:
        try:
            loop.load()
        except SetupRefused as exc:
            return exc.code
    report.start_flushing()
    completed = False
    full = lost = refused = None
    try:
        for unit in work_units(todo, set(job.get("isolate") or ()), batch_size):
            loop.run(unit)
        completed = True
    except RunDirFull as exc:
        full = exc
    except ContextLost as exc:
        lost = exc
    except SetupRefused as exc:  # the model of a variant reading shared passes, loaded late
        refused = exc
    finally:
        try:  # a runner that could not start on its first page leaves no report
            report.end(completed, write=refused is None or bool(report.mine))
        except RunDirFull:
            if full is None:
                raise
        loop.close()
    code = exit_code(None if refused is None else refused.code, full is not None, lost is not None,
                     report.counts["failed"])
    if full is not None:
        _events.log(f"{loop.where}: {full}")
        _events.emit("fatal", error_class="RunDirError", error=str(full))
    elif lost is not None:
        _events.log(f"{loop.where}: the CUDA context of this runner is lost ({lost}); exiting {EXIT_CONTEXT_LOST} "
            "so that a fresh runner does the pages left")
    elif refused is None:
        data = report.data
        for flag in data["flags"]:
            _events.log(f"{loop.where}: FLAGGED: {flag}")
        _events.emit("end", ok=report.counts["ok"], empty=report.counts["empty"], failed=report.counts["failed"],
             skipped=report.counts["skipped"], peak_rss_mb=data["peak_rss_mb"],
             mean_page_seconds=data["mean_page_seconds"], empty_share=data["empty_share"], flags=data["flags"])
    return code


def main(detector_cls, on_flush=None) -> None:
    parser = argparse.ArgumentParser(description=f"newsbag runner ({Path(sys.argv[0]).stem})")
    parser.add_argument("--job", required=True, help="job spec JSON written by the orchestrator")
    args = parser.parse_args()
    with open(args.job, encoding="utf-8") as fh:
        job = json.load(fh)
    try:
        code = run_job(job, detector_cls, on_flush)
    except RunDirFull as exc:  # a write outside the page loop (report of an all-skipped job)
        _events.log(str(exc))
        _events.emit("fatal", error_class="RunDirError", error=str(exc))
        code = EXIT_RUN_DIR
    sys.exit(code)
