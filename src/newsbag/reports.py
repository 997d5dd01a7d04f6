"""A source folder's run reports: reading them, and marking a runner killed in its own."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Iterator

from .io import read_json, write_json
from .liveness import HOST
from .locks import locked

__all__ = ["source_reports", "report_pages", "mark_runner_killed"]


def source_reports(out_dir: Path) -> dict[str, dict]:
    """Each run report in a source folder (``run_report.json``, one per shard
    ``run_report.shard-K-of-N.json``) by file name, in name order, its ``pages`` a dict;
    unreadable ones are left out."""
    return {path.name: report for path in sorted(Path(out_dir).glob("run_report*.json"))
            if (report := _read_report(path)) is not None}


def report_pages(out_dir: Path, first: str | None = None) -> Iterator[dict]:
    """The ``pages`` of `source_reports` one at a time, the report named `first` (if any) before
    the others, which are looked for only when asked for (listing a folder of 100k pages to
    find them was most of what a shard task's check cost)."""
    if first is not None and (report := _read_report(Path(out_dir) / first)) is not None:
        yield report["pages"]
    for path in sorted(Path(out_dir).glob("run_report*.json")):
        if path.name != first and (report := _read_report(path)) is not None:
            yield report["pages"]


def _read_report(path: Path) -> dict | None:
    """One run report, its ``pages`` a dict ({} when it has none); None when it cannot be read."""
    try:
        report = read_json(path)
    except (OSError, ValueError):
        return None
    if not isinstance(report, dict):
        return None
    return {**report, "pages": report["pages"] if isinstance(report.get("pages"), dict) else {}}


def mark_runner_killed(out_dir: Path, report_name: str, pid: int, how: str) -> None:
    """Record in a source's run report that its runner `pid` died without finishing
    (``state: killed``, ``killed`` at, ``killed_by`` `how`), if the report still says that
    runner is running.

    A runner writes ``running`` once set up and ``finished`` at its end; killed in between
    (SIGKILL, the OOM killer, newsbag stopping it on Ctrl-C or a timeout) it cannot write
    again, and its report would say ``running`` until some later run. A report another runner
    wrote since (a call on other pages of the variant, a restart) keeps that runner's state.
    Read and replaced under the runner's own report lock (runners/_report.py `_report_lock`).
    """
    path = Path(out_dir) / report_name
    if not path.is_file():
        return
    with locked(path.with_name(f".{report_name}.lock")):
        try:
            report = read_json(path)
        except (OSError, ValueError):
            return
        if (isinstance(report, dict) and report.get("state") == "running" and report.get("pid") == pid
                and report.get("host") == HOST):
            write_json(path, {**report, "state": "killed", "killed": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
                              "killed_by": how})
