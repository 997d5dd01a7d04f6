"""Fake loguru: one ``logger`` whose default handler, like the real one, prints DEBUG and up to stderr."""

import sys
import time

_LEVELS = {"TRACE": 5, "DEBUG": 10, "INFO": 20, "SUCCESS": 25, "WARNING": 30, "ERROR": 40, "CRITICAL": 50}


class _Logger:
    def __init__(self):
        self._handlers = {0: (sys.stderr, "DEBUG", None, "{time} | {level} | {message}")}
        self._next = 1

    def remove(self, handler_id=None):
        if handler_id is None:
            self._handlers.clear()
        else:
            del self._handlers[handler_id]

    def add(self, sink, level="DEBUG", format="{time} | {level} | {message}", filter=None, **kwargs):
        self._handlers[self._next] = (sink, level, filter, format)
        self._next += 1
        return self._next - 1

    def _log(self, level, message, *args):
        text = message.format(*args) if args else message
        for sink, min_level, flt, fmt in list(self._handlers.values()):
            if _LEVELS[level] < _LEVELS[min_level]:
                continue
            record = {"message": text, "level": level}
            if flt is not None and not flt(record):
                continue
            line = fmt.replace("{time:HH:mm:ss}", time.strftime("%H:%M:%S")).replace("{time}", time.strftime("%H:%M:%S"))
            sink.write(line.replace("{level}", level).replace("{message}", record["message"]) + "\n")

    def debug(self, message, *args):
        self._log("DEBUG", message, *args)

    def info(self, message, *args):
        self._log("INFO", message, *args)

    def warning(self, message, *args):
        self._log("WARNING", message, *args)


logger = _Logger()
