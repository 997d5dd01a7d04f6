"""Progress for humans and for Slurm logs: a rich bar on a terminal, plain periodic lines elsewhere."""

from __future__ import annotations

import logging
import os
import sys
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Iterator

__all__ = ["Tracker", "track", "is_interactive"]

log = logging.getLogger("newsbag.progress")
LINE_EVERY_PAGES = 50
LINE_EVERY_SECONDS = 60.0


def _isatty(stream) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):   # no stream, or a closed one
        return False


def is_interactive() -> bool:
    if os.environ.get("TTY_INTERACTIVE") == "0":
        return False
    if not any(k in os.environ for k in ("TTY_INTERACTIVE", "TTY_COMPATIBLE", "FORCE_COLOR")) and not _isatty(sys.stderr):
        return False   # what rich decides here too, without importing it (~45 ms of every command's start)
    from rich.console import Console

    return Console(stderr=True).is_interactive


def _eta(seconds: float) -> str:
    seconds = int(seconds)
    h, rem = divmod(seconds, 3600)
    return f"{h}h{rem // 60:02d}m" if h else f"{rem // 60}m{rem % 60:02d}s"


@dataclass
class Tracker:
    """Counts page outcomes of one task and reports them (bar or periodic line)."""

    label: str
    total: int
    counts: dict[str, int] = field(default_factory=lambda: {"ok": 0, "failed": 0, "skipped": 0})
    _started: float = field(default_factory=time.monotonic)
    _last_line: float = field(default_factory=time.monotonic)
    _last_done: int = 0
    _bar: object | None = None
    _task_id: object | None = None

    @property
    def done(self) -> int:
        return sum(self.counts.values())

    def advance(self, status: str) -> None:
        self.counts[status] = self.counts.get(status, 0) + 1
        if self._bar is not None:
            self._bar.update(self._task_id, completed=self.done,
                             description=f"{self.label} [red]{self.counts['failed']} failed" if self.counts["failed"] else self.label)
            return
        now = time.monotonic()
        if self.done == self.counts.get("skipped", 0) and now - self._started < LINE_EVERY_SECONDS:
            return   # only current pages so far: a rerun with nothing to do says so once, at its end
        if self.done - self._last_done >= LINE_EVERY_PAGES or now - self._last_line >= LINE_EVERY_SECONDS or self.done == self.total:
            self._last_line, self._last_done = now, self.done
            log.info(self.line())

    def line(self) -> str:
        elapsed = max(time.monotonic() - self._started, 1e-6)
        worked = self.done - self.counts.get("skipped", 0)
        rate = worked / elapsed
        eta = _eta((self.total - self.done) / rate) if rate > 0 and self.done < self.total else "0m00s"
        return (f"{self.label}: done {self.done}/{self.total} failed {self.counts.get('failed', 0)} "
                f"skipped {self.counts.get('skipped', 0)} ({rate:.2f} p/s, eta {eta})")


@contextmanager
def track(label: str, total: int) -> Iterator[Tracker]:
    """A tracker for `total` pages; the bar exists only while the block runs."""
    tracker = Tracker(label, total)
    if total and is_interactive():
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

        with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                      TimeRemainingColumn(), console=Console(stderr=True), transient=False) as bar:
            tracker._bar, tracker._task_id = bar, bar.add_task(label, total=total)
            yield tracker
    else:
        yield tracker
