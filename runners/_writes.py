"""Atomic writes of JSON files, with temp names and bytes as newsbag's own writers make them."""

from __future__ import annotations

import errno
import itertools
import json
import os
import shutil
import socket
from pathlib import Path

from _errors import RunDirFull
from _strictjson import dumps_strict

_MASK = os.umask(0)
os.umask(_MASK)
FILE_MODE = 0o666 & ~_MASK

# errno values of ENOSPC, EDQUOT, EROFS, EACCES, EPERM, EFBIG, EIO (newsbag.io.DISK_ERRNOS)
DISK_ERRNOS = frozenset(getattr(errno, n) for n in ("ENOSPC", "EDQUOT", "EROFS", "EACCES", "EPERM", "EFBIG", "EIO")
                         if hasattr(errno, n))

_TMP_SEQ = itertools.count()
HOST = socket.gethostname()


def atomic_write_json(path: Path, obj, durable: bool = True, volatile: tuple[str, ...] = ()) -> None:
    """Write `obj` to `path` through a temp file and ``os.replace``: readers never see half a file.

    ``durable=False`` skips the fsync. Page outputs and shared model outputs use it: a page torn
    by a power cut fails the validity check on the next run and is computed again, while an
    fsync per page costs about 8 ms on this machine's disk, more on NFS or Lustre.

    ``volatile``: top-level keys of the dict `obj` that differ on every computation (a page's
    ``seconds``): a file that holds `obj` but for them is left as it is (mtime, inode), as
    newsbag's `io.write_json` does. Fusion identifies source pages by size and mtime, so a
    ``--force`` whose model answers the same must not make every later stage redo the page.
    """
    if volatile and _holds_but(path, obj, volatile):
        return
    try:
        _atomic_write_json(path, obj, durable)
    except OSError as exc:
        if exc.errno not in DISK_ERRNOS:
            raise
        try:
            free = f"{shutil.disk_usage(path.parent).free / 1e6:.1f} MB"
        except OSError:
            free = "unknown"
        raise RunDirFull(f"cannot write {path}: {exc.strerror}; the write needs about "
                         f"{len(dumps_strict(obj)) / 1e3:.1f} KB, {free} free there") from None


def _open_temp(path: Path) -> tuple[int, str]:
    """(fd, name) of a new temp file beside `path`: ``.<name>.<host>-<pid>-<n>.tmp``, as newsbag's
    own writers name theirs (`newsbag.io._open_temp`), so that the next call that writes there
    can tell one a killed runner left (its pid is gone) and remove it."""
    for _ in range(100):
        tmp = str(path.parent / f".{path.name}.{HOST}-{os.getpid()}-{next(_TMP_SEQ)}.tmp")
        try:  # mode 0666 less the umask: outputs on shared disks must be group-readable
            return os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o666), tmp
        except FileExistsError:  # a pid reused: the next number
            pass
    raise FileExistsError(errno.EEXIST, "no free temp file name", str(path))


def _encode(obj) -> bytes:
    return (dumps_strict(obj, ensure_ascii=False) + "\n").encode("utf-8")


def _holds_but(path: Path, obj: dict, volatile: tuple[str, ...]) -> bool:
    """Whether the file at `path` holds `obj` as written here, with the values of the
    `volatile` keys it records in place of `obj`'s."""
    try:
        held = path.read_bytes()
        old = json.loads(held)
    except (OSError, ValueError):
        return False
    if not isinstance(old, dict) or any(k in obj and k not in old for k in volatile):
        return False
    return _encode({k: old[k] if k in volatile else v for k, v in obj.items()}) == held


def _atomic_write_json(path: Path, obj, durable: bool = True) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = _open_temp(path)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(_encode(obj))
            if durable:
                fh.flush()
                os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
