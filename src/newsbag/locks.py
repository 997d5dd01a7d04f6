"""POSIX record locks on a run directory's lock files: one call at a time, across jobs and nodes."""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
from pathlib import Path
from typing import Callable, Iterator

__all__ = ["manifest_lock", "stage_lock", "locked"]

log = logging.getLogger(__name__)


@contextlib.contextmanager
def manifest_lock(run_dir: Path) -> Iterator[None]:
    """Hold the run's manifest lock (RUN/manifests/.lock) while reading, merging and replacing the manifest.

    A POSIX record lock (``fcntl.lockf``), not ``flock`` and not an O_EXCL file: it serialises
    jobs on one node, and across nodes on NFS (the client sends it to the server's lock
    manager; Linux NFS clients turn ``flock`` into the same kind of lock anyway), Lustre
    mounted with ``-o flock`` and GPFS. The kernel drops it when the holder dies, so a killed
    job never leaves a stale lock behind, as an O_EXCL lock file would.
    """
    with locked(Path(run_dir) / "manifests" / ".lock"):
        yield


@contextlib.contextmanager
def stage_lock(run_dir: Path, kind: str) -> Iterator[None]:
    """Hold the run's lock of one builtin stage kind (RUN/manifests/.<kind>.lock) for a whole call.

    A builtin stage computes its selected pages, then aggregates every page of the run from
    what is on disk (leaderboards, summary, gallery, COCO). Two calls at once (two shards)
    would each aggregate before the other's pages were there, and the one writing last would
    drop them; one call at a time, the later one sees every page the earlier one wrote.
    Slurm runs fusion and review as one job after the model arrays, so nothing waits there.
    """
    path = Path(run_dir) / "manifests" / f".{kind}.lock"
    with locked(path, on_wait=lambda: log.info("%s: waiting for another call's %s on %s to finish (%s)",
                                                  kind, kind, run_dir, path)):
        yield


@contextlib.contextmanager
def locked(path: Path, on_wait: Callable[[], None] = lambda: None) -> Iterator[None]:
    """An exclusive POSIX record lock on `path` (created if missing) while the block runs;
    `on_wait` is called once when another process holds it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
    try:
        try:
            fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            on_wait()
            fcntl.lockf(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing the descriptor releases the lock
