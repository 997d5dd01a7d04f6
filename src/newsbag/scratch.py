"""One call's private scratch folder under RUN/cache/scratch, and the removal of abandoned ones."""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import tempfile
from pathlib import Path
from typing import Iterator

from .liveness import HOST

__all__ = ["scratch_folder"]

SCRATCH = Path("cache") / "scratch"


@contextlib.contextmanager
def scratch_folder(run_dir: Path, prefix: str) -> Iterator[Path]:
    """A private folder under RUN/cache/scratch for one call's temporary files, removed with
    them when the call ends or fails.

    In the run directory, next to the outputs, not in $TMPDIR: /tmp is RAM (tmpfs) on many
    desktops. The call holds a record lock on the folder's ``.lock`` (as `locks.manifest_lock`, so
    across nodes too); a folder of this prefix whose lock nobody holds (its process was
    killed) is removed by the next call.
    """
    root = Path(run_dir) / SCRATCH
    root.mkdir(parents=True, exist_ok=True)
    mine = f"{prefix}{HOST}-{os.getpid()}-"
    for folder in root.glob(f"{prefix}*"):
        if not folder.name.startswith(mine):
            _drop_if_abandoned(folder)
    # Locked before it gets its name, so another call never sees it unlocked.
    making = Path(tempfile.mkdtemp(prefix=".new-", dir=root))
    fd = os.open(making / ".lock", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.lockf(fd, fcntl.LOCK_EX)
        path = Path(tempfile.mkdtemp(prefix=mine, dir=root))
        os.replace(making, path)
        try:
            yield path
        finally:
            shutil.rmtree(path, ignore_errors=True)
    finally:
        shutil.rmtree(making, ignore_errors=True)
        os.close(fd)


def _drop_if_abandoned(folder: Path) -> None:
    try:
        fd = os.open(folder / ".lock", os.O_RDWR)
    except OSError:   # gone meanwhile, or not a scratch folder: not ours to remove
        return
    try:
        fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:   # its call is alive
        return
    else:
        shutil.rmtree(folder, ignore_errors=True)
    finally:
        os.close(fd)
