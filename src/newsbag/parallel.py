"""One way to spread independent page tasks over processes (fusion, review, export)."""

from __future__ import annotations

import logging
import multiprocessing
from contextlib import contextmanager
from functools import partial
from logging.handlers import QueueHandler, QueueListener
from typing import Callable, Iterator

__all__ = ["page_map"]


def _log_to(queue, level: int) -> None:
    """Worker initializer: every record at the caller's level goes to it through `queue`."""
    root = logging.getLogger()
    root.handlers[:] = [QueueHandler(queue)]
    root.setLevel(level)


class _Relay(logging.Handler):
    """Hands a worker's record to the logger of its name here, so it meets the same handlers
    (and, where there are none, the same last resort) as one logged in this process."""

    def emit(self, record: logging.LogRecord) -> None:
        logging.getLogger(record.name).handle(record)


@contextmanager
def page_map(workers: int) -> Iterator[Callable]:
    """A ``map(fn, tasks)`` for page tasks: the builtin one for one worker, else an unordered
    spawn-pool map, one page per task so a slow page holds up nothing.

    Results arrive as pages finish (not in task order); tasks stream, so memory stays flat.
    Spawn, not fork: the parent may hold threads (onnxruntime, rich) that fork would copy.
    A spawned worker starts with no logging set up (its warnings went to a bare stderr line,
    its info nowhere), so its records are sent back and logged here, at this process's level.
    """
    if workers <= 1:
        yield map
        return
    context = multiprocessing.get_context("spawn")
    root = logging.getLogger()
    queue = context.Queue()
    listener = QueueListener(queue, _Relay())
    pool = context.Pool(workers, initializer=_log_to, initargs=(queue, root.getEffectiveLevel()))
    listener.start()
    try:
        yield partial(pool.imap_unordered, chunksize=1)
    except BaseException:
        # A worker killed mid-record may die holding the queue's lock: the listener (a daemon
        # thread) is not waited for then, or Ctrl-C and Slurm's SIGTERM could hang here.
        pool.terminate()
        pool.join()
        raise
    pool.close()  # workers exit on their own, so each sends its last records first
    pool.join()
    listener.stop()
