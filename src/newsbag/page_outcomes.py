"""What a runner call's pages came to: the outcome records, the check of each output a runner
claims, and the failure records a source keeps in its folder and the run directory."""

from __future__ import annotations

import logging
import os
import time
from dataclasses import dataclass, field
from pathlib import Path

from . import freshness, rundir
from .errors import RunDirError
from .failures import record_failures
from .io import write_json
from .manifest import PageRecord
from .page_reader import read_page
from .rundir import failure_path

__all__ = ["PageOutcome", "SourceOutcome", "check_output", "record_failure", "record_not_started",
           "report_record", "written_outcome"]

log = logging.getLogger(__name__)


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


def record_failure(out_dir: Path, page: PageRecord, error: str, error_class: str, fingerprint: str | None = None) -> None:
    write_json(failure_path(out_dir, page.page_id), {
        "page_id": page.page_id, "path": page.path, "error": error, "error_class": error_class,
        "fingerprint": fingerprint, "at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    })


def record_not_started(run_dir: Path, stage: str, variant: str, exc: Exception, log_path: Path,
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


def check_output(out_dir: Path, page: PageRecord) -> str | None:
    """None when the page's output is valid; else the reason, after moving the bad file aside.

    Only the file found invalid is moved: one that another call's runner wrote since it was
    read is checked in its turn (each turn needs a new write, so this ends).
    """
    path = out_dir / f"{page.page_id}.json"
    while (seen := freshness.file_identity(path)) is not None:
        try:
            read_page(path, page.page_id)
            return None
        except ValueError as exc:
            bad = freshness.set_aside_invalid_page(out_dir, page.page_id, seen)
            if bad is not None:
                reason = str(exc).split(": ", 1)[-1][:200]
                return f"invalid output JSON ({reason}); moved to {bad.name}"
    return "runner reported the page done but wrote no output"


def written_outcome(out_dir: Path, page_id: str, fingerprint: str) -> PageOutcome | None:
    """The outcome of a page whose `done` never arrived (a cut or lost event, a kill right
    after the write) but whose output is on disk and current; None when it is not."""
    if not freshness.page_is_current(out_dir, page_id, fingerprint):
        return None
    reason = read_page(out_dir / f"{page_id}.json", page_id, members=False).get("empty_reason")
    return PageOutcome(page_id, "empty" if reason else "ok", reason)


def report_record(o: PageOutcome) -> dict:
    """A page outcome as the runner's run report records it (runners/_loop.py `finish_ok`, `finish_failed`)."""
    key = "error" if o.status == "failed" else "reason"
    return {"status": o.status, "seconds": o.seconds, **({key: o.error} if o.error else {})}
