"""The variant's run report: each job's page records merged in under a lock, summed up, flushed."""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import resource
import sys
import threading
import time
from pathlib import Path

from _errors import RunDirFull
from _writes import DISK_ERRNOS, FILE_MODE, HOST, atomic_write_json

DEFAULT_MAX_EMPTY_SHARE = 0.2


def summarise_pages(report: dict, max_empty_share: float) -> None:
    """Totals by page status over every page the report knows, the empty share and its flag, and
    the answered pages by the device they ran on (``devices``: calls, restarts and fallbacks of one
    source may differ, and ``device_used`` is only the last runner's).

    The share is empty / (ok + empty): pages the model answered. Above `max_empty_share` the
    source is flagged: a model that answers but never parses looks like success otherwise.
    """
    totals = {"ok": 0, "empty": 0, "failed": 0}
    devices: dict[str, int] = {}
    for rec in report.get("pages", {}).values():
        status = rec.get("status", "ok")
        totals[status] = totals.get(status, 0) + 1
        if status in ("ok", "empty") and rec.get("device"):
            devices[rec["device"]] = devices.get(rec["device"], 0) + 1
    report["devices"] = devices
    answered = totals["ok"] + totals["empty"]
    share = totals["empty"] / answered if answered else None
    report["page_totals"] = totals
    report["empty_share"] = None if share is None else round(share, 4)
    report["max_empty_share"] = max_empty_share
    report["flags"] = ([f"{totals['empty']} of {answered} answered pages empty ({share:.0%}, above "
                        f"{max_empty_share:.0%}): the model answers but nothing usable parses; see its log"]
                       if share is not None and share > max_empty_share else [])


def flush_wait(flush_s: float, last_write_s: float) -> float:
    """Seconds until the next report write: `flush_s`, or 20 times the last write's when longer.

    A write costs in proportion to the pages the report holds (a 100k-page report, 16 MB: 0.25 s
    here), so rewriting it every second took a quarter of the runner's time; this keeps it
    under 5 %, and a shard's report (a few ms) still goes out every `flush_s`.
    """
    return max(flush_s, 20 * last_write_s)


def _load_report(path: Path) -> dict:
    try:
        with open(path, encoding="utf-8") as fh:
            report = json.load(fh)
        return report if isinstance(report, dict) else {}
    except (OSError, ValueError):
        return {}


def _stamp(path: Path) -> tuple | None:
    """(inode, size, mtime) of a file, None when missing: whether it is still the one we wrote."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_ino, st.st_size, st.st_mtime_ns


@contextlib.contextmanager
def _report_lock(report_path: Path):
    """Hold ``.<report name>.lock`` beside the run report while it is read, merged and replaced.

    Two calls may run one variant at once on different pages (``--pages`` subsets of one run
    dir): one lock per report, so each merges its records over the other's, never under them.
    A POSIX record lock, as newsbag's ``locks.manifest_lock``: it holds across nodes on NFS,
    and the kernel drops it when its holder is killed.
    """
    lock = report_path.with_name(f".{report_path.name}.lock")
    try:
        report_path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(lock, os.O_RDWR | os.O_CREAT, FILE_MODE)
    except OSError as exc:
        if exc.errno not in DISK_ERRNOS:
            raise
        raise RunDirFull(f"cannot write {lock}: {exc.strerror}") from None
    try:
        fcntl.lockf(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing the descriptor releases the lock


def merged_pages(skipped: dict, theirs, mine: dict) -> dict:
    """The report's page records: this job's (`mine`) over those on disk (`theirs`: another
    call's pages, earlier runs; anything but a dict counts as none) over the skipped pages'."""
    return {**skipped, **(theirs if isinstance(theirs, dict) else {}), **mine}


class Report:
    """The variant's run report as one job keeps it: the job's page records merged over the
    file's under `_report_lock` at every write (other calls may run the variant on other pages),
    written when asked and, while the pages run, by a background thread at most every
    `flush_wait`, so fast pages followed by a hang or a kill are on disk."""

    def __init__(self, job: dict, path: Path, skipped: dict, n_skipped: int, on_flush=None):
        self.job, self.path, self.skipped, self.on_flush = job, path, skipped, on_flush
        self.max_empty_share = float(job.get("max_empty_share", DEFAULT_MAX_EMPTY_SHARE))
        self.flush_s = float(job.get("report_flush_s", 1.0))
        # Stat before reading: a report another call replaces in between is merged at the first write.
        self.written = _stamp(path)  # the report as this job read or last wrote it
        self.data = _load_report(path)
        self.data.update({
            "stage": job["stage"], "variant": job["variant"], "family": job["family"],
            "params": job.get("params", {}), "device_requested": job.get("device", "auto"),
            "allow_cpu_fallback": bool(job.get("allow_cpu_fallback", True)),
            "python": sys.executable, "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "state": "running",
            # Who says "running": newsbag marks the report killed when it sees this runner die
            # (reports.mark_runner_killed).
            "pid": os.getpid(), "host": HOST,
        })
        for ended in ("finished", "interrupted", "killed", "killed_by"):
            self.data.pop(ended, None)
        # The page records this job writes down: its own pages, and the outcomes of this call's
        # pages that an earlier runner could not write (``settled``: the page it died on, ...).
        self.mine = dict(job.get("settled") or {})
        self.counts = {"ok": 0, "empty": 0, "failed": 0, "skipped": n_skipped}
        self.lock = threading.Lock()
        self.dirty = threading.Event()
        self.last_write_s = 0.0
        self._stop = threading.Event()

    def write(self) -> None:
        """Write the report now (and let the family mirror it), atomically."""
        with self.lock:
            self._write()

    def _write(self) -> None:
        """`write`, the caller holding `lock`."""
        with _report_lock(self.path):
            t_write = time.perf_counter()  # after the lock: waiting for another call costs nothing
            # Read again only when another call running this variant has replaced the file since.
            on_disk = self.data if _stamp(self.path) == self.written else _load_report(self.path)
            report = self.data
            report["pages"] = merged_pages(self.skipped, on_disk.get("pages"), self.mine)
            report["counts"] = dict(self.counts)
            report["updated"] = time.strftime("%Y-%m-%dT%H:%M:%S%z")
            report["peak_rss_mb"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)
            timed = [p["seconds"] for p in report["pages"].values()
                     if p.get("status") in ("ok", "empty") and p.get("seconds") is not None]
            report["mean_page_seconds"] = round(sum(timed) / len(timed), 4) if timed else None
            summarise_pages(report, self.max_empty_share)
            atomic_write_json(self.path, report)
            self.written = _stamp(self.path)
            if self.on_flush is not None:
                self.on_flush(self.job, report)
            self.last_write_s = time.perf_counter() - t_write
        self.dirty.clear()

    def record(self, page_id: str, record: dict, status: str) -> None:
        """Keep one page's record; the next flush writes it."""
        with self.lock:
            self.mine[page_id] = record
            self.counts[status] += 1
            self.dirty.set()

    def start_flushing(self) -> None:
        threading.Thread(target=self._flush_loop, daemon=True).start()

    def _flush_loop(self) -> None:
        # A background writer, not a rewrite of a 100k-page report after every page.
        while not self._stop.wait(flush_wait(self.flush_s, self.last_write_s)):
            if self.dirty.is_set():
                with self.lock:
                    try:
                        self._write()
                    except RunDirFull:
                        return  # the page loop meets the same disk and stops the job

    def end(self, completed: bool, write: bool) -> None:
        """Stop the flushing and record how the job ended (``finished``, else ``interrupted``:
        a SIGTERM from Slurm or the orchestrator still leaves a report that says so), written
        when `write`."""
        self._stop.set()
        with self.lock:
            state = "finished" if completed else "interrupted"
            self.data["state"] = state
            self.data[state] = time.strftime("%Y-%m-%dT%H:%M:%S%z")
            if write:
                self._write()
