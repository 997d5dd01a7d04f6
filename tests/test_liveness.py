"""Whether a process has ended: a temp file's writer on this host or another, a runner its report says is running."""

import pytest

from newsbag import liveness


def test_a_writer_is_gone_when_its_pid_ended_or_is_a_zombie_and_elsewhere_after_a_day(tmp_path):
    """`writer_gone` tells whether the writer of a temp file, or a runner whose report says running, is gone."""
    import os
    import subprocess
    import sys
    import time

    zombie = subprocess.Popen([sys.executable, "-c", "pass"])
    deadline = time.monotonic() + 30
    while not liveness._ended(liveness._proc_stat(zombie.pid)) and time.monotonic() < deadline:   # ended, not reaped (no wait())
        time.sleep(0.02)
    now = time.time()
    assert liveness.writer_gone(liveness.HOST, zombie.pid, now, now)
    zombie.wait()
    assert liveness.writer_gone(liveness.HOST, zombie.pid, now, now)   # reaped: no such pid
    assert not liveness.writer_gone(liveness.HOST, os.getpid(), None, now)   # alive, last write unknown
    assert not liveness.writer_gone(None, 1, now - liveness.FOREIGN_TEMP_AGE_S + 60, now)   # another host: recent
    assert liveness.writer_gone(None, 1, now - liveness.FOREIGN_TEMP_AGE_S - 60, now)


@pytest.mark.parametrize("host,hours_ago,state", [
    ("node-elsewhere", 2, "running"),    # another node: it cannot be asked; a report written 2 h ago is taken for alive
    ("node-elsewhere", 25, "died"),      # ... one not written for over a day is not
])
def test_a_runner_of_another_host_is_told_apart_by_its_last_report_write(host, hours_ago, state):
    import time

    now = time.time()
    stamp = time.strftime("%Y-%m-%dT%H:%M:%S%z", time.localtime(now - hours_ago * 3600))
    reports = {"run_report.shard-1-of-2.json": {"state": "running", "pid": 4242, "host": host, "started": stamp,
                                                "updated": stamp, "pages": {}},
               "run_report.json": {"state": "finished", "pid": 1, "host": host, "pages": {}}}
    assert liveness.runners_said_running(reports, now) == [
        {"report": "run_report.shard-1-of-2.json", "state": state, "pid": 4242, "host": host,
         "started": stamp, "updated": stamp}]
