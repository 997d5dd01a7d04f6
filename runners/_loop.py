"""The page loop every runner shares (stdlib only): skip, detect, write, report.

A family script defines a detector class and ends with ``_loop.main(MyDetector)``:

    class MyDetector:
        def __init__(self, params: dict, device: str, allow_cpu_fallback: bool): ...
            # load the model ONCE; set self.device_used and self.info (dict for the report)
        def detect(self, image_path: str, page: dict) -> list[dict]: ...
            # regions: {"bbox_xyxy": [x0,y0,x1,y1] original pixels, "label": raw label,
            #           "score": float|None, "order": int|None, "text": str|None}
        def close(self) -> None: ...
        # optional: def detect_batch(self, items: list[tuple[str, dict]]) -> list[list[dict]]
        #   used when batch_size (job key, else params key) > 1; a batch that raises is
        #   retried page by page so only the bad page fails. It may also be a generator
        #   yielding one page's regions at a time: each page is then written and reported
        #   as soon as it is yielded (progress per page inside a batch; the orchestrator's
        #   no-progress limit restarts with each page). Use a generator wherever the library
        #   hands pages back one at a time (PaddleOCRVL.predict_iter); a list means the
        #   batch's pages are reported together, each with the batch's time / N.
        # optional: SHARED_PARAMS = ("model_path", ...): the params the model pass depends
        #   on. Variants of one stage that agree on them share one model pass per page. Such
        #   a class also defines ``model_pass(self, image_path) -> JSON`` (the model's part)
        #   and ``from_pass(params, output) -> regions`` (a staticmethod: the variant's own
        #   post-processing), with detect() = from_pass(self.params, model_pass(...)).
        #   run_job sets ``self.shared`` (a `SharedModelOutput`, or None) and, when it is
        #   set, reads a sibling's stored pass itself: a variant whose pages all have one
        #   never constructs the detector (no model load); it does so on the first page
        #   without one.
        # optional: SHARED_FLOOR = "threshold": a score cut that may differ between the
        #   sharing variants. The pass keeps everything above the lowest one
        #   (``self.shared.floor``) and each variant applies its own cut afterwards; only
        #   for families whose later post-processing commutes with that cut.
        # optional: shares_pass(params) -> bool (staticmethod): False where this variant's
        #   pass cannot be shared at all (e.g. a backend whose library post-processes
        #   after the threshold in ways that depend on the other boxes).

The orchestrator starts ``python <family>.py --job /dev/stdin`` and writes the job to the
runner's stdin (so a killed orchestrator leaves no job file behind). This module owns the
rest: the skip-if-valid-output check (made before compute), per-page error capture, atomic
writes, timing, provenance, the run report and the exit code. Runners never import newsbag.

Revisions: bump ``"revision"`` in ``<family>.tool.json`` by one whenever a code change makes the
runner write something else for the same image and parameters (a change to a shared helper
here, such as ``clean_regions``, bumps every family using it); the page fingerprint includes it,
so the next run redoes that family's pages, and only those.

Protocol on stdout: one line per event, ``@@newsbag <json>`` (setup / start / done / end /
fatal); everything else a model library prints goes to stderr or is ignored by the orchestrator.
A page is ``ok`` (regions found), ``empty`` (the model answered but nothing usable came back;
the ``done`` event and the report carry the reason), ``skipped`` (already finished) or ``failed``.
Exit codes: 0 all pages ok, empty or skipped; 4 some pages failed; 3 a dependency or the
model's weights are missing; 5 the requested GPU is unusable and CPU fallback is not
allowed; 1 the model could not be set up for another reason (a ``fatal`` event says which).

The run report is rewritten atomically as pages finish (at most every ``report_flush_s``
seconds, or less often when it is large: `flush_wait`; and always at the end), so a runner
killed by Slurm or the OOM killer leaves a report that matches the page files on disk.
Nothing is written before the model is set up: a runner that refuses to start leaves no
report and no folder behind. Calls running one variant at once on different pages share its
report: each write merges the runner's own page records over the file's under a lock
(`_report_lock`), so none drops another's pages.

A runner dies with the orchestrator that started it (``NEWSBAG_PARENT_PID``): Linux
PR_SET_PDEATHSIG plus a parent-pid watch elsewhere; it then kills its own process group, so
no orphan keeps computing (and recording) pages nobody waits for.
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import fcntl
import itertools
import json
import shutil
import math
import os
import resource
import signal
import socket
import sys
import threading
import time
import traceback
from dataclasses import dataclass
from pathlib import Path

EVENT_PREFIX = "@@newsbag "
_MASK = os.umask(0)
os.umask(_MASK)
FILE_MODE = 0o666 & ~_MASK
FAILED_DIR = "_failed"
SHARED_DIR = "_shared"


class DeviceUnavailable(RuntimeError):
    """The requested accelerator cannot be used and CPU fallback is not allowed."""


class MissingDependency(RuntimeError):
    """A library or model file the family needs is not installed."""


class RunDirFull(RuntimeError):
    """The output folder cannot be written (disk full, quota, read-only): not a page's fault.

    The job stops at once with a ``fatal`` event (error_class RunDirError) and exit 7; the
    orchestrator ends the run with one line and the rerun resumes.
    """


class SetupRefused(RuntimeError):
    """The model could not be set up; the ``fatal`` event is out and ``code`` is the exit code."""

    def __init__(self, code: int):
        super().__init__(code)
        self.code = code


class ContextLost(RuntimeError):
    """The process's CUDA context is unusable after a sticky error: the job stops (exit 8) and the
    orchestrator starts a fresh runner for the pages left."""


# CUDA's sticky errors (cudaErrorIllegalAddress, LaunchFailure, Assert, MisalignedAddress,
# IllegalInstruction, HardwareStackError): "any further CUDA work will return the same error;
# the process must be terminated and relaunched" (CUDA runtime API). Matched in the library's
# message, which torch, paddle and onnxruntime all pass through.
_STICKY_CUDA_ERRORS = ("illegal memory access", "unspecified launch failure", "device-side assert",
                       "misaligned address", "illegal instruction", "hardware stack error")


def error_line(exc: BaseException, limit: int = 500) -> str:
    """``<ExceptionType>: <message>``, its first line cut at `limit`: how page records, events
    and probes quote an error."""
    return f"{type(exc).__name__}: {exc}".splitlines()[0][:limit]


def context_lost(exc: BaseException) -> bool:
    """Whether `exc` is a CUDA error that leaves this process unable to use the GPU again."""
    text = str(exc).lower()
    return any(needle in text for needle in _STICKY_CUDA_ERRORS)


# errno values of ENOSPC, EDQUOT, EROFS, EACCES, EPERM, EFBIG, EIO (newsbag.io.DISK_ERRNOS)
_DISK_ERRNOS = frozenset(getattr(errno, n) for n in ("ENOSPC", "EDQUOT", "EROFS", "EACCES", "EPERM", "EFBIG", "EIO")
                         if hasattr(errno, n))
EXIT_RUN_DIR = 7


def _finite(obj):
    """`obj` with NaN/inf floats as None: strict JSON readers refuse bare NaN tokens."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: _finite(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_finite(v) for v in obj]
    return obj


def dumps_strict(obj, **kwargs) -> str:
    """JSON without NaN/Infinity tokens (written as null); one plain dumps when there are none."""
    try:
        return json.dumps(obj, allow_nan=False, **kwargs)
    except ValueError:
        return json.dumps(_finite(obj), allow_nan=False, **kwargs)


_WATCHING = False


def _terminate(*_args) -> None:
    """Stop now, with every process this runner started (it leads its own process group)."""
    if os.getpgrp() == os.getpid():
        os.killpg(os.getpid(), signal.SIGKILL)
    os.kill(os.getpid(), signal.SIGKILL)


def _watch_parent(parent: int) -> None:
    while os.getppid() == parent:
        time.sleep(1.0)
    _terminate()


def die_with_parent() -> None:
    """When the orchestrator (``NEWSBAG_PARENT_PID``) dies, by kill -9 or Ctrl-C, die too.

    Its SIGTERM (a stop, or Slurm's scancel) also takes the whole process group down at once:
    a model library's worker processes must not outlive the runner.
    """
    global _WATCHING
    parent = os.environ.get("NEWSBAG_PARENT_PID")
    if _WATCHING or not parent or not parent.isdigit() or threading.current_thread() is not threading.main_thread():
        return
    _WATCHING = True
    signal.signal(signal.SIGTERM, _terminate)
    if sys.platform.startswith("linux"):
        try:
            import ctypes

            ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM, 0, 0, 0)  # PR_SET_PDEATHSIG
        except (OSError, AttributeError):
            pass
    if os.getppid() != int(parent):  # the orchestrator died before the line above
        _terminate()
    threading.Thread(target=_watch_parent, args=(int(parent),), daemon=True, name="newsbag-parent").start()


class NoRegions(list):
    """What ``detect`` returns when the model answered but nothing usable came back.

    An empty list that carries the reason (for example the first characters of an answer
    that did not parse), so the page is reported ``empty`` with that reason, not ``ok``.
    """

    def __init__(self, reason: str):
        super().__init__()
        self.reason = reason


EXIT_SETUP_FAILED = 1
EXIT_MISSING = 3
EXIT_PAGES_FAILED = 4
EXIT_DEVICE = 5
EXIT_CONTEXT_LOST = 8
DEFAULT_MAX_EMPTY_SHARE = 0.2


def emit(event: str, **fields) -> None:
    try:
        sys.stdout.write(EVENT_PREFIX + dumps_strict({"event": event, **fields}) + "\n")
        sys.stdout.flush()
    except OSError:  # nobody reads the events any more: the orchestrator is gone
        _terminate()


def log(msg: str) -> None:
    sys.stderr.write(f"[{time.strftime('%H:%M:%S')}] {msg}\n")
    sys.stderr.flush()


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
        if exc.errno not in _DISK_ERRNOS:
            raise
        try:
            free = f"{shutil.disk_usage(path.parent).free / 1e6:.1f} MB"
        except OSError:
            free = "unknown"
        raise RunDirFull(f"cannot write {path}: {exc.strerror}; the write needs about "
                         f"{len(dumps_strict(obj)) / 1e3:.1f} KB, {free} free there") from None


_TMP_SEQ = itertools.count()
_HOST = socket.gethostname()


def _open_temp(path: Path) -> tuple[int, str]:
    """(fd, name) of a new temp file beside `path`: ``.<name>.<host>-<pid>-<n>.tmp``, as newsbag's
    own writers name theirs (`newsbag.io._open_temp`), so that the next call that writes there
    can tell one a killed runner left (its pid is gone) and remove it."""
    for _ in range(100):
        tmp = str(path.parent / f".{path.name}.{_HOST}-{os.getpid()}-{next(_TMP_SEQ)}.tmp")
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


def is_valid_output(path: Path, page_id: str, fingerprint: str | None = None) -> bool:
    """A finished page: parseable JSON for this page id with a regions list, made with
    `fingerprint` (the job's, computed by newsbag; None: any)."""
    try:
        with open(path, encoding="utf-8") as fh:
            page = json.load(fh)
    except (OSError, ValueError):
        return False
    if not (isinstance(page, dict) and page.get("page_id") == page_id and isinstance(page.get("regions"), list)):
        return False
    source = page.get("source")
    return fingerprint is None or (isinstance(source, dict) and source.get("fingerprint") == fingerprint)


def _identity(path: Path) -> list[int]:
    """[size, mtime_ns] of a file: newsbag's `freshness.file_identity`."""
    st = os.stat(path)
    return [st.st_size, st.st_mtime_ns]


def clean_regions(regions, width: int, height: int, label_map: dict) -> tuple[list[dict], dict]:
    """Swap inverted corners, clip boxes to the page, drop degenerate ones, add the canonical class.

    Returns the regions and a warning counter (aggregated per page, never per box).
    """
    out, warnings = [], {}
    append, isfinite, lookup = out.append, math.isfinite, label_map.get
    for region in regions:
        x0, y0, x1, y1 = region["bbox_xyxy"]
        x0, y0, x1, y1 = float(x0), float(y0), float(x1), float(y1)
        if not (isfinite(x0) and isfinite(y0) and isfinite(x1) and isfinite(y1)):
            warnings["non_finite_box"] = warnings.get("non_finite_box", 0) + 1
            continue
        if x0 > x1 or y0 > y1:
            warnings["inverted_box"] = warnings.get("inverted_box", 0) + 1
            x0, x1, y0, y1 = min(x0, x1), max(x0, x1), min(y0, y1), max(y0, y1)
        # The common case (inside the page) skips the clip; min/max keep the int page edge
        # where a box is clipped, as before.
        if 0.0 <= x0 and 0.0 <= y0 and x1 <= width and y1 <= height:
            cx0, cy0, cx1, cy1 = x0, y0, x1, y1
        else:
            cx0, cy0 = min(max(x0, 0.0), width), min(max(y0, 0.0), height)
            cx1, cy1 = min(max(x1, 0.0), width), min(max(y1, 0.0), height)
            if (cx0, cy0, cx1, cy1) != (x0, y0, x1, y1):
                warnings["clipped_box"] = warnings.get("clipped_box", 0) + 1
        # Tested as written (2 decimals): a box 1.001 wide that rounds to 0.99 would pass here
        # and be dropped by the reader's repair (`contract.repair_regions`, the same 1-px rule).
        cx0, cy0, cx1, cy1 = round(cx0, 2), round(cy0, 2), round(cx1, 2), round(cy1, 2)
        if cx1 - cx0 < 1 or cy1 - cy0 < 1:
            warnings["degenerate_box"] = warnings.get("degenerate_box", 0) + 1
            continue
        raw = str(region["label"])
        canonical = lookup(raw)
        if canonical is None:
            warnings[f"unknown_label:{raw}"] = warnings.get(f"unknown_label:{raw}", 0) + 1
            canonical = "unknown"
        score = region.get("score")
        order = region.get("order")
        append({
            "bbox_xyxy": [cx0, cy0, cx1, cy1],
            "label": raw,
            "class": canonical,
            "score": None if score is None else round(float(score), 5),
            "order": None if order is None else int(order),
            "text": region.get("text"),
        })
        # A recogniser's word boxes and the model that read the line (recognize_tesseract) go to the transcript.
        for key in _TEXT_KEYS:
            if key in region:
                out[-1][key] = region[key]
    return out, warnings


# A tuple, not a set: the page's keys come in this order on every run, so a page read again
# the same is the same bytes (a set's order changes with the process's hash seed).
_TEXT_KEYS = ("words", "model")


class SharedModelOutput:
    """One model pass per page for the variants of a stage that differ only in post-processing.

    The first variant to reach a page stores the model's output (JSON; floats round-trip
    exactly) in ``<stage>/_shared/<key>/<page_id>.json``, where ``key`` hashes the family
    and the values of its ``SHARED_PARAMS``; a sibling variant with the same key reads it
    instead of running the model, so tesseract blocks + paragraphs cost one layout analysis
    and text_lines lines + blocks one DB pass. An entry records the image's identity (path,
    size, mtime) and is ignored when that changed; it is deleted once every variant sharing
    the key has written its page from it (``release``), and the pipeline drops what is left
    when the stage ends (newsbag ``rundir.drop_shared_passes``), so the cache holds only
    pages in flight.
    With ``SHARED_FLOOR`` the pass keeps every box above the sharing variants' lowest score
    cut (``floor``, part of the key) and each variant applies its own cut afterwards: one
    PP-PicoDet or YOLO pass serves variants that differ only in threshold.
    """

    def __init__(self, folder: Path, variant_dirs: list[Path], floor: float | None = None):
        self.folder = folder
        self.variant_dirs = variant_dirs  # every variant sharing the key, this one included
        self.floor = floor  # the lowest SHARED_FLOOR of those variants (part of the folder key)

    @staticmethod
    def key(family: str, params: dict, names, floor: float | None = None) -> str:
        import hashlib

        blob = json.dumps([family, {k: params.get(k) for k in names}, *([] if floor is None else [floor])],
                          sort_keys=True, default=str)
        return hashlib.sha256(blob.encode()).hexdigest()[:12]

    @staticmethod
    def _identity(page: dict) -> list:
        st = os.stat(page["image_path"])
        return [str(page["image_path"]), st.st_size, st.st_mtime_ns]

    def get(self, page: dict) -> tuple | None:
        """(output, made) of the page's stored pass, None when there is none for this image;
        ``made`` is the device and model the pass ran with (what the reader's page records)."""
        try:
            with open(self.folder / f"{page['page_id']}.json", encoding="utf-8") as fh:
                entry = json.load(fh)
            if entry.get("image") == self._identity(page):
                return entry["output"], {"device": str(entry["made"]["device"]), "model": str(entry["made"]["model"])}
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            pass
        return None

    def put(self, page: dict, output, made: dict) -> None:
        atomic_write_json(self.folder / f"{page['page_id']}.json",
                          {"image": self._identity(page), "output": output, "made": made}, durable=False)

    def release(self, page_id: str) -> None:
        """Delete the page's entry once every sharing variant has written its page from it.

        A sibling's page counts only if it is not older than the entry: on a rerun after a
        change (new scan, new parameters, ``--force``) the orchestrator deletes each variant's
        stale page just before running that variant, so the first variant still sees its
        sibling's old page, which must not release the pass the sibling is about to read.
        """
        entry = self.folder / f"{page_id}.json"
        try:
            made = entry.stat().st_mtime_ns
            if all((d / f"{page_id}.json").stat().st_mtime_ns >= made for d in self.variant_dirs):
                entry.unlink(missing_ok=True)
        except FileNotFoundError:  # no entry, or a sibling without its page yet
            pass


def _shared_for(job: dict, detector_cls, out_dir: Path) -> SharedModelOutput | None:
    """The shared-output store of this job, or None when no other variant of the stage shares its model pass."""
    names = getattr(detector_cls, "SHARED_PARAMS", None)
    variants = job.get("stage_variants") or {}
    params = job.get("params", {})
    shares = getattr(detector_cls, "shares_pass", lambda _params: True)
    if not names or len(variants) < 2 or not shares(params):
        return None
    key = SharedModelOutput.key(job["family"], params, names)
    sharing = {v: p for v, p in variants.items()
               if shares(p) and SharedModelOutput.key(job["family"], p, names) == key}
    if len(sharing) < 2:
        return None
    floor_name = getattr(detector_cls, "SHARED_FLOOR", None)
    # The floor is part of the folder key: an entry computed at a higher floor (say, before a
    # variant with a lower cut was added to the config) is never read by a variant below it.
    floor = min(float(p[floor_name]) for p in sharing.values()) if floor_name else None
    return SharedModelOutput(out_dir.parent / SHARED_DIR / SharedModelOutput.key(job["family"], params, names, floor),
                             [out_dir.parent / v for v in sharing], floor)


def shared_floor(detector, own: float) -> float:
    """The score cut the model pass runs at: the sharing variants' lowest, else this variant's own."""
    shared = getattr(detector, "shared", None)
    return own if shared is None or shared.floor is None else shared.floor


def empty_reason(raw, regions: list, warnings: dict) -> str | None:
    """Why a page has no regions, or None when it has some."""
    if regions:
        return None
    reason = getattr(raw, "reason", None)
    if reason:
        return str(reason)[:300]
    if raw:
        dropped = ", ".join(f"{k} {v}" for k, v in sorted(warnings.items()))
        return f"all {len(raw)} regions the model returned were dropped ({dropped})"
    return "the model returned no regions"


def summarise_pages(report: dict, max_empty_share: float) -> None:
    """Totals by page status over every page the report knows, the empty share and its flag, and
    the answered pages by the device they ran on (``devices``: calls, restarts and fallbacks of one
    source may differ, and ``device_used`` is only the last runner's).

    The share is empty / (ok + empty): pages the model answered. Above `max_empty_share` the
    source is flagged: a model that answers but never parses looks like success otherwise.
    """
    totals = {"ok": 0, "empty": 0, "failed": 0}
    devices: dict[str, int] = {}
    for rec in report.get("pages", {}).values():
        status = rec.get("status", "ok")
        totals[status] = totals.get(status, 0) + 1
        if status in ("ok", "empty") and rec.get("device"):
            devices[rec["device"]] = devices.get(rec["device"], 0) + 1
    report["devices"] = devices
    answered = totals["ok"] + totals["empty"]
    share = totals["empty"] / answered if answered else None
    report["page_totals"] = totals
    report["empty_share"] = None if share is None else round(share, 4)
    report["max_empty_share"] = max_empty_share
    report["flags"] = ([f"{totals['empty']} of {answered} answered pages empty ({share:.0%}, above "
                        f"{max_empty_share:.0%}): the model answers but nothing usable parses; see its log"]
                       if share is not None and share > max_empty_share else [])


def flush_wait(flush_s: float, last_write_s: float) -> float:
    """Seconds until the next report write: `flush_s`, or 20 times the last write's when longer.

    A write costs in proportion to the pages the report holds (a 100k-page report, 16 MB: 0.25 s
    here), so rewriting it every second took a quarter of the runner's time; this keeps it
    under 5 %, and a shard's report (a few ms) still goes out every `flush_s`.
    """
    return max(flush_s, 20 * last_write_s)


def _load_report(path: Path) -> dict:
    try:
        with open(path, encoding="utf-8") as fh:
            report = json.load(fh)
        return report if isinstance(report, dict) else {}
    except (OSError, ValueError):
        return {}


def _stamp(path: Path) -> tuple | None:
    """(inode, size, mtime) of a file, None when missing: whether it is still the one we wrote."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_ino, st.st_size, st.st_mtime_ns


@contextlib.contextmanager
def _report_lock(report_path: Path):
    """Hold ``.<report name>.lock`` beside the run report while it is read, merged and replaced.

    Two calls may run one variant at once on different pages (``--pages`` subsets of one run
    dir): one lock per report, so each merges its records over the other's, never under them.
    A POSIX record lock, as newsbag's ``locks.manifest_lock``: it holds across nodes on NFS,
    and the kernel drops it when its holder is killed.
    """
    lock = report_path.with_name(f".{report_path.name}.lock")
    try:
        report_path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(lock, os.O_RDWR | os.O_CREAT, FILE_MODE)
    except OSError as exc:
        if exc.errno not in _DISK_ERRNOS:
            raise
        raise RunDirFull(f"cannot write {lock}: {exc.strerror}") from None
    try:
        fcntl.lockf(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing the descriptor releases the lock


def _construct(detector_cls, job: dict, where: str):
    """The detector (its model load); a refusal is logged, emitted (``fatal``) and raised as
    `SetupRefused` with the exit code."""
    try:
        return detector_cls(job.get("params", {}), job.get("device", "auto"), bool(job.get("allow_cpu_fallback", True)))
    except (ImportError, MissingDependency) as exc:
        log(f"{where}: missing dependency: {exc}")
        emit("fatal", error_class="MissingDependency", error=str(exc))
        raise SetupRefused(EXIT_MISSING) from None
    except DeviceUnavailable as exc:
        log(f"{where}: device unavailable: {exc}")
        emit("fatal", error_class="DeviceUnavailable", error=str(exc))
        raise SetupRefused(EXIT_DEVICE) from None
    except Exception as exc:  # CUDA init, no kernels for this GPU, corrupt weights, a bug: keep its own words
        error = error_line(exc, 800)
        log(f"{where}: the model could not be set up: {error}")
        log(traceback.format_exc())
        emit("fatal", error_class=type(exc).__name__, error=f"model setup failed: {error}")
        raise SetupRefused(EXIT_SETUP_FAILED) from None


@dataclass(frozen=True)
class WorkUnit:
    """Pages run together: one ``detect_batch`` call (`batch`), else one page through ``detect``."""

    pages: tuple
    batch: bool


def work_units(todo: list[dict], isolate: set[str], batch_size: int | None) -> list[WorkUnit]:
    """The order the pages to do run in: those not in `isolate`, in batches of `batch_size`
    (None: one by one), then each page of `isolate` alone, so no page the orchestrator suspects
    takes others down with it."""
    together = [page for page in todo if page["page_id"] not in isolate]
    if batch_size is None:
        units = [WorkUnit((page,), False) for page in together]
    else:
        units = [WorkUnit(tuple(together[i:i + batch_size]), True) for i in range(0, len(together), batch_size)]
    return units + [WorkUnit((page,), False) for page in todo if page["page_id"] in isolate]


def batch_size_of(job: dict, detector_cls, shared: SharedModelOutput | None) -> int | None:
    """Pages per ``detect_batch`` call: the job's ``batch_size`` (else the params'), when over 1,
    the detector has ``detect_batch`` and no shared model pass is read page by page; else None."""
    size = int(job.get("batch_size") or job.get("params", {}).get("batch_size") or 1)
    return size if size > 1 and shared is None and callable(getattr(detector_cls, "detect_batch", None)) else None


def exit_code(refused: int | None, full: bool, lost: bool, failed: int) -> int:
    """The runner's exit code once its page loop is over: the code of a model that could not be
    set up (`refused`, loaded late for a variant reading shared passes), then a run dir that
    cannot be written, then a lost CUDA context, then failed pages."""
    if refused is not None:
        return refused
    if full:
        return EXIT_RUN_DIR
    if lost:
        return EXIT_CONTEXT_LOST
    return EXIT_PAGES_FAILED if failed else 0


def merged_pages(skipped: dict, theirs, mine: dict) -> dict:
    """The report's page records: this job's (`mine`) over those on disk (`theirs`: another
    call's pages, earlier runs; anything but a dict counts as none) over the skipped pages'."""
    return {**skipped, **(theirs if isinstance(theirs, dict) else {}), **mine}


class _Report:
    """The variant's run report as one job keeps it: the job's page records merged over the
    file's under `_report_lock` at every write (other calls may run the variant on other pages),
    written when asked and, while the pages run, by a background thread at most every
    `flush_wait`, so fast pages followed by a hang or a kill are on disk."""

    def __init__(self, job: dict, path: Path, skipped: dict, n_skipped: int, on_flush=None):
        self.job, self.path, self.skipped, self.on_flush = job, path, skipped, on_flush
        self.max_empty_share = float(job.get("max_empty_share", DEFAULT_MAX_EMPTY_SHARE))
        self.flush_s = float(job.get("report_flush_s", 1.0))
        # Stat before reading: a report another call replaces in between is merged at the first write.
        self.written = _stamp(path)  # the report as this job read or last wrote it
        self.data = _load_report(path)
        self.data.update({
            "stage": job["stage"], "variant": job["variant"], "family": job["family"],
            "params": job.get("params", {}), "device_requested": job.get("device", "auto"),
            "allow_cpu_fallback": bool(job.get("allow_cpu_fallback", True)),
            "python": sys.executable, "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "state": "running",
            # Who says "running": newsbag marks the report killed when it sees this runner die
            # (reports.mark_runner_killed).
            "pid": os.getpid(), "host": _HOST,
        })
        for ended in ("finished", "interrupted", "killed", "killed_by"):
            self.data.pop(ended, None)
        # The page records this job writes down: its own pages, and the outcomes of this call's
        # pages that an earlier runner could not write (``settled``: the page it died on, ...).
        self.mine = dict(job.get("settled") or {})
        self.counts = {"ok": 0, "empty": 0, "failed": 0, "skipped": n_skipped}
        self.lock = threading.Lock()
        self.dirty = threading.Event()
        self.last_write_s = 0.0
        self._stop = threading.Event()

    def write(self) -> None:
        """Write the report now (and let the family mirror it), atomically."""
        with self.lock:
            self._write()

    def _write(self) -> None:
        """`write`, the caller holding `lock`."""
        with _report_lock(self.path):
            t_write = time.perf_counter()  # after the lock: waiting for another call costs nothing
            # Read again only when another call running this variant has replaced the file since.
            on_disk = self.data if _stamp(self.path) == self.written else _load_report(self.path)
            report = self.data
            report["pages"] = merged_pages(self.skipped, on_disk.get("pages"), self.mine)
            report["counts"] = dict(self.counts)
            report["updated"] = time.strftime("%Y-%m-%dT%H:%M:%S%z")
            report["peak_rss_mb"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)
            timed = [p["seconds"] for p in report["pages"].values()
                     if p.get("status") in ("ok", "empty") and p.get("seconds") is not None]
            report["mean_page_seconds"] = round(sum(timed) / len(timed), 4) if timed else None
            summarise_pages(report, self.max_empty_share)
            atomic_write_json(self.path, report)
            self.written = _stamp(self.path)
            if self.on_flush is not None:
                self.on_flush(self.job, report)
            self.last_write_s = time.perf_counter() - t_write
        self.dirty.clear()

    def record(self, page_id: str, record: dict, status: str) -> None:
        """Keep one page's record; the next flush writes it."""
        with self.lock:
            self.mine[page_id] = record
            self.counts[status] += 1
            self.dirty.set()

    def start_flushing(self) -> None:
        threading.Thread(target=self._flush_loop, daemon=True).start()

    def _flush_loop(self) -> None:
        # A background writer, not a rewrite of a 100k-page report after every page.
        while not self._stop.wait(flush_wait(self.flush_s, self.last_write_s)):
            if self.dirty.is_set():
                with self.lock:
                    try:
                        self._write()
                    except RunDirFull:
                        return  # the page loop meets the same disk and stops the job

    def end(self, completed: bool, write: bool) -> None:
        """Stop the flushing and record how the job ended (``finished``, else ``interrupted``:
        a SIGTERM from Slurm or the orchestrator still leaves a report that says so), written
        when `write`."""
        self._stop.set()
        with self.lock:
            state = "finished" if completed else "interrupted"
            self.data["state"] = state
            self.data[state] = time.strftime("%Y-%m-%dT%H:%M:%S%z")
            if write:
                self._write()


class _PageLoop:
    """One job's pages through its detector: the model loaded once (or not at all while a
    sibling variant's shared pass serves), each page written and reported, each page's error
    kept to that page."""

    def __init__(self, job: dict, detector_cls, report: _Report, todo: list[dict]):
        self.job, self.detector_cls, self.report, self.todo = job, detector_cls, report, todo
        self.out_dir = Path(job["out_dir"])
        self.failed_dir = self.out_dir / FAILED_DIR
        self.label_map = job.get("label_map", {})
        self.where = f"{job['stage']}/{job['variant']}"
        self.params = job.get("params", {})
        self.shared = _shared_for(job, detector_cls, self.out_dir)
        self.detector = None
        self.own: dict = {}   # the device and model of this job's model, once loaded
        self.made: dict = {}  # the device and model of the pass behind the page being written

    def load(self) -> None:
        """Set up the model (once per job): the setup event and the report say where it runs."""
        job, report = self.job, self.report.data
        t0 = time.perf_counter()
        self.detector = _construct(self.detector_cls, job, self.where)
        setup_seconds = time.perf_counter() - t0
        self.detector.shared = self.shared
        info = dict(getattr(self.detector, "info", {}) or {})
        self.own.update(device=getattr(self.detector, "device_used", "cpu"), model=info.get("model", job["family"]))
        self.made.update(self.own)
        report.pop("shared_pass", None)
        report.update({"device_used": self.own["device"], "setup_seconds": round(setup_seconds, 3), **info})
        emit("setup", device=self.own["device"], seconds=round(setup_seconds, 3), **info)
        log(f"{self.where}: model ready on {self.own['device']} in {setup_seconds:.1f}s; {len(self.todo)} pages to do")
        self.report.write()  # the report exists from the moment the model is loaded

    def from_shared_pass(self, page: dict, stored):
        """The page's regions from a sibling's stored pass (`stored`), else from this variant's own,
        stored for the siblings; `made` says which pass."""
        if stored is None:
            output = self.detector.model_pass(page["image_path"])
            self.made.update(self.own)
            self.shared.put(page, output, self.own)
            return self.detector_cls.from_pass(self.params, output)
        output, by = stored
        if not self.made:  # no model of its own, nor a page yet: say whose pass it reads
            self.report.data.update(device_used=by["device"], setup_seconds=0.0, model=by["model"], shared_pass=True)
            emit("setup", device=by["device"], seconds=0.0, model=by["model"], shared_pass=True)
            log(f"{self.where}: reading the stage's shared model pass (made on {by['device']}); no model loaded")
        self.made.update(by)
        return self.detector_cls.from_pass(self.params, output)

    def finish_ok(self, page: dict, raw, seconds: float) -> None:
        job, page_id = self.job, page["page_id"]
        regions, warnings = clean_regions(raw, int(page["width"]), int(page["height"]), self.label_map)
        reason = empty_reason(raw, regions, warnings)
        status = "empty" if reason else "ok"
        source = {"stage": job["stage"], "variant": job["variant"], "family": job["family"], **self.made}
        record = {
            "page_id": page_id,
            "image": {"path": page["path"], "width": int(page["width"]), "height": int(page["height"])},
            "source": {**source, "fingerprint": page["fingerprint"]} if page.get("fingerprint") else source,
            "regions": regions,
            "seconds": round(seconds, 4),
        }
        if warnings:
            record["warnings"] = warnings
        if reason:
            record["empty_reason"] = reason
            log(f"page {page_id} ({page['path']}): {self.where}: empty: {reason}")
        path = self.out_dir / f"{page_id}.json"
        atomic_write_json(path, record, durable=False, volatile=("seconds",))
        (self.failed_dir / f"{page_id}.json").unlink(missing_ok=True)
        # What this file is (its fingerprint, size and mtime): newsbag's index of the folder, so a
        # rerun and `status` stat the page instead of parsing it (freshness.current_source_pages).
        index = {"fingerprint": page["fingerprint"], "identity": _identity(path)} if page.get("fingerprint") else {}
        self.report.record(page_id, {
            "status": status, "seconds": round(seconds, 4), "regions": len(regions), "device": self.made["device"],
            **({"reason": reason} if reason else {}), **({"warnings": warnings} if warnings else {}), **index},
            status)
        if self.shared is not None:
            self.shared.release(page_id)
        emit("done", page_id=page_id, status=status, seconds=round(seconds, 4), regions=len(regions),
             **({"reason": reason} if reason else {}))

    def finish_failed(self, page: dict, exc: Exception, seconds: float) -> None:
        page_id = page["page_id"]
        error = error_line(exc)
        log(f"page {page_id} ({page['path']}): {self.where}: {error}")
        log(traceback.format_exc())
        atomic_write_json(self.failed_dir / f"{page_id}.json", {
            "page_id": page_id, "path": page["path"], "error": error,
            "error_class": type(exc).__name__, "at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        })
        self.report.record(page_id, {"status": "failed", "error": error, "seconds": round(seconds, 4),
                                     **({"device": self.made["device"]} if self.made else {})}, "failed")
        emit("done", page_id=page_id, status="failed", seconds=round(seconds, 4), error=error)

    def run_one(self, page: dict) -> None:
        stored = None if self.shared is None else self.shared.get(page)
        if self.detector is None and stored is None:
            self.load()  # between pages: a load that hangs or crashes is not this page's fault
        emit("start", page_id=page["page_id"])
        t_page = time.perf_counter()
        try:
            raw = (self.detector.detect(page["image_path"], page) if self.shared is None
                   else self.from_shared_pass(page, stored))
            self.finish_ok(page, raw, time.perf_counter() - t_page)
        except RunDirFull:
            raise
        except Exception as exc:  # the page boundary: record and go on
            self.finish_failed(page, exc, time.perf_counter() - t_page)
            if context_lost(exc):
                raise ContextLost(f"page {page['page_id']}: {error_line(exc)}") from exc

    def run_batch(self, batch: list[dict]) -> None:
        """One detect_batch call; if it raises, retry its unfinished pages one by one so only bad pages fail."""
        emit("batch", page_ids=[page["page_id"] for page in batch])
        t_batch = t_page = time.perf_counter()
        finished = 0
        try:
            results = self.detector.detect_batch([(page["image_path"], page) for page in batch])
            streamed = not isinstance(results, (list, tuple))
            if not streamed and len(results) != len(batch):
                raise RuntimeError(f"detect_batch returned {len(results)} results for {len(batch)} pages")
            results = iter(results)
            for page in batch:
                raw = next(results, None)
                if raw is None:
                    raise RuntimeError(f"detect_batch returned {finished} results for {len(batch)} pages")
                now = time.perf_counter()
                seconds = now - t_page if streamed else (now - t_batch) / len(batch)
                t_page = now
                finished += 1
                try:
                    self.finish_ok(page, raw, seconds)
                except RunDirFull:
                    raise
                except Exception as exc:
                    self.finish_failed(page, exc, seconds)
        except RunDirFull:
            raise
        except Exception as exc:
            if context_lost(exc):  # which page caused it is unknown: the orchestrator isolates them
                raise ContextLost(f"a batch of {len(batch) - finished}: {error_line(exc)}") from exc
            log(f"{self.where}: batch of {len(batch)} failed ({error_line(exc)}); retrying its pages one by one")
            for page in batch[finished:]:
                self.run_one(page)

    def run(self, unit: WorkUnit) -> None:
        if unit.batch:
            self.run_batch(list(unit.pages))
        else:
            self.run_one(unit.pages[0])

    def close(self) -> None:
        close = getattr(self.detector, "close", None)
        if close is not None:
            close()


def _split_done(pages: list[dict], out_dir: Path, force: bool) -> tuple[list[dict], dict]:
    """(the pages to do, the records of those already done), each done page announced: the
    skip check is made before any compute (the report on disk may say more of them)."""
    todo, skipped = [], {}
    for page in pages:
        if not force and is_valid_output(out_dir / f"{page['page_id']}.json", page["page_id"], page.get("fingerprint")):
            emit("done", page_id=page["page_id"], status="skipped", seconds=0.0)
            skipped[page["page_id"]] = {"status": "ok", "seconds": None}
        else:
            todo.append(page)
    return todo, skipped


def run_job(job: dict, detector_cls, on_flush=None) -> int:
    """Run every page of `job` through `detector_cls`; returns the runner exit code.

    Args:
        job: the job spec the orchestrator wrote (out_dir, pages, params, device, ...).
        detector_cls: the family's detector class (see the module docstring).
        on_flush: ``on_flush(job, report)`` each time the report is written (MinerU mirrors
            it into run_meta.json); never called when setup is refused.
    """
    die_with_parent()  # before the model loads: a load can take minutes
    out_dir, pages = Path(job["out_dir"]), job["pages"]
    todo, skipped = _split_done(pages, out_dir, bool(job.get("force")))
    report = _Report(job, out_dir / job.get("report_name", "run_report.json"), skipped, len(pages) - len(todo),
                     on_flush)
    if not todo:
        report.data.update(state="finished", finished=time.strftime("%Y-%m-%dT%H:%M:%S%z"))
        report.write()
        emit("end", ok=0, empty=0, failed=0, skipped=len(pages))
        return 0
    loop = _PageLoop(job, detector_cls, report, todo)
    batch_size = batch_size_of(job, detector_cls, loop.shared)
    report.data["batch_size"] = batch_size or 1
    if loop.shared is None:
        try:
            loop.load()
        except SetupRefused as exc:
            return exc.code
    report.start_flushing()
    completed = False
    full = lost = refused = None
    try:
        for unit in work_units(todo, set(job.get("isolate") or ()), batch_size):
            loop.run(unit)
        completed = True
    except RunDirFull as exc:
        full = exc
    except ContextLost as exc:
        lost = exc
    except SetupRefused as exc:  # the model of a variant reading shared passes, loaded late
        refused = exc
    finally:
        try:  # a runner that could not start on its first page leaves no report
            report.end(completed, write=refused is None or bool(report.mine))
        except RunDirFull:
            if full is None:
                raise
        loop.close()
    code = exit_code(None if refused is None else refused.code, full is not None, lost is not None,
                     report.counts["failed"])
    if full is not None:
        log(f"{loop.where}: {full}")
        emit("fatal", error_class="RunDirError", error=str(full))
    elif lost is not None:
        log(f"{loop.where}: the CUDA context of this runner is lost ({lost}); exiting {EXIT_CONTEXT_LOST} "
            "so that a fresh runner does the pages left")
    elif refused is None:
        data = report.data
        for flag in data["flags"]:
            log(f"{loop.where}: FLAGGED: {flag}")
        emit("end", ok=report.counts["ok"], empty=report.counts["empty"], failed=report.counts["failed"],
             skipped=report.counts["skipped"], peak_rss_mb=data["peak_rss_mb"],
             mean_page_seconds=data["mean_page_seconds"], empty_share=data["empty_share"], flags=data["flags"])
    return code


def main(detector_cls, on_flush=None) -> None:
    parser = argparse.ArgumentParser(description=f"newsbag runner ({Path(sys.argv[0]).stem})")
    parser.add_argument("--job", required=True, help="job spec JSON written by the orchestrator")
    args = parser.parse_args()
    with open(args.job, encoding="utf-8") as fh:
        job = json.load(fh)
    try:
        code = run_job(job, detector_cls, on_flush)
    except RunDirFull as exc:  # a write outside the page loop (report of an all-skipped job)
        log(str(exc))
        emit("fatal", error_class="RunDirError", error=str(exc))
        code = EXIT_RUN_DIR
    sys.exit(code)
