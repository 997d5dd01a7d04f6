"""Progress in Slurm logs: plain lines every 50 pages (or 60 s) when not on a terminal."""

import logging

from newsbag import progress


def test_plain_lines_every_50_pages_when_not_interactive(monkeypatch, caplog):
    monkeypatch.setenv("TTY_INTERACTIVE", "0")
    caplog.set_level(logging.INFO, logger="newsbag.progress")
    with progress.track("dell/v", 120) as tracker:
        for i in range(120):
            tracker.advance("failed" if i == 7 else "skipped" if i < 20 else "ok")
    lines = [r.getMessage() for r in caplog.records]
    assert [line.split(" failed")[0] for line in lines] == ["dell/v: done 50/120", "dell/v: done 100/120", "dell/v: done 120/120"]
    assert "failed 1 skipped 19" in lines[-1] and "p/s, eta 0m00s)" in lines[-1]


def test_eta_format():
    assert progress._eta(5 * 3600 + 31 * 60 + 5) == "5h31m"
    assert progress._eta(75) == "1m15s"
