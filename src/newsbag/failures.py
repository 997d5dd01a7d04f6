"""Page and source failures: their records, the run's failure ledger, and which ones a rerun holds back."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from .io import append_jsonl, read_json_object
from .rundir import failure_path, failures_ledger, not_started_path

__all__ = ["STOPPED_THE_RUNNER", "previous_failure", "not_started", "is_held", "record_failures"]

# Failure classes of a page that killed or stalled its runner: retried only on request.
STOPPED_THE_RUNNER = ("RunnerCrash", "Timeout")


def previous_failure(out_dir: Path, page_id: str) -> dict | None:
    """The page's failure record in `out_dir`, None when it has none (or it is unreadable)."""
    return read_json_object(failure_path(out_dir, page_id))


def not_started(run_dir: Path, stage: str, variant: str) -> dict | None:
    """What the source's last call recorded when its runner could not run (it died or hung before
    its first page, its env or device was missing): ``error``, ``error_class``, ``log``
    (run-relative), ``started`` (some page was done first), ``at``. None once a call ran it."""
    return read_json_object(not_started_path(run_dir, stage, variant))


def is_held(record: dict | None, fingerprint: str) -> bool:
    """Whether a page with this failure record is left failed by a rerun without --retry-failed:
    it crashed or hung the runner, and with the same inputs (`fingerprint`) it would again. The
    orchestrator skips it, and a Slurm resubmit plans no job for it."""
    return (record is not None and record.get("error_class") in STOPPED_THE_RUNNER
            and record.get("fingerprint") == fingerprint)


def record_failures(run_dir: Path, stage: str, failures: list[dict], **extra: Any) -> None:
    """Append page failures of one stage to RUN/logs/failures.jsonl (one line each)."""
    if failures:
        at = time.strftime("%Y-%m-%dT%H:%M:%S%z")
        append_jsonl(failures_ledger(run_dir), [{"stage": stage, **extra, **f, "at": at} for f in failures])
