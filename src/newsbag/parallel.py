"""One way to spread independent page tasks over processes (fusion, review)."""

from __future__ import annotations

import multiprocessing
from contextlib import contextmanager
from functools import partial
from typing import Callable, Iterator

__all__ = ["page_map"]


@contextmanager
def page_map(workers: int) -> Iterator[Callable]:
    """A ``map(fn, tasks)`` for page tasks: the builtin one for one worker, else an unordered
    spawn-pool map, one page per task so a slow page holds up nothing.

    Results arrive as pages finish (not in task order); tasks stream, so memory stays flat.
    Spawn, not fork: the parent may hold threads (onnxruntime, rich) that fork would copy.
    """
    if workers <= 1:
        yield map
        return
    with multiprocessing.get_context("spawn").Pool(workers) as pool:
        yield partial(pool.imap_unordered, chunksize=1)
