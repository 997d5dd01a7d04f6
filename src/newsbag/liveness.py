"""Whether a process has ended: the writer of a temp file (/proc on this host), a runner its report says is running."""

from __future__ import annotations

import functools
import os
import socket
from datetime import datetime

__all__ = ["HOST", "FOREIGN_TEMP_AGE_S", "writer_gone", "runners_said_running"]

HOST = socket.gethostname()

# A writer on another host is taken for gone once its file has not been written to for this
# long: it cannot be asked from here (Slurm puts every task on another node), and no newsbag
# writer (a temp file, a runner's report) leaves its file untouched for a day while it is alive.
FOREIGN_TEMP_AGE_S = 86400


def writer_gone(host: str | None, pid: int, last_write: float | None, now: float) -> bool:
    """Whether the process `pid` of `host` (its name; None: another one), which last wrote a file at
    `last_write` (epoch s; None: not known), has ended: on this host, its pid is not alive, or is
    held by a process that started after that write (the pid was reused: a runner killed
    long ago on a busy node); on another, that write is `FOREIGN_TEMP_AGE_S` old or not known
    (nothing will ever tell more)."""
    if host == HOST:
        try:
            os.kill(pid, 0)  # this process included: alive
        except ProcessLookupError:
            return True
        except OSError:  # alive, another user's
            pass
        stat = _proc_stat(pid)
        if _ended(stat):
            return True
        started = _started_at(stat)
        return last_write is not None and started is not None and started > last_write + _START_SLACK_S
    return last_write is None or now - last_write > FOREIGN_TEMP_AGE_S


# A process's start time from /proc is in whole seconds of boot time plus clock ticks.
_START_SLACK_S = 2.0


def _proc_stat(pid: int) -> list[bytes] | None:
    """The fields of /proc/<pid>/stat after the command name (Linux; elsewhere None)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            return fh.read().rpartition(b")")[2].split()
    except OSError:
        return None


def _ended(stat: list[bytes] | None) -> bool:
    """Whether the process of `_proc_stat` fields has ended but is not reaped yet (elsewhere False):
    a runner killed with its newsbag stays a zombie until init gets to it, and os.kill still finds it."""
    return stat is not None and stat[:1] in ([b"Z"], [b"X"])


@functools.cache
def _boot_time() -> float | None:
    """Epoch seconds this machine booted (/proc/stat ``btime``; elsewhere None)."""
    try:
        with open("/proc/stat", "rb") as fh:
            return next(float(line.split()[1]) for line in fh if line.startswith(b"btime "))
    except (OSError, StopIteration, IndexError, ValueError):
        return None


def _started_at(stat: list[bytes] | None) -> float | None:
    """Epoch seconds the process of `_proc_stat` fields started (field 22, ticks since boot)."""
    boot = _boot_time()
    try:
        return None if stat is None or boot is None else boot + int(stat[19]) / os.sysconf("SC_CLK_TCK")
    except (IndexError, ValueError):
        return None


def _report_time(stamp: object) -> float | None:
    """A run report's ``%Y-%m-%dT%H:%M:%S%z`` time as epoch seconds (None when it is none)."""
    try:
        return datetime.strptime(str(stamp), "%Y-%m-%dT%H:%M:%S%z").timestamp()
    except ValueError:
        return None


def runners_said_running(reports: dict[str, dict], now: float) -> list[dict]:
    """The runners `reports` (`reports.source_reports`) say are ``running``, each told apart by
    `writer_gone`: ``state`` "running", or "died" when its pid is gone on this host (or, on
    another host, its report was last written a day ago).

    A runner killed together with newsbag (kill -9 of the job, the OOM killer taking both, a
    node reboot) cannot write its end, and no one is left to `reports.mark_runner_killed` it:
    its report says ``running`` until a later call starts that runner again.
    """
    found = []
    for name, report in reports.items():
        pid, host = report.get("pid"), report.get("host")
        if report.get("state") != "running" or not isinstance(pid, int) or not isinstance(host, str):
            continue
        updated = report.get("updated")
        gone = writer_gone(host, pid, _report_time(updated), now)
        found.append({"report": name, "state": "died" if gone else "running", "pid": pid, "host": host,
                      "started": report.get("started"), "updated": updated})
    return found
