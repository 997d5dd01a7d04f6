"""Find page images, give them stable ids, normalise odd formats, and keep the manifest."""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
from dataclasses import asdict, dataclass
from io import BytesIO
from pathlib import Path
from typing import Iterable

import numpy as np
from PIL import Image, UnidentifiedImageError

from . import rundir
from .errors import InputError
from .io import atomic_write_bytes, atomic_write_text

__all__ = [
    "IMAGE_SUFFIXES",
    "PageRecord",
    "Rejected",
    "page_id_for",
    "discover_images",
    "read_manifest_list",
    "inspect_page",
    "list_inputs",
    "build_pages",
    "read_pages",
    "write_pages",
    "select_shard",
]

log = logging.getLogger(__name__)
Image.MAX_IMAGE_PIXELS = None  # broadsheet scans exceed Pillow's bomb guard

IMAGE_SUFFIXES = frozenset({".png", ".jpg", ".jpeg", ".tif", ".tiff", ".bmp", ".webp"})
# Formats and modes every model library reads as they are; anything else gets an 8-bit copy.
_PASS_FORMATS = frozenset({"PNG", "JPEG", "TIFF"})
_PASS_MODES = frozenset({"L", "RGB"})
MANIFEST = Path("manifests") / "pages.jsonl"
REJECTED = Path("manifests") / "rejected.jsonl"
CACHE = Path("cache") / "images"


@dataclass(frozen=True)
class PageRecord:
    page_id: str
    path: str          # the original image, relative to the run dir (moves with the run)
    image_path: str    # absolute path runners read: the original or an 8-bit cached copy
    width: int
    height: int
    sha256: str
    note: str = ""     # e.g. "multi-page TIFF (3 frames): first page used"
    identity: list | None = None  # [size, mtime_ns] of the original when sha256 was taken


@dataclass(frozen=True)
class Rejected:
    path: str
    error: str


def page_id_for(path: Path, root: Path) -> str:
    """Id of the page at `path` under the input root `root` the user named.

    Invariants: unique (two files never share an id: the hash covers the whole relative
    path with its extension, so ``issue1/p1.png`` and ``issue2/p1.png`` differ, as do
    ``p1.png`` and ``p1.tif``), predictable (readable folders + stem, then the hash), and
    stable (the same path relative to the named root gives the same id on any machine, in
    any rerun, whatever other roots the same call names). Symlinks are not resolved for
    naming: a link is named by where it is, not where it points. A file outside the root
    (a manifest entry elsewhere) is named by its file stem plus the hash of its path, so
    no id carries parts of an absolute path.
    """
    rel = Path(os.path.relpath(os.path.abspath(path), os.path.abspath(root))).as_posix()
    stem = rel.rsplit(".", 1)[0] if "." in Path(rel).name else rel
    if rel.startswith("../"):
        stem = Path(stem).name
    readable = re.sub(r"[^A-Za-z0-9_.-]+", "_", stem.replace("/", "__")).strip("._") or "page"
    digest = hashlib.sha1(rel.encode("utf-8")).hexdigest()[:8]
    return f"{readable[-80:]}-{digest}"


def discover_images(root: Path, recursive: bool) -> list[Path]:
    root = Path(root)
    if not root.is_dir():
        raise InputError(f"input dir {root} does not exist or is not a directory")
    pattern = root.rglob("*") if recursive else root.glob("*")
    return sorted(p for p in pattern if p.is_file() and p.suffix.lower() in IMAGE_SUFFIXES and not p.name.startswith("."))


def read_manifest_list(path: Path) -> list[Path]:
    """Image paths from a list file: one per line, `#` comments, relative to the file."""
    try:
        lines = Path(path).read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise InputError(f"cannot read manifest {path}: {exc.strerror or exc}") from None
    base = Path(path).resolve().parent
    out = []
    for line in lines:
        line = line.split("#", 1)[0].strip()
        if line:
            p = Path(line).expanduser()
            out.append(p if p.is_absolute() else base / p)
    return out


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _to_8bit(im: Image.Image) -> Image.Image:
    """8-bit L or RGB rendering of any Pillow mode (16-bit scaled, CMYK/P/1/LA converted)."""
    if im.mode in ("I;16", "I;16B", "I;16L", "I;16N", "I"):
        arr = np.asarray(im, dtype=np.int64)
        top = 65535 if arr.max(initial=0) > 255 else 255
        return Image.fromarray(np.clip(arr * 255 // top, 0, 255).astype(np.uint8), "L")
    if im.mode == "F":
        arr = np.asarray(im, dtype=np.float64)
        lo, hi = float(arr.min(initial=0)), float(arr.max(initial=1))
        return Image.fromarray(((arr - lo) * 255 / max(hi - lo, 1e-9)).astype(np.uint8), "L")
    if im.mode in ("1", "L", "LA"):
        return im.convert("L")
    return im.convert("RGB")


def _read_16bit_rgb_tiff(path: Path) -> Image.Image:
    """16-bit colour TIFF, which Pillow cannot decode: read with tifffile, keep the top 8 bits."""
    try:
        import tifffile
    except ImportError as exc:
        raise InputError(f"{path}: 16-bit colour TIFF needs tifffile (pip install tifffile)") from exc
    arr = tifffile.imread(path, key=0)
    if arr.ndim == 3 and arr.shape[0] in (3, 4) and arr.shape[-1] not in (3, 4):
        arr = np.moveaxis(arr, 0, -1)
    arr = (arr[..., :3].astype(np.uint32) * 255 // 65535).astype(np.uint8) if arr.dtype == np.uint16 else arr[..., :3].astype(np.uint8)
    return Image.fromarray(arr, "RGB")


def inspect_page(path: Path, root: Path, run_dir: Path) -> PageRecord:
    """Record one page; odd formats get an 8-bit PNG copy under RUN/cache/images.

    Raises:
        InputError: the file is missing, empty, not an image or truncated (message names it).
    """
    page_id = page_id_for(path, root)
    path = Path(os.path.abspath(path))  # not resolved: the manifest keeps a symlink's own path
    identity = rundir.file_identity(path)
    note = ""
    try:
        with Image.open(path) as im:
            fmt, mode = im.format, im.mode
            frames = getattr(im, "n_frames", 1)
            width, height = im.size
            passthrough = fmt in _PASS_FORMATS and mode in _PASS_MODES and frames == 1
            if frames > 1:
                note = f"multi-page {fmt} ({frames} frames): first page used"
            if not passthrough:
                im.seek(0)
                im.load()
                page = _to_8bit(im)
            else:
                im.load()  # catches truncated files now, not in every runner later
    except FileNotFoundError:
        raise InputError(f"{path}: file not found") from None
    except UnidentifiedImageError:
        if path.suffix.lower() in (".tif", ".tiff"):
            page = _read_16bit_rgb_tiff(path)
            width, height, passthrough, fmt, mode = page.width, page.height, False, "TIFF", "RGB;16"
        else:
            raise InputError(f"{path}: not a readable image (unknown format or corrupt header)") from None
    except (OSError, SyntaxError, ValueError) as exc:
        raise InputError(f"{path}: cannot decode image: {str(exc).splitlines()[0]}") from None
    if width < 1 or height < 1:
        raise InputError(f"{path}: image has no pixels ({width}x{height})")
    image_path = str(path)
    if not passthrough:
        cached = (Path(run_dir) / CACHE / f"{page_id}.png").resolve()
        buf = BytesIO()
        page.save(buf, format="PNG")
        atomic_write_bytes(cached, buf.getvalue())
        image_path = str(cached)
        note = "; ".join(filter(None, [note, f"{fmt} {mode} converted to 8-bit {page.mode}"]))
    return PageRecord(
        page_id=page_id, path=os.path.relpath(path, os.path.abspath(run_dir)), image_path=image_path,
        width=int(width), height=int(height), sha256=_sha256(path), note=note, identity=identity,
    )


def read_pages(run_dir: Path) -> list[PageRecord]:
    path = Path(run_dir) / MANIFEST
    if not path.exists():
        return []
    out = []
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if line.strip():
            try:
                out.append(PageRecord(**json.loads(line)))
            except (ValueError, TypeError) as exc:
                raise InputError(f"{path}:{n}: bad manifest line: {exc}") from None
    return out


def write_pages(run_dir: Path, pages: Iterable[PageRecord]) -> None:
    atomic_write_text(Path(run_dir) / MANIFEST, "".join(json.dumps(asdict(p), ensure_ascii=False) + "\n" for p in pages))


def list_inputs(
    input_dirs: list[Path], manifest: Path | None, recursive: bool, max_pages: int | None
) -> list[tuple[Path, Path]]:
    """(image path, id root) of every input, in a stable order, without opening any file."""
    candidates: list[tuple[Path, Path]] = []
    if manifest is not None:
        root = Path(manifest).resolve().parent
        candidates += [(p, root) for p in read_manifest_list(manifest)]
    for root in (Path(os.path.abspath(d)) for d in input_dirs):
        candidates += [(p, root) for p in discover_images(root, recursive)]
    candidates = candidates[:max_pages] if max_pages is not None else candidates
    _refuse_collisions(candidates)
    return candidates


def _refuse_collisions(candidates: list[tuple[Path, Path]], known: dict | None = None) -> None:
    """Two different files that would get one page id (same path under two named roots).

    Raises:
        InputError: naming both files and the fix, before anything is written.
    """
    seen: dict[str, str] = dict(known or {})
    for path, root in candidates:
        page_id, where = page_id_for(path, root), os.path.realpath(path)
        other = seen.setdefault(page_id, where)
        if other != where:
            raise InputError(
                f"{where} and {other} both get page id {page_id} (the same path under two input roots); "
                f"name their common parent with --recursive, or use separate run dirs")


def build_pages(
    run_dir: Path,
    input_dirs: list[Path],
    manifest: Path | None,
    recursive: bool,
    max_pages: int | None,
) -> tuple[list[PageRecord], list[Rejected]]:
    """Pages of this invocation, merged into RUN/manifests/pages.jsonl.

    Known pages (same id and file size/mtime unchanged) are not re-hashed, so a rerun on a
    large collection starts at once. Unreadable files are returned as `Rejected` and
    recorded in manifests/rejected.jsonl; the rest go on.
    """
    candidates = list_inputs(input_dirs, manifest, recursive, max_pages)
    known = {p.page_id: p for p in read_pages(run_dir)}
    _refuse_collisions(candidates, {k: os.path.realpath(Path(run_dir) / p.path) for k, p in known.items()})
    pages: list[PageRecord] = []
    rejected: list[Rejected] = []
    seen: set[str] = set()
    for path, root in candidates:
        page_id = page_id_for(path, root)
        if page_id in seen:
            continue
        seen.add(page_id)
        old = known.get(page_id)
        if old is not None and Path(old.image_path).exists() and _unchanged(run_dir, old, path):
            pages.append(old)
            continue
        try:
            record = inspect_page(path, root, run_dir)
        except InputError as exc:
            log.error("skipping input: %s", exc)
            rejected.append(Rejected(str(path), str(exc)))
            continue
        if record.note:
            log.warning("page %s (%s): %s", record.page_id, record.path, record.note)
        pages.append(record)
    # Read the manifest again under the lock: another job may have added pages while this
    # one inspected its images, and a merge from the first read would drop them.
    with rundir.manifest_lock(run_dir):
        merged = {p.page_id: p for p in read_pages(run_dir)}
        merged.update({p.page_id: p for p in pages})
        write_pages(run_dir, merged.values())
    if rejected:
        atomic_write_text(Path(run_dir) / REJECTED, "".join(json.dumps(asdict(r)) + "\n" for r in rejected))
    return pages, rejected


def _unchanged(run_dir: Path, record: PageRecord, path: Path) -> bool:
    original = (Path(run_dir) / record.path).resolve()
    if original != Path(path).resolve():
        return False
    if record.identity is not None and record.identity != rundir.file_identity(original):
        return False  # the image changed in place: hash it again, so its outputs become stale
    cached = Path(record.image_path)
    return cached == original or cached.stat().st_mtime >= original.stat().st_mtime


def select_shard(pages: list, shard: tuple[int, int] | None) -> list:
    """Pages of shard K of N: every N-th manifest line starting at K (balanced, stable)."""
    if shard is None:
        return pages
    k, n = shard
    return pages[k::n]
