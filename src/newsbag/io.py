"""Atomic file writes and JSON read/write: the only way newsbag puts bytes on disk."""

from __future__ import annotations

import contextlib
import errno
import filecmp
import itertools
import json
import math
import os
import time
from pathlib import Path
from typing import Any, Callable, Iterator, TextIO

from .liveness import HOST, writer_gone

try:
    import orjson
except ImportError:  # a venv made before orjson became a dependency: the stdlib does it all, slower
    orjson = None

__all__ = ["atomic_write_bytes", "atomic_write_text", "atomic_text_file", "dumps_strict", "dumps_compact", "write_json", "read_json",
           "read_json_object", "size_text",
           "open_appending", "append_jsonl", "hash_file", "run_dir_error", "remove_dead_temps", "DISK_ERRNOS"]

# OS errors that mean "this location cannot take the write", not a bug: they end the run with
# one line (errors.RunDirError, exit 7) instead of a traceback or a page failure per page.
DISK_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EACCES, errno.EPERM, errno.EFBIG, errno.EIO})


def size_text(n: float) -> str:
    """A size of `n` bytes as people read it: "512 B", "1.5 MB" (powers of 1000)."""
    for unit in ("B", "KB", "MB", "GB", "TB"):
        if abs(n) < 1000 or unit == "TB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000
    return f"{n:.1f} TB"


def run_dir_error(exc: OSError, path: str | os.PathLike, needed: int | None = None, at_least: bool = False):
    """The one-line `RunDirError` for an OS error writing `path`: what, where, the space the
    write needed (``at_least``: a streamed file, known only up to where it failed) and what is
    free there, and what to do."""
    from .errors import RunDirError

    probe = Path(path)
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    reason = exc.strerror or errno.errorcode.get(exc.errno or 0, str(exc))
    need = f"the write needs {'more than ' if at_least else ''}{size_text(needed)}, " if needed is not None else ""
    limit = _file_size_limit() if exc.errno == errno.EFBIG else None
    try:
        usage = os.statvfs(probe)
        free = size_text(usage.f_bavail * usage.f_frsize)
        # A file system can run out of inodes with bytes to spare (many small files): freeing
        # space there means removing files, not making room. Under 0.1 % free counts as none:
        # by the time this is asked, the failed call may have removed its scratch files.
        no_inodes = exc.errno == errno.ENOSPC and usage.f_files > 0 and usage.f_favail <= usage.f_files // 1000
    except OSError:
        free, no_inodes = "unknown", False
    if limit is not None:
        where = f"over the file size limit (ulimit -f: {limit // 1024} KB)"
        fix = "raise the limit (ulimit -f unlimited, or ask the cluster's admins)"
    elif no_inodes:
        where = f"no free inodes left there ({free} free)"
        fix = "remove files there (each page is several files) or use a file system with more inodes"
    elif exc.errno in (errno.ENOSPC, errno.EDQUOT, errno.EFBIG):
        where = f"{free} free there"
        fix = "free space (more than this file: the pages still to do need room too)"
    else:
        where = f"{free} free there"
        fix = "make it writable"
    return RunDirError(f"cannot write {path}: {reason}; {need}{where}; {fix} and rerun the same "
                       "command (finished pages are kept, nothing half-written counts)")


def _file_size_limit() -> int | None:
    """The process's file size limit in bytes (``ulimit -f``), None when there is none."""
    try:
        import resource
    except ImportError:  # not POSIX
        return None
    soft = resource.getrlimit(resource.RLIMIT_FSIZE)[0]
    return None if soft == resource.RLIM_INFINITY else soft


def _write_file(fd: int, data: bytes, path: Path) -> None:
    """Write the temp file of `path`, open as `fd` (one seam, so tests can fill the disk).

    Straight `os.write` calls, no buffered file object around the fd (a quarter of the write's
    CPU for a 100 KB fused page)."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


_TMP_SEQ = itertools.count()
_SWEPT: set[str] = set()  # the folders this process has removed dead writers' temp files from


def _temp_writer_gone(name: str, folder: str, now: float) -> bool:
    """Whether ``name`` (in ``folder``) is a temp file of `_open_temp` whose writer has ended (`liveness.writer_gone`)."""
    head, sep, tail = name.removesuffix(".tmp").rpartition("-")
    head, _, pid = head.rpartition("-")
    if not (name.startswith(".") and name.endswith(".tmp") and sep and pid.isdigit() and tail.isdigit()):
        return False
    try:
        last_write = os.stat(os.path.join(folder, name)).st_mtime
    except OSError:  # renamed into place or removed meanwhile
        last_write = None
    return writer_gone(HOST if head.endswith(f".{HOST}") else None, int(pid), last_write, now)


def remove_dead_temps(folder: Path, *, again: bool = False) -> None:
    """Remove the temp files a killed writer left in `folder`, once per process and folder
    (`again`: once more, for a writer that died since: a runner this process restarts).

    Called on a process's first write into a folder, and by the orchestrator on a source
    folder its runner is to write into (runners name their temps alike): only folders a call
    writes into are listed, each once (a folder of 100k pages costs one listing per call).
    A pid reused since by a process that started after the temp's last write is gone too. Best effort:
    a folder that cannot be listed is left as it is.
    """
    key = str(folder)
    if key in _SWEPT and not again:
        return
    _SWEPT.add(key)
    now = time.time()
    try:
        with os.scandir(folder) as entries:
            dead = [e.name for e in entries if e.name.endswith(".tmp") and _temp_writer_gone(e.name, key, now)]
    except OSError:
        return
    for name in dead:
        with contextlib.suppress(OSError):  # removed by another call meanwhile, or not ours to remove
            os.unlink(os.path.join(key, name))


def _open_temp(path: Path) -> tuple[int, str]:
    """(fd, name) of a new temp file beside `path`, for the atomic writers: ``.<name>.<host>-<pid>-<n>.tmp``,
    created exclusively with the umask's mode (results on shared disks must be group-readable),
    the folder made only when it is missing.

    `tempfile.mkstemp` costs a random name, a 0600 file and a chmod: a quarter of writing a
    70 KB fused page, 15 times per page. Host and pid keep names apart between jobs on a
    shared disk; one taken anyway (a pid reused) moves on to the next number. They also tell
    whether the writer is gone: `remove_dead_temps`.
    """
    remove_dead_temps(path.parent)
    for _ in range(100):
        tmp = str(path.parent / f".{path.name}.{HOST}-{os.getpid()}-{next(_TMP_SEQ)}.tmp")
        try:
            return os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0), 0o666), tmp
        except FileNotFoundError:
            path.parent.mkdir(parents=True, exist_ok=True)
        except FileExistsError:
            pass
    raise FileExistsError(errno.EEXIST, "no free temp file name", str(path))


def _holds(path: Path, data: bytes) -> bool:
    """Whether the file at `path` holds exactly `data` (a size check first, then the bytes)."""
    try:
        if os.stat(path).st_size != len(data):
            return False
        with open(path, "rb") as fh:
            return fh.read() == data
    except OSError:
        return False


def atomic_write_bytes(path: str | os.PathLike, data: bytes, *, durable: bool = True, keep_same: bool = False) -> None:
    """Write `data` to `path` so readers see the old file or the new one, never a half.

    ``durable=False`` skips the fsync, as the runners' page outputs do (`runners/_loop.py`): for
    per-page files whose freshness is checked by identity or content on every rerun, so a page
    a power cut tore is computed again; 15 of them per fused page cost ~6 ms of disk wait here
    and much more on NFS or Lustre.

    ``keep_same=True`` leaves a file that already holds `data` as it is (mtime, inode): for the
    whole-run tables every call recomputes, so a rerun with nothing changed writes nothing.

    Raises:
        errors.RunDirError: the disk is full, over quota, read-only or not writable (one
            line naming the path and the space needed); the temp file is removed.
    """
    path = Path(path)
    if keep_same and _holds(path, data):
        return
    tmp = None
    try:
        fd, tmp = _open_temp(path)
        try:
            _write_file(fd, data, path)
            if durable:
                os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except BaseException as exc:
        if tmp is not None:
            try:
                os.unlink(tmp)
            except FileNotFoundError:
                pass
        if isinstance(exc, OSError) and exc.errno in DISK_ERRNOS:
            raise run_dir_error(exc, path, len(data)) from None
        raise


def atomic_write_text(path: str | os.PathLike, text: str, *, keep_same: bool = False) -> None:
    atomic_write_bytes(path, text.encode("utf-8"), keep_same=keep_same)


def _finite(obj: Any) -> Any:
    """`obj` with every NaN or infinite float replaced by None (JSON null)."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: _finite(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_finite(v) for v in obj]
    return obj


def dumps_strict(obj: Any, **kwargs: Any) -> str:
    """JSON text that strict readers accept: NaN and infinities are written as null, never as
    the bare ``NaN``/``Infinity`` tokens Python's json emits by default.

    The common case (nothing to replace) costs one `json.dumps`; only a refused object is walked.
    """
    kwargs.setdefault("ensure_ascii", False)
    try:
        return json.dumps(obj, allow_nan=False, **kwargs)
    except ValueError:
        return json.dumps(_finite(obj), allow_nan=False, **kwargs)


@contextlib.contextmanager
def atomic_text_file(path: str | os.PathLike, *, keep_same: bool = False) -> Iterator[TextIO]:
    """A text file to write piece by piece (a table over 100k pages need not fit in memory);
    readers see the old file or the whole new one, and disk errors end the run as in
    `atomic_write_bytes`. ``keep_same`` as there: the written file is compared with the one
    in place and dropped when they are the same."""
    path = Path(path)
    tmp = None
    try:
        fd, tmp = _open_temp(path)
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as fh:
            yield fh
            fh.flush()
            if keep_same and path.is_file() and filecmp.cmp(tmp, path, shallow=False):
                os.unlink(tmp)
                return
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException as exc:
        written = None
        if tmp is not None:
            try:
                written = os.path.getsize(tmp)
                os.unlink(tmp)
            except FileNotFoundError:
                pass
        if isinstance(exc, OSError) and exc.errno in DISK_ERRNOS:
            raise run_dir_error(exc, path, written, at_least=True) from None
        raise


def dumps_compact(obj: Any) -> bytes:
    """`dumps_strict` without spaces, as UTF-8 bytes: the same JSON values, from orjson when it
    can (5x the stdlib's C encoder on fused pages: 8 instead of 39 ms per 6 x 300-box page; it
    writes NaN and infinities as null too). What orjson refuses (numpy scalars, integers past
    64 bits) goes through the stdlib as before."""
    if orjson is not None:
        # String keys first: OPT_NON_STR_KEYS, which writes other keys as strings (as the stdlib
        # does), makes every dict slower (0.28 instead of 0.16 ms for a 100 KB fused page).
        for option in (0, orjson.OPT_NON_STR_KEYS):
            try:
                return orjson.dumps(obj, option=option)
            except TypeError:
                pass
    return dumps_strict(obj, separators=(",", ":")).encode("utf-8")


def hash_file(path: str | os.PathLike, h: Any) -> str:
    """The hex digest of `h` over the file's bytes, read in 1 MiB pieces (never held whole).

    Raises:
        OSError: the file cannot be read.
    """
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def write_json(path: str | os.PathLike, obj: Any, *, compact: bool = False, durable: bool = True,
               keep_same: bool = False, volatile: tuple[str, ...] = ()) -> None:
    """Atomic strict JSON. ``compact`` for bulk per-page files: no indent, no spaces, `dumps_compact`
    (``indent`` uses the stdlib's pure-Python encoder: 335 of 740 ms per fused page);
    ``durable`` and ``keep_same`` as in `atomic_write_bytes`.

    ``volatile``: top-level keys of the dict `obj` that differ on every computation (a page's
    ``seconds``): a file holding `obj` but for them is left as it is (mtime, inode). Downstream
    stages identify their inputs by `freshness.file_identity`, so a recomputation that changes nothing
    (``--force``) must not look like new content to them.
    """
    def encode(value: Any) -> bytes:
        return dumps_compact(value) + b"\n" if compact else (dumps_strict(value, indent=1) + "\n").encode("utf-8")

    if volatile and _holds_but(path, obj, volatile, encode):
        return
    atomic_write_bytes(path, encode(obj), durable=durable, keep_same=keep_same)


def _holds_but(path: str | os.PathLike, obj: dict, volatile: tuple[str, ...], encode: Callable[[Any], bytes]) -> bool:
    """Whether the file at `path` holds `obj` encoded by `encode`, with the values of the
    `volatile` keys it records in place of `obj`'s."""
    try:
        with open(path, "rb") as fh:
            held = fh.read()
        old = _parse(held)
    except (OSError, ValueError):
        return False
    if not isinstance(old, dict) or any(k in obj and k not in old for k in volatile):
        return False
    return encode({k: old[k] if k in volatile else v for k, v in obj.items()}) == held


def read_json(path: str | os.PathLike, *, strict: bool = False) -> Any:
    """The JSON value in a UTF-8 file. orjson parses (2.5x the stdlib: reading a page's sources
    is most of what fusion does besides fusing); what it refuses (bare NaN/Infinity tokens of
    foreign writers, integers past 64 bits) is read by the stdlib, as are the error messages.
    ``strict`` refuses NaN/Infinity tokens too: a file newsbag wrote itself never holds them.

    Raises:
        OSError; ValueError (not JSON, not UTF-8, nested too deep for a parser, or with
        ``strict`` a NaN/Infinity token).
    """
    with open(path, "rb") as fh:
        return _parse(fh.read(), strict=strict)


def read_json_object(path: str | os.PathLike, *, strict: bool = False) -> dict | None:
    """The JSON object at `path` (`read_json`), None when there is none: missing, unreadable, torn,
    or another JSON value. For the records beside outputs, which a missing or broken one makes stale."""
    try:
        value = read_json(path, strict=strict)
    except (OSError, ValueError):
        return None
    return value if isinstance(value, dict) else None


def _parse(data: bytes, *, strict: bool = False) -> Any:
    """`read_json` of bytes already read."""
    if orjson is not None:
        try:
            return orjson.loads(data)
        except orjson.JSONDecodeError:
            pass
    try:
        return json.loads(data.decode("utf-8"), **({"parse_constant": _refuse_constant} if strict else {}))
    except RecursionError:  # no file newsbag reads nests past a few levels: a bad file, not a bug
        raise ValueError("JSON nested too deep to read (over ~1,000 levels)") from None


def _refuse_constant(token: str) -> Any:
    raise ValueError(f"{token} is not strict JSON")


def open_appending(path: str | os.PathLike) -> int:
    """An O_APPEND fd on `path`, made if need be. A symlink there is replaced by a file of its
    own, never appended through: a run dir received from someone else may hold one in logs/."""
    flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW
    try:
        return os.open(path, flags, 0o644)
    except OSError as exc:
        if exc.errno != errno.ELOOP or not os.path.islink(path):
            raise
    os.unlink(path)
    return os.open(path, flags, 0o644)


def append_jsonl(path: str | os.PathLike, records: list[dict]) -> None:
    """Append whole lines with one `write` on an O_APPEND fd.

    POSIX keeps each append-mode write contiguous, so two jobs appending to one ledger
    never interleave inside a line (lines are far below the pipe/page sizes involved).
    A write the disk cuts short (it wrote what fit) is taken back and raises as a full disk:
    a torn last line would glue the next append onto it.
    """
    path = Path(path)
    data = "".join(dumps_strict(r) + "\n" for r in records).encode("utf-8")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = open_appending(path)
        try:
            written = os.write(fd, data)
            if written < len(data):
                end = os.lseek(fd, 0, os.SEEK_CUR)
                if os.fstat(fd).st_size == end:  # nobody appended after it: cut the torn part off
                    os.ftruncate(fd, end - written)
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        finally:
            os.close(fd)
    except OSError as exc:
        if exc.errno in DISK_ERRNOS:
            raise run_dir_error(exc, path, len(data)) from None
        raise
