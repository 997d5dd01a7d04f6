"""The lines a runner prints on stdout: events for the watch loop, everything else for its log.

A runner announces each event as one line ``@@newsbag {json}`` (runners/_events.py). Runners are
other people's code, so only well-formed events get through; the rest is text. Stdlib only.
"""

from __future__ import annotations

import json
import queue

__all__ = ["EVENT_PREFIX", "parse_event", "read_events", "split_event"]

EVENT_PREFIX = "@@newsbag "

_STATUSES = ("ok", "empty", "failed", "skipped")


def parse_event(text: str) -> dict | None:
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


def split_event(line: str) -> tuple[str, dict | None]:
    """(the text of one runner stdout line to log, the well-formed event it carries or None).

    An event need not start its line: a model library that prints to stdout without a
    newline (a ``\\r`` progress bar) glues the runner's next event to its text. A malformed
    event is no event: the whole line is text, marked as such.
    """
    text, prefix, payload = line.partition(EVENT_PREFIX)
    if not prefix:
        return line, None
    event = parse_event(payload)
    if event is None:
        return f"(malformed event ignored) {line}", None
    return text, event


def read_events(stream, q: queue.Queue, log_fh) -> None:
    """Pass well-formed events on; log everything else. Never dies before the stream ends."""
    log_ok = True
    for raw in iter(stream.readline, b""):
        line, event = split_event(raw.decode("utf-8", "replace").rstrip("\n"))
        if event is not None:
            q.put(event)
            if not line:
                continue
        if log_ok:
            try:
                log_fh.write(f"[stdout] {line}\n")
                log_fh.flush()
            except (OSError, ValueError):  # disk full or closed: keep reading events
                log_ok = False
    q.put(None)
