"""Log lines for people: one handler on stderr, rich on a terminal or plain lines with the time
(Slurm logs), and every message printable: a file name in it cannot drive the terminal."""

from __future__ import annotations

import logging
import sys

from .errors import printable

__all__ = ["setup_logging"]


class _Printable(logging.Formatter):
    """A formatter whose messages are `printable`: control characters in a name they quote
    (an escape sequence, a newline) are shown escaped, never sent to the terminal or the log."""

    def formatMessage(self, record: logging.LogRecord) -> str:
        record.message = printable(record.message)
        return super().formatMessage(record)


class _LogFormatter(_Printable):
    """A plain line for users: the time (Slurm logs), "WARNING: "/"ERROR: " when it is one, the
    message; the level and module of every line only at debug level, where a developer reads it."""

    def __init__(self, debug: bool):
        super().__init__("%(asctime)s %(levelname)s %(name)s: %(message)s" if debug
                         else "%(asctime)s %(level_tag)s%(message)s", "%Y-%m-%d %H:%M:%S")

    def formatMessage(self, record: logging.LogRecord) -> str:
        record.level_tag = f"{record.levelname}: " if record.levelno >= logging.WARNING else ""
        return super().formatMessage(record)


class _StderrHandler(logging.StreamHandler):
    """Writes to whatever `sys.stderr` is when a line is logged, not the one it was made with: a
    caller that swaps it (pytest's capture, a program calling `main`) gets the lines, and a
    closed earlier stream never breaks a later call."""

    def __init__(self):
        super().__init__(sys.stderr)

    @property
    def stream(self):
        return sys.stderr

    @stream.setter
    def stream(self, value) -> None:
        pass


def setup_logging(level: str) -> None:
    """Log at `level` through one handler on stderr (rich on a terminal, plain lines otherwise),
    each message `printable`."""
    root = logging.getLogger()
    debug = level.lower() == "debug"
    handler = getattr(root, "_newsbag_handler", None)
    if handler is None:
        from .progress import is_interactive

        if is_interactive():
            from rich.logging import RichHandler
            from rich.console import Console

            handler = RichHandler(console=Console(stderr=True), show_path=False)
        else:
            handler = _StderrHandler()
        # Added, not put in place of the root's handlers: a program that calls `main` keeps its own
        # (pytest's log capture was dropped by the first call in a process, so tests passed or failed by order).
        root.addHandler(handler)
        root._newsbag_handler = handler  # type: ignore[attr-defined]
    if isinstance(handler, logging.StreamHandler):
        handler.setFormatter(_LogFormatter(debug))
    else:  # rich shows the time and level itself
        handler.setFormatter(_Printable("%(name)s: %(message)s" if debug else "%(message)s"))
    root.setLevel(level.upper())
