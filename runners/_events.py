"""The runner's side of the event protocol: ``@@newsbag`` lines on stdout, log lines on stderr."""

from __future__ import annotations

import sys
import time

from _parent import terminate
from _strictjson import dumps_strict

EVENT_PREFIX = "@@newsbag "


def emit(event: str, **fields) -> None:
    try:
        sys.stdout.write(EVENT_PREFIX + dumps_strict({"event": event, **fields}) + "\n")
        sys.stdout.flush()
    except OSError:  # nobody reads the events any more: the orchestrator is gone
        terminate()


def log(msg: str) -> None:
    sys.stderr.write(f"[{time.strftime('%H:%M:%S')}] {msg}\n")
    sys.stderr.flush()
