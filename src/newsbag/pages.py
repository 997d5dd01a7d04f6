"""Find page images, give them stable ids, normalise odd formats, and keep the manifest."""

from __future__ import annotations

import difflib
import errno
import hashlib
import importlib.util
import json
import logging
import os
import re
import stat
import threading
import time
import unicodedata
from contextlib import contextmanager
from dataclasses import asdict, dataclass, replace
from functools import partial
from io import BytesIO
from itertools import islice
from pathlib import Path
from typing import Callable, Iterable

import numpy as np
from PIL import Image, UnidentifiedImageError

from . import freshness, locks, rundir
from .config import anchor_path
from .errors import InputError, first_line
from .io import atomic_write_bytes, atomic_write_text, dumps_strict, hash_file, jsonl_lines

__all__ = [
    "IMAGE_SUFFIXES",
    "DEFAULT_MAX_MEGAPIXELS",
    "InputLimits",
    "PageRecord",
    "Rejected",
    "open_accepted_image",
    "read_rejected",
    "scan_changes",
    "page_id_for",
    "discover_images",
    "read_manifest_list",
    "inspect_page",
    "list_inputs",
    "build_pages",
    "refresh_pages",
    "read_pages",
    "write_pages",
    "select_shard",
    "select_ids",
    "planned_ids",
    "manifest_pages",
]

log = logging.getLogger(__name__)

IMAGE_SUFFIXES = frozenset({".png", ".jpg", ".jpeg", ".tif", ".tiff", ".bmp", ".webp",
                            ".jp2", ".j2k", ".jpx", ".gif", ".pbm", ".pgm", ".ppm", ".pnm"})
# Page-like formats newsbag cannot read: named as rejected (anything else that is not an image,
# such as ALTO .xml or checksum files beside the scans, is only counted in the log).
UNSUPPORTED_SUFFIXES = frozenset({".pdf", ".djvu", ".djv", ".heic", ".heif", ".avif", ".jxl", ".svg",
                                  ".eps", ".ps", ".psd", ".dng", ".cr2", ".nef", ".raw"})
# A 600 dpi scan of a full broadsheet (about 24 x 30 in with margins) is ~260 MP; 400 MP leaves room
# for larger sheets and 800 dpi tabloids while refusing a decompression bomb before it costs
# 1.2 GB of RGB in every process that reads it (README, "Inputs").
DEFAULT_MAX_MEGAPIXELS = 400.0
# Real scans hold at most ~50 pixels per file byte (a bilevel G4 TIFF of an NZZ page: 47; PNG 1-bit:
# 32; JPEG/deflate grey: 5-6). 1000 is 20x that; only blank pages and bombs get there. Checked only
# above 16 MP, where decoding starts to cost (a 16 MP RGB page is 48 MB).
MAX_PIXELS_PER_BYTE = 1000.0
_RATIO_FLOOR_PIXELS = 16_000_000
_COMMENT = re.compile(r"(?:^|\s)#.*")  # a list file's comment (`read_manifest_list`)
_BAND_ROWS = 256  # rows scaled at once by _scaled_8bit: ~30 MB of int64 on a 600 dpi broadsheet
# EXIF/TIFF Orientation -> the transpose that shows the page as a viewer does (Pillow's exif_transpose).
_ORIENT = {2: Image.Transpose.FLIP_LEFT_RIGHT, 3: Image.Transpose.ROTATE_180, 4: Image.Transpose.FLIP_TOP_BOTTOM,
           5: Image.Transpose.TRANSPOSE, 6: Image.Transpose.ROTATE_270, 7: Image.Transpose.TRANSVERSE,
           8: Image.Transpose.ROTATE_90}
_GUARD_LOCK = threading.RLock()
# Formats and modes every model library reads as they are; anything else gets an 8-bit copy.
_PASS_FORMATS = frozenset({"PNG", "JPEG", "TIFF"})
_PASS_MODES = frozenset({"L", "RGB"})
MANIFEST = rundir.MANIFEST
CACHE = Path("cache") / "images"
# A new page up to this size is read once: hashed, and decoded from the same bytes. A larger one
# (an uncompressed TIFF at the 400 MP limit is 1.2 GB) is decoded from the file and hashed by a
# second, streaming read, so its bytes are never held whole beside its pixels.
READ_ONCE_MAX_BYTES = 64 << 20
# The revision of the rules that pass a page as it is or make its 8-bit copy (formats, scaling,
# colour, orientation): bump it whenever one changes. A manifest page an older revision judged (or
# none recorded: an older newsbag, taken as revision 0) is judged again: a copy is made again, a
# page passed as it is has its header read (`_still_passes`); its outputs are redone only if what
# the runners read changed (`PageRecord.image_sha256`). 1: 12-bit data in 16-bit samples scaled by 4095;
# 2: unsigned 32-bit TIFFs read as unsigned; 3: 16-bit colour PNGs decoded at 16 bits; 4: 16-bit
# binary PPMs read at 16 bits, and deep WhiteIsZero TIFFs no longer copied as their negative.
CONVERSION_REVISION = 4
# Inspected pages go into the manifest every this many pages or seconds, whichever comes first,
# so a call killed mid-inspection (a job's time limit, a preemption) keeps them: 100k scans on
# a network file system take hours to hash and decode. Each checkpoint rewrites the manifest.
CHECKPOINT_PAGES = 1000
CHECKPOINT_S = 60.0


@dataclass(frozen=True)
class PageRecord:
    page_id: str
    path: str          # the original image, relative to the run dir (moves with the run)
    image_path: str    # absolute path runners read: the original or an 8-bit cached copy (stored run-relative)
    width: int
    height: int
    sha256: str
    note: str = ""     # e.g. "multi-page TIFF (3 frames): first page used"
    identity: list | None = None  # [size, mtime_ns] of the original when sha256 was taken
    orientation: int = 1  # the original's EXIF/TIFF Orientation; not 1: image_path is the upright copy boxes fit
    conversion: int | None = None  # the CONVERSION_REVISION that judged it: made its copy, or passed it as is
    copy_sha256: str | None = None  # sha256 of that copy's pixels (`_pixels_sha256`)

    @property
    def image_sha256(self) -> str:
        """The hash of what the runners read, which every output of the page is fingerprinted by:
        the copy's pixels when the page has one, else the file's content. A copy remade under a new
        rule with the same pixels leaves the outputs current; one with other pixels makes them stale."""
        return self.copy_sha256 or self.sha256

    @property
    def judged_by_older_rule(self) -> bool:
        """An older CONVERSION_REVISION (or an older newsbag, none) judged the page: the next call
        naming it judges it again (`_unchanged`), and only then is it known whether its outputs stay."""
        return self.conversion != CONVERSION_REVISION


@dataclass(frozen=True)
class Rejected:
    """A skipped input and why. Its text is UTF-8-safe, as every writer and stream needs: the
    bytes of a non-UTF-8 name are kept as ``\\xNN`` escapes (`_shown`)."""

    path: str
    error: str
    kind: str = "unreadable"  # broken_symlink | symlink_loop | unreadable | unsupported | not_an_image |
    #                           corrupt | too_large | absurd_size | empty | bad_name

    def __post_init__(self) -> None:
        object.__setattr__(self, "path", _shown(self.path))
        object.__setattr__(self, "error", _shown(self.error))


def _shown(text: str) -> str:
    """`text` (a path, or a message naming one) with the undecodable bytes of a name as ``\\xNN``."""
    return os.fsencode(text).decode("utf-8", "backslashreplace")


@dataclass(frozen=True)
class InputLimits:
    """What a page may declare in its header before anything is decoded.

    Args:
        max_pixels: width x height above this is refused (0: no limit).
        max_pixels_per_byte: declared pixels per byte of file above this is refused as a
            bomb or a blank page (checked above 16 MP only; 0: never).
    """

    max_pixels: int = int(DEFAULT_MAX_MEGAPIXELS * 1e6)
    max_pixels_per_byte: float = MAX_PIXELS_PER_BYTE

    @classmethod
    def from_megapixels(cls, megapixels: float | None) -> InputLimits:
        if megapixels is None:
            return cls()
        if megapixels < 0:
            raise InputError(f"max megapixels must be >= 0 (0 = no limit), got {megapixels:g}")
        return cls(max_pixels=int(megapixels * 1e6))


class _Reject(InputError):
    """An input that is not a page, with the kind of reason (for rejected.jsonl and status)."""

    def __init__(self, message: str, kind: str):
        super().__init__(message)
        self.kind = kind


@contextmanager
def _pillow_guard_lifted():
    """Pillow's decompression-bomb guard off for one open/decode, then restored.

    newsbag applies its own limit (`InputLimits`) from the header before any decode, and reads
    only pages it accepted; Pillow's fixed 179 MP refusal would reject real broadsheets. The
    global is changed only inside this block (under a lock), never at import.
    """
    with _GUARD_LOCK:
        saved = Image.MAX_IMAGE_PIXELS
        Image.MAX_IMAGE_PIXELS = None
        try:
            yield
        finally:
            Image.MAX_IMAGE_PIXELS = saved


@contextmanager
def open_accepted_image(path: str | os.PathLike):
    """`Image.open` of a page the manifest already accepted (its size was checked there);
    Pillow's guard stays lifted for the block, since decoding a TIFF checks it again."""
    with _pillow_guard_lifted(), Image.open(path) as im:
        yield im


def page_id_for(path: Path, root: Path) -> str:
    """Id of the page at `path` under the input root `root` the user named.

    Invariants: unique (two files never share an id: the hash covers the whole relative
    path with its extension, so ``issue1/p1.png`` and ``issue2/p1.png`` differ, as do
    ``p1.png`` and ``p1.tif``), predictable (readable folders + stem, then the hash), and
    stable (the same path relative to the named root gives the same id on any machine, in
    any rerun, whatever other roots the same call names, spelt in Unicode NFC or NFD). Symlinks
    are not resolved for naming: a link is named by where it is, not where it points. A file
    outside the root (a manifest entry elsewhere) is named by its file stem plus the hash of its
    path, so no id carries parts of an absolute path.
    """
    rel = _nfc(Path(os.path.relpath(os.path.abspath(path), os.path.abspath(root))).as_posix())
    stem = rel.rsplit(".", 1)[0] if "." in Path(rel).name else rel
    if rel.startswith("../"):
        stem = Path(stem).name
    readable = re.sub(r"[^A-Za-z0-9_.-]+", "_", stem.replace("/", "__")).strip("._") or "page"
    digest = hashlib.sha1(rel.encode("utf-8", "surrogateescape")).hexdigest()[:8]  # a non-UTF-8 name is refused later
    return f"{readable[-80:]}-{digest}"


def _entry_problem(path: Path) -> tuple[str, str] | None:
    """(kind, reason) when `path` cannot be a page whatever its content, else None."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        if os.path.islink(path):
            return "broken_symlink", f"broken symlink (points to {os.readlink(path)}, which does not exist)"
        return "unreadable", "file not found"
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            return "symlink_loop", "symlink loop (the link resolves to itself)"
        return "unreadable", f"cannot stat: {exc.strerror or exc}"
    if stat.S_ISDIR(st.st_mode):
        return None
    if not stat.S_ISREG(st.st_mode):
        return "unreadable", "not a regular file (fifo, socket or device)"
    if not os.access(path, os.R_OK):
        return "unreadable", "permission denied"
    return None


def _walk(root: Path, recursive: bool, rejected: list[Rejected], ignored: dict[str, int]) -> list[Path]:
    """Image files under `root`; every entry that is skipped for a reason goes to `rejected`.

    Symlinked folders are followed (under --recursive) unless they lead back to a folder
    already walked, which is named as a symlink loop instead of being walked forever. A run
    directory in the tree (this run's or another's) is not walked: its boards, gallery scans
    and cache copies are outputs, and would come back as new pages on every rerun.
    """
    images: list[Path] = []
    visited = {os.path.realpath(root)}
    stack = [root]
    while stack:
        folder = stack.pop()
        try:
            entries = sorted(os.scandir(folder), key=lambda e: e.name)
        except OSError as exc:
            rejected.append(Rejected(str(folder), f"{folder}: cannot list folder: {exc.strerror or exc}", "unreadable"))
            continue
        for entry in entries:
            if entry.name.startswith("."):
                continue
            path = Path(entry.path)
            problem = _entry_problem(path)
            if problem is not None:
                kind, reason = problem
                rejected.append(Rejected(str(path), f"{path}: {reason}", kind))
                continue
            if path.is_dir():
                if not recursive:
                    continue
                if rundir.is_run_dir(path):
                    log.info("%s: not walked: a newsbag run directory (its images are outputs, not pages)", path)
                    continue
                real = os.path.realpath(path)
                if real in visited:
                    if entry.is_symlink():
                        rejected.append(Rejected(str(path), f"{path}: symlink loop (leads back to {real}, "
                                                 "already walked)", "symlink_loop"))
                    continue
                visited.add(real)
                stack.append(path)
                continue
            suffix = path.suffix.lower()
            if suffix in IMAGE_SUFFIXES:
                images.append(path)
            elif suffix in UNSUPPORTED_SUFFIXES:
                rejected.append(Rejected(str(path), f"{path}: unsupported format {suffix} (newsbag reads "
                                         f"{', '.join(sorted(IMAGE_SUFFIXES))}); convert it", "unsupported"))
            else:
                ignored[suffix or "(no suffix)"] = ignored.get(suffix or "(no suffix)", 0) + 1
    return sorted(images)


def discover_images(root: Path, recursive: bool, rejected: list[Rejected] | None = None) -> list[Path]:
    """Page images under `root` (sorted); skipped entries are appended to `rejected` when given.

    Hidden files are skipped silently; files that are not page images (e.g. ALTO .xml) are
    counted in one log line.
    """
    root = Path(root)
    if not root.is_dir():
        raise InputError(f"input dir {root} does not exist or is not a directory")
    ignored: dict[str, int] = {}
    images = _walk(root, recursive, rejected if rejected is not None else [], ignored)
    if ignored:
        log.info("%s: ignored %d file(s) that are not page images (%s)", root, sum(ignored.values()),
                 ", ".join(f"{k} {v}" for k, v in sorted(ignored.items())))
    return images


def read_manifest_list(path: Path) -> list[Path]:
    """Image paths from a list file: one per line, relative to the file. A `#` starts a comment
    at the start of a line or after a space, as in a shell: inside a name (``Nr#12``) it is the name's.

    UTF-8 text, with or without a byte-order mark; lines end at ``\\n`` or ``\\r\\n``.

    Raises:
        InputError: the file cannot be read, is not UTF-8 text or holds a NUL byte (naming the line).
    """
    try:
        raw = Path(path).read_bytes()
        lines = raw.decode("utf-8-sig").split("\n")  # not splitlines: U+2028, U+0085 may be in a name
    except OSError as exc:
        raise InputError(f"cannot read manifest {path}: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        raise InputError(f"cannot read manifest {path}: line {line}: not UTF-8 text") from None
    base = Path(path).resolve().parent
    out = []
    for n, line in enumerate(lines, 1):
        if "\0" in line:
            raise InputError(f"cannot read manifest {path}: line {n}: a NUL byte (not a list of paths)")
        line = _COMMENT.sub("", line).strip()
        if line:
            out.append(Path(anchor_path(line, str(base))))
    return out


def _pixels_sha256(page: Image.Image) -> str:
    """sha256 of an 8-bit copy's mode, size and pixels, a band of rows at a time: the same for the
    same pixels whatever PNG encoder (Pillow, zlib version) wrote the copy."""
    h = hashlib.sha256(f"{page.mode} {page.width}x{page.height}".encode())
    for row in range(0, page.height, _BAND_ROWS):
        h.update(page.crop((0, row, page.width, min(row + _BAND_ROWS, page.height))).tobytes())
    return h.hexdigest()


def _to_8bit(im: Image.Image) -> tuple[Image.Image, str]:
    """8-bit L or RGB rendering of any Pillow mode (16/32-bit and float scaled by `_scaled_8bit`,
    CMYK/P/1/LA converted), and what the scaling did when the manifest should say so."""
    if im.mode in ("I;16", "I;16B", "I;16L", "I;16N", "I", "F"):
        tags = getattr(im, "tag_v2", {})
        arr = np.asarray(im)
        if arr.dtype == np.int32 and _tag_values(tags.get(258)) == [32] and _tag_values(tags.get(339, 1)) == [1]:
            arr = arr.view(np.uint32)  # Pillow holds an unsigned 32-bit TIFF's samples as int32: >= 2**31 negative
        arr, how = _shown_as_stored(*_scaled_8bit(arr, _declared_max(tags.get)), tags.get(262))
        return Image.fromarray(arr, "L"), how
    if im.mode in ("1", "L", "LA"):
        return im.convert("L"), ""
    return im.convert("RGB"), ""


def _shown_as_stored(grey: np.ndarray, how: str, photometric) -> tuple[np.ndarray, str]:
    """An 8-bit grey page (`_scaled_8bit`'s result) with black where its TIFF's PhotometricInterpretation
    (`photometric`, tag 262) puts it: WhiteIsZero (0) stores black as the largest value. Pillow inverts
    1- and 8-bit such pages on load but reads deeper ones as stored, as tifffile does: their copy was
    the page's negative, with nothing said."""
    if _tag_values(photometric) != [0]:
        return grey, how
    np.subtract(255, grey, out=grey)
    return grey, "; ".join(filter(None, [how, "WhiteIsZero: inverted"]))


def _declared_max(tag_value) -> int | None:
    """A TIFF's MaxSampleValue (281) or SMaxSampleValue (341), one value or one per sample, as one
    integer; None when absent or not a positive number. `tag_value` looks a tag's value up by its
    code (None when absent), from Pillow's or tifffile's tags."""
    value = tag_value(281)
    values = _tag_values(tag_value(341) if value is None else value)
    return max(values) if values and min(values) > 0 else None


def _tag_values(value) -> list[int] | None:
    """A TIFF tag's value, one integer or one per sample, as a list of integers; None when absent
    or not integers."""
    try:
        return [int(v) for v in (value if isinstance(value, (tuple, list)) else [value])]
    except (TypeError, ValueError, OverflowError):
        return None


def _white_point(peak: int, declared: int | None) -> tuple[int, str]:
    """The integer value that becomes 255 on a page whose largest value is `peak`, and why when it
    is not the full 16-bit range.

    Scanners write 12-bit data (0..4095, or 10/14-bit) into 16-bit samples; scaled by 65535 such a
    page came out nearly black. A TIFF that declares its maximum (`declared`) is scaled by the depth
    that maximum needs (4095 -> 12 bit; rounded up to 2^n-1, so a writer recording its content's
    maximum does not stretch the page); else values all <= 255 are 8-bit and <= 4095 12-bit. Any
    other page keeps the depth its type holds, so a genuinely dark 16-bit page stays dark.
    """
    if peak > 65535:
        return peak, ""
    bits = (declared or 0).bit_length()
    if declared is not None and declared >= peak and bits <= 16:
        top = (1 << bits) - 1
        return top, f"{bits}-bit values (0..{top}, its MaxSampleValue {declared}) scaled to 0..255" if bits < 16 else ""
    top = 255 if peak <= 255 else 4095 if peak <= 4095 else 65535
    return top, f"{top.bit_length()}-bit values (0..{top}) scaled to 0..255" if top < 65535 else ""


def _scaled_8bit(arr: np.ndarray, declared: int | None = None) -> tuple[np.ndarray, str]:
    """uint8 copy of a page array of any depth, and what the scaling did for the page's note:
    integers by the depth their values use (`_white_point`: 8, 12 or 16 bit, a TIFF's `declared`
    MaxSampleValue, else their maximum), floats over their finite range.

    It is scaled a band of rows at a time into the 8-bit result: with the decoded page and its
    array that is ~5 bytes per pixel of a 16-bit page (~2 GB at the 400 MP limit). int64 copies
    of the whole page took ~25, about 10 GB.
    """
    how = ""
    if arr.dtype.kind == "f":
        lo, hi = _finite_range(arr)

        def scale(band: np.ndarray) -> np.ndarray:
            scaled = (band.astype(np.float64) - lo) * 255 / max(hi - lo, 1e-9)
            return np.clip(np.nan_to_num(scaled, nan=0.0), 0, 255)  # NaN, -inf black; +inf white
    else:
        top, how = _white_point(int(arr.max(initial=0)), declared)
        how = how if arr.dtype.itemsize > 1 else ""  # an 8-bit page is at its own depth

        def scale(band: np.ndarray) -> np.ndarray:
            return np.clip(band.astype(np.float64 if top > 65535 else np.int64) * 255 // top, 0, 255)
    out = np.empty(arr.shape, np.uint8)
    for row in range(0, arr.shape[0], _BAND_ROWS):
        out[row:row + _BAND_ROWS] = scale(arr[row:row + _BAND_ROWS])
    return out, how


def _finite_range(arr: np.ndarray) -> tuple[float, float]:
    """(min, max) of the finite pixels of a float page, a band at a time: one NaN or inf pixel
    in the range made the whole 8-bit copy black.

    Raises:
        ValueError: no pixel is finite (the page has no content to show).
    """
    lo, hi = np.inf, -np.inf
    for row in range(0, arr.shape[0], _BAND_ROWS):
        band = arr[row:row + _BAND_ROWS]
        finite = band[np.isfinite(band)]
        if finite.size:
            lo, hi = min(lo, float(finite.min())), max(hi, float(finite.max()))
    if lo > hi:
        raise ValueError("no finite pixel value (every pixel is NaN or infinite)")
    return lo, hi


def _deep_colour_bits(im: Image.Image) -> int:
    """The bits a sample of a colour page with more than 8 holds, else 0: a 16-bit PNG (RGB, RGBA,
    or grey+alpha, which Pillow opens as RGBA), a binary 16-bit PPM, or a TIFF that tifffile can
    read. Pillow opens them as 8-bit RGB (each sample's top byte), which makes 12-bit data in
    16-bit samples nearly black; without tifffile (the `embedded` extra) a TIFF stays Pillow's."""
    if im.mode not in ("RGB", "RGBA"):
        return 0
    if im.format == "PPM":   # binary, 16-bit: Pillow's decoder scales by maxval 65535, its top byte
        return 16 if im.tile and im.tile[0].codec_name == "ppm" and im.tile[0].args == ("RGB", 65535) else 0
    if im.format == "PNG":
        return 16 if any(str(t.args).endswith(";16B") for t in im.tile) else 0
    if im.format != "TIFF":
        return 0
    bits = max(_tag_values(im.tag_v2.get(258, 8)) or [8])
    return bits if bits > 8 and importlib.util.find_spec("tifffile") is not None else 0


def _read_deep_png(path: Path, data: bytes | None) -> tuple[Image.Image, str]:
    """A 16-bit PNG with more than one sample a pixel at its full depth, scaled to 8 bits as
    `_to_8bit` scales Pillow's deep pages (with what the scaling did): RGB for colour, L for grey
    and alpha (the alpha dropped, as for an 8-bit one). Pillow has no such 16-bit mode, so its PNG
    decoder runs twice for colour: unpacking each sample's high byte (``RGB;16B``, its default),
    then its low byte (``RGB;16L`` takes the big-endian pair the other way round). Grey+alpha
    (``LA;16B``, which has no low-byte twin) is unpacked once as 8-bit RGBA: the same 4 bytes a
    pixel, so the same unfiltering, giving grey high, grey low, alpha high, alpha low. It decodes
    `data` when `inspect_page` read the file once, else the file."""
    def decoded(rawmode: Callable[[str], str]) -> tuple[str, np.ndarray]:
        """(the page's own raw mode, its pixels unpacked with ``rawmode(own)``)."""
        with _pillow_guard_lifted(), Image.open(path if data is None else BytesIO(data)) as im:
            own = im.tile[0].args
            im.tile = [t._replace(args=rawmode(own)) for t in im.tile]
            im.load()
            return own, np.asarray(im)

    own, first = decoded(lambda own: "RGBA" if own == "LA;16B" else own)
    grey = own == "LA;16B"
    if grey:
        high, low = first[..., 0], first[..., 1]
    else:
        high, low = first[..., :3], decoded(lambda own: own.replace(";16B", ";16L"))[1][..., :3]
    arr = high.astype(np.uint16)
    arr <<= 8
    arr |= low
    out, how = _scaled_8bit(arr)
    return Image.fromarray(out, "L" if grey else "RGB"), how


def _read_deep_ppm(path: Path, data: bytes | None) -> tuple[Image.Image, str]:
    """A binary 16-bit PPM (P6, maxval 65535) at its full depth, scaled to 8-bit RGB as `_to_8bit`
    scales Pillow's deep pages (with what the scaling did): its samples are big-endian after the
    header, read in place (`data`, the file's bytes when `inspect_page` read them once, else the file)."""
    with _pillow_guard_lifted(), Image.open(path if data is None else BytesIO(data)) as im:
        (width, height), offset = im.size, im.tile[0].offset
    count = width * height * 3
    if data is not None:
        arr = np.frombuffer(data, ">u2", count=min(count, max(len(data) - offset, 0) // 2), offset=offset)
    else:
        arr = np.fromfile(path, ">u2", count=count, offset=offset)
    if arr.size < count:
        raise OSError(f"image file is truncated ({arr.size} of {count} 16-bit samples)")
    out, how = _scaled_8bit(arr.reshape(height, width, 3))
    return Image.fromarray(out, "RGB"), how


def _read_tiff_with_tifffile(path: Path, data: bytes | None, limits: InputLimits) -> tuple[Image.Image, str]:
    """A TIFF Pillow cannot identify (float64, float colour) or reads at 8 bits (16-bit colour), read
    with tifffile and scaled to 8-bit L or RGB as `_to_8bit` scales Pillow's pages (with what the
    scaling did). It decodes `data`, the file's bytes when `inspect_page` read them once (and hashes
    them), else the file."""
    try:
        import tifffile
    except ImportError as exc:
        raise InputError(f"{path}: this TIFF (16-bit colour or float) needs tifffile (pip install tifffile)") from exc
    try:
        with tifffile.TiffFile(path if data is None else BytesIO(data)) as tif:
            shape = tif.pages[0].shape
            planar = len(shape) == 3 and shape[0] in (3, 4) and shape[-1] not in (3, 4)
            height, width = (shape[1], shape[2]) if planar else (shape[0], shape[1])
            _check_declared_size(path, int(width), int(height), limits)
            tags = tif.pages[0].tags

            def tag(code: int):
                return getattr(tags.get(code), "value", None)

            declared = _declared_max(tag)
            try:
                arr = tif.pages[0].asarray()
            except Exception as exc:  # noqa: BLE001 - its decoders raise anything on a cut file (zlib.error...)
                raise _Reject(f"{path}: cannot decode image: {first_line(exc)}", "corrupt") from None
        if planar:
            arr = np.moveaxis(arr, 0, -1)
        if arr.ndim == 3 and arr.shape[-1] < 3:
            arr = arr[..., 0]  # grey + alpha
        if arr.ndim not in (2, 3):
            raise ValueError(f"pixel array of shape {arr.shape}")
        if arr.ndim == 2:
            out, how = _shown_as_stored(*_scaled_8bit(arr, declared), tag(262))
            return Image.fromarray(out, "L"), how
        out, how = _scaled_8bit(arr[..., :3], declared)
        return Image.fromarray(out, "RGB"), how
    except (tifffile.TiffFileError, ValueError, TypeError, IndexError, OSError) as exc:
        raise _Reject(f"{path}: not a readable image ({first_line(exc)})", "not_an_image") from None


def _check_declared_size(path: Path, width: int, height: int, limits: InputLimits) -> None:
    """Refuse, from the header alone, a page too large to decode or absurd for its file size."""
    pixels = width * height
    if width < 1 or height < 1:
        raise _Reject(f"{path}: image has no pixels ({width}x{height})", "empty")
    if limits.max_pixels and pixels > limits.max_pixels:
        raise _Reject(
            f"{path}: declares {width}x{height} = {pixels / 1e6:.0f} MP, over the {limits.max_pixels / 1e6:g} MP "
            f"limit; if it is a real scan, rerun with --max-megapixels {pixels / 1e6 * 1.1:.0f}", "too_large")
    size = max(1, os.path.getsize(path))
    if limits.max_pixels_per_byte and pixels > _RATIO_FLOOR_PIXELS and pixels / size > limits.max_pixels_per_byte:
        raise _Reject(
            f"{path}: declares {width}x{height} = {pixels / 1e6:.0f} MP in {size / 1e3:.0f} KB ({pixels / size:.0f} "
            f"pixels per byte; real scans hold under ~50): a decompression bomb or a blank page", "absurd_size")


def _orientation(im: Image.Image) -> int:
    """EXIF / TIFF Orientation of an open image (1 = as stored), from the header only.

    Pillow 13 turns a TIFF upright itself on load (and then drops the tag), but sizes an
    uncompressed one upright before decoding and garbles quarter turns; giving the raw
    decoder the stored size makes its turn right. Other formats are turned by newsbag.
    """
    try:
        if im.format != "TIFF":
            value = im.getexif().get(0x0112, 1)
            return value if value in _ORIENT else 1
        value = im.tag_v2.get(0x0112, 1)
        if value in _ORIENT and not getattr(im, "use_load_libtiff", False) and hasattr(im, "_tile_size"):
            im._size = im._tile_size
        return value if value in _ORIENT else 1
    except Exception:  # noqa: BLE001 - a corrupt EXIF block must not cost the page
        return 1


def _judged(im: Image.Image) -> tuple[int, int, int, bool]:
    """(frames, deep colour bits, orientation, passed as it is) of an open page, from its header:
    every model library reads a page as it is when it has one frame, upright, in a format and mode
    they all read at 8 bits; any other gets an 8-bit copy."""
    frames = getattr(im, "n_frames", 1)
    deep_colour = _deep_colour_bits(im)  # before the EXIF look-up: on a PNG it decodes the page
    orientation = _orientation(im)
    passes = (im.format in _PASS_FORMATS and im.mode in _PASS_MODES and frames == 1 and orientation == 1
              and not deep_colour)
    return frames, deep_colour, orientation, passes


def _still_passes(path: Path, record: PageRecord) -> bool:
    """`record`, a page an older conversion revision passed to the runners as it is, would be passed
    as it is today: its header read again (`_judged`), with no hash and no decode but a PNG's EXIF
    look-up. False for a page with a copy (made again by `inspect_page`) or one that cannot be read."""
    if record.copy_sha256 is not None or record.image_path != os.path.abspath(path):
        return False
    try:
        with open_accepted_image(path) as im:
            return _judged(im)[3]
    except (OSError, SyntaxError, ValueError, UnidentifiedImageError, Image.DecompressionBombError):
        return False


def inspect_page(path: Path, root: Path | None, run_dir: Path, limits: InputLimits = InputLimits(),
                 page_id: str | None = None) -> PageRecord:
    """Record one page; odd formats and rotated pages get an 8-bit PNG copy under RUN/cache/images.

    Its id comes from its path under `root` (`page_id_for`), or is `page_id` when the page is
    already known (a manifest page whose image changed).

    The header is checked against `limits` before anything is decoded. A page with an EXIF
    or TIFF orientation is stored upright (as a viewer shows it): its recorded width and
    height, and so every box, are in that orientation. The copy keeps the file's dpi.

    Raises:
        InputError: the file is missing, empty, not an image, truncated, too large or absurd
            for its size (message names it; ``.kind`` says which, for rejected.jsonl).
    """
    page_id = page_id or page_id_for(path, root)
    path = Path(os.path.abspath(path))  # not resolved: the manifest keeps a symlink's own path
    if _shown(str(path)) != str(path):  # the manifest, the gallery and the exports hold paths as UTF-8 text
        raise _Reject(f"{path}: name is not UTF-8 text; rename it (e.g. convmv -f latin1 -t utf8)", "bad_name")
    problem = _entry_problem(path)
    if problem is not None:
        raise _Reject(f"{path}: {problem[1]}", problem[0])
    if path.is_dir():  # a folder named in a --manifest list (`_walk` opens the folders it finds)
        raise _Reject(f"{path}: a folder, not an image (list its images, or give it as --input-dir)", "unreadable")
    if os.path.getsize(path) == 0:
        raise _Reject(f"{path}: not a readable image (empty file)", "empty")
    identity = freshness.file_identity(path)
    note = ""
    orientation, upright_on_load = 1, False
    dpi = None
    depth = ""    # what scaling a deep page to 8 bits did (`_white_point`)
    data = None   # the file's bytes when read once (`READ_ONCE_MAX_BYTES`)
    try:
        if identity is not None and identity[0] <= READ_ONCE_MAX_BYTES:
            with open(path, "rb") as fh:
                data = fh.read(READ_ONCE_MAX_BYTES + 1)
            if len(data) > READ_ONCE_MAX_BYTES:   # grew since its stat (still being copied in)
                data = None
        with _pillow_guard_lifted(), Image.open(path if data is None else BytesIO(data)) as im:
            fmt, mode = im.format, im.mode
            # A PNG's samples by its raw mode, before `_judged` decodes it (Pillow calls grey+alpha RGBA).
            samples = str(im.tile[0].args).split(";")[0] if fmt == "PNG" and im.tile else mode
            _check_declared_size(path, im.width, im.height, limits)
            frames, deep_colour, orientation, passthrough = _judged(im)
            width, height = im.size
            dpi = im.info.get("dpi")
            if frames > 1:
                note = f"multi-page {fmt} ({frames} frames): first page used"
            if deep_colour:
                mode = f"{samples} {deep_colour}-bit"
                read = {"PNG": _read_deep_png, "PPM": _read_deep_ppm}.get(fmt) or partial(_read_tiff_with_tifffile,
                                                                                        limits=limits)
                page, depth = read(path, data)
            elif not passthrough:
                im.seek(0)
                im.load()
                # Pillow turned it (a TIFF) if the tag is gone after load: the size is now upright.
                upright_on_load = orientation != 1 and fmt == "TIFF" and 0x0112 not in im.tag_v2
                if upright_on_load:
                    width, height = im.size
                page, depth = _to_8bit(im)
            else:
                im.load()  # catches truncated files now, not in every runner later
    except InputError:
        raise
    except FileNotFoundError:
        raise _Reject(f"{path}: file not found", "unreadable") from None
    except PermissionError:
        raise _Reject(f"{path}: unreadable (permission denied)", "unreadable") from None
    except UnidentifiedImageError:
        if path.suffix.lower() in (".tif", ".tiff"):
            page, depth = _read_tiff_with_tifffile(path, data, limits)
            width, height, passthrough, fmt, mode = page.width, page.height, False, "TIFF", "(tifffile)"
        else:
            raise _Reject(f"{path}: not a readable image (unknown format or corrupt header)", "not_an_image") from None
    except (OSError, SyntaxError, ValueError, Image.DecompressionBombError) as exc:
        raise _Reject(f"{path}: cannot decode image: {first_line(exc)}", "corrupt") from None
    if orientation >= 5 and dpi:
        dpi = tuple(reversed(dpi))
    if orientation != 1:
        if not upright_on_load:
            page = page.transpose(_ORIENT[orientation])
            if orientation >= 5:
                width, height = height, width
        note = "; ".join(filter(None, [note, f"EXIF orientation {orientation}: stored upright as {width}x{height}"]))
    image_path, copy_sha256 = str(path), None
    if not passthrough:
        cached = (Path(run_dir) / CACHE / f"{page_id}.png").resolve()
        buf = BytesIO()
        save = {"dpi": tuple(float(v) for v in dpi)} if _valid_dpi(dpi) else {}
        page.save(buf, format="PNG", **save)
        atomic_write_bytes(cached, buf.getvalue(), keep_same=True)  # the same copy again: its board stays current
        image_path = str(cached)
        copy_sha256 = _pixels_sha256(page)
        if not (fmt in _PASS_FORMATS and mode in _PASS_MODES and orientation != 1):
            converted = f"{fmt} {mode} converted to 8-bit {page.mode}" + (f": {depth}" if depth else "")
            note = "; ".join(filter(None, [note, converted]))
    return PageRecord(
        page_id=page_id, path=os.path.relpath(path, os.path.abspath(run_dir)), image_path=image_path,
        width=int(width), height=int(height), note=note, identity=identity,
        sha256=hash_file(path, hashlib.sha256()) if data is None else hashlib.sha256(data).hexdigest(),
        orientation=orientation, conversion=CONVERSION_REVISION, copy_sha256=copy_sha256,
    )


def _valid_dpi(dpi) -> bool:
    try:
        return dpi is not None and len(dpi) == 2 and all(0 < float(v) < 1e5 for v in dpi)
    except (TypeError, ValueError):
        return False


def read_pages(run_dir: Path) -> list[PageRecord]:
    """Every page of RUN/manifests/pages.jsonl, in order ([] when there is none)."""
    path = Path(run_dir) / MANIFEST
    return _parse_lines(run_dir, jsonl_lines(path))


def _parse_lines(run_dir: Path, lines: Iterable[tuple[int, str]]) -> list[PageRecord]:
    """The records of manifest lines, a run-relative ``image_path`` (`write_pages`) made absolute
    from the run dir resolved, as `inspect_page` names a copy and `write_pages` recognises one."""
    root = Path(run_dir).resolve()
    out = []
    for n, line in lines:
        try:
            fields = json.loads(line)
            if isinstance(fields.get("image_path"), str) and not os.path.isabs(fields["image_path"]):
                fields["image_path"] = os.path.join(root, fields["image_path"])
            out.append(PageRecord(**fields))
        except (ValueError, TypeError, AttributeError) as exc:
            raise InputError(f"{Path(run_dir) / MANIFEST}:{n}: bad manifest line: {exc}") from None
    return out


def write_pages(run_dir: Path, pages: Iterable[PageRecord]) -> None:
    """Replace the manifest. An 8-bit copy in the run's own cache is named relative to the run
    dir, so a run moved or copied (the original purged) still reads it."""
    cache = os.path.join(Path(run_dir).resolve(), CACHE, "")

    def stored(p: PageRecord) -> dict:
        fields = asdict(p)
        if p.image_path.startswith(cache):
            fields["image_path"] = os.path.join(str(CACHE), p.image_path[len(cache):])
        return fields

    atomic_write_text(Path(run_dir) / MANIFEST, "".join(dumps_strict(stored(p)) + "\n" for p in pages))


def list_inputs(
    input_dirs: list[Path], manifest: Path | None, recursive: bool, max_pages: int | None,
    rejected: list[Rejected] | None = None,
) -> list[tuple[Path, Path]]:
    """(image path, id root) of every input, in a stable order, without opening any file
    (`_named` gives their ids).

    An input that is a file is one page whose id root is its folder: it gets the id naming
    that folder would give it, so a later call over the folder finds it done.
    Entries skipped while listing folders (broken symlinks, loops, unsupported formats...)
    are appended to `rejected` when given.
    """
    candidates: list[tuple[Path, Path]] = []
    if manifest is not None:
        root = Path(manifest).resolve().parent
        candidates += [(p, root) for p in read_manifest_list(manifest)]
    for root in (Path(os.path.abspath(d)) for d in input_dirs):
        candidates += ([(root, root.parent)] if root.is_file()
                       else [(p, root) for p in discover_images(root, recursive, rejected)])
    return candidates[:max_pages] if max_pages is not None else candidates


def _named(candidates: list[tuple[Path, Path]], known: dict[str, str] | None,
           rejected: list[Rejected]) -> tuple[list[tuple[Path, Path]], list[str]]:
    """The (image path, id root) pairs of `candidates` that get a page id, and their ids, each computed once.

    Ids come from names in Unicode NFC (`page_id_for`), so a folder that comes back from a Mac in
    NFD (or goes there) keeps its ids; a page of the run (`known`: page id -> absolute path)
    whose id an older newsbag made from an NFD spelling keeps that id. Two files whose names
    differ only in normalisation (Linux keeps both side by side) show as one name: they are not
    merged into one page, but both go to `rejected`, each naming the other.

    Two paths under one id are resolved to see whether they are one file; the same path again is
    one file without asking the file system (a realpath is a stat per path part, three per page
    on every rerun over 100k scans).

    Raises:
        InputError: two different files would get one page id (the same path under two named
            roots), naming both and the fix, before anything is written.
    """
    known = known or {}
    legacy = {name: page_id for page_id, where in known.items() if (name := _nfc(where)) != where}
    spelt: dict[str, str] = {}       # NFC name -> its first spelling listed
    twins: dict[str, set[str]] = {}  # NFC name -> its spellings, when they are different files
    named = []
    for path, _ in candidates:
        where = os.path.abspath(path)
        name = _nfc(where)
        first = spelt.setdefault(name, where)
        if first != where and not _same_file(first, where):
            twins.setdefault(name, {first}).add(where)
        named.append((where, name))
    seen: dict[str, str] = dict(known)
    kept, ids, refused = [], [], set()
    for (path, root), (where, name) in zip(candidates, named):
        twin = twins.get(name, set()) - {where}
        page_id = None if twin else legacy.get(name) or page_id_for(path, root)
        other = seen.setdefault(page_id, where) if page_id else where
        if other != where and _nfc(other) == name:   # the run's page, its name spelt otherwise
            if os.path.lexists(other) and not _same_file(other, where):
                twin = {other}
            else:   # renamed to this spelling (rsync from a Mac), or one file that answers to both
                seen[page_id] = where
        elif other != where and known.get(page_id) == other and not os.path.lexists(other):
            # The run's page, gone from where its manifest says: the run was moved or copied and its
            # relative path points elsewhere now. This input takes the id; `_reanchored` tells
            # whether it is the same file, else it is inspected as a changed page.
            seen[page_id] = where
        elif other != where and os.path.realpath(other) != os.path.realpath(where):
            raise InputError(
                f"{os.path.realpath(where)} and {os.path.realpath(other)} both get page id {page_id} (the same "
                f"path under two input roots); name their common parent with --recursive, or use separate run dirs")
        if twin:
            if where not in refused:
                refused.add(where)
                others = ", ".join(f"{t} ({_form(t, where)})" for t in sorted(twin))
                rejected.append(Rejected(where, f"{where}: this {_form(where, min(twin))} spelling and {others} are "
                                         "one name in two Unicode normalisations, two files that would be one page; "
                                         "rename or remove one of them", "bad_name"))
            continue
        kept.append((path, root))
        ids.append(page_id)
    return kept, ids


def _nfc(path: str) -> str:
    return unicodedata.normalize("NFC", path)


def _form(path: str, other: str) -> str:
    """The Unicode form (NFC, NFD or mixed-form) of the first part of `path` that `other` spells otherwise,
    for a message naming two paths that look alike."""
    part = next((a for a, b in zip(Path(path).parts, Path(other).parts) if a != b), path)
    return "NFC" if _nfc(part) == part else "NFD" if unicodedata.normalize("NFD", part) == part else "mixed-form"


def _same_file(a: str, b: str) -> bool:
    """`a` and `b` are one file (a file system that ignores normalisation, as macOS's, shows one
    file under both names)."""
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


def build_pages(
    run_dir: Path,
    input_dirs: list[Path],
    manifest: Path | None,
    recursive: bool,
    max_pages: int | None,
    limits: InputLimits = InputLimits(),
    page_ids: Iterable[str] = (),
) -> tuple[list[PageRecord], list[Rejected]]:
    """Pages of this invocation that `page_ids` (``--pages``) selects, all merged into
    RUN/manifests/pages.jsonl; `input_dirs` are folders or single page images (`list_inputs`).

    `page_ids` must all be ids of the inputs (`select_ids`), checked before anything is
    written (an id whose image then proves unreadable is a rejected input, not a typo); every
    input still goes into the manifest.

    Known pages (same id and file size/mtime unchanged) are not re-hashed, and the manifest is
    rewritten only when a page is new or changed, so a rerun on a large collection starts at
    once. Every input that is skipped (broken symlink, symlink loop, unreadable, unsupported,
    not an image, over `limits`) is returned as `Rejected`, logged as an error (stderr) and
    recorded in manifests/rejected.jsonl; the rest go on.
    """
    known = {p.page_id: p for p in read_pages(run_dir)}
    candidates, ids, rejected = _inputs(run_dir, input_dirs, manifest, recursive, max_pages,
                                        {k: os.path.abspath(Path(run_dir) / p.path) for k, p in known.items()})
    for r in rejected:
        log.error("skipping input: %s", r.error)
    selected = set(select_ids(ids, page_ids))
    todo: dict[str, tuple] = {}
    for (path, _), page_id in zip(candidates, ids):
        todo.setdefault(page_id, (path, known.get(page_id), page_id))
    pages = _records(run_dir, list(todo.values()), limits, rejected)
    _merge(run_dir, [p for p in pages if p is not known.get(p.page_id)], rejected,
           {_shown(str(p)) for p, _ in candidates})
    return [p for p in pages if p.page_id in selected], rejected


def planned_ids(run_dir: Path, input_dirs: list[Path], manifest: Path | None, recursive: bool,
                max_pages: int | None) -> list[str]:
    """The page ids a call would run, without opening an image or writing anything (`--dry-run`):
    its inputs' ids, or the manifest's when it names no inputs.

    Raises:
        InputError: where the call would refuse for want of pages (`build_pages`, `manifest_pages`).
    """
    if input_dirs or manifest:
        return _inputs(run_dir, input_dirs, manifest, recursive, max_pages)[1]
    return [p.page_id for p in manifest_pages(run_dir, max_pages)]


def _inputs(run_dir: Path, input_dirs: list[Path], manifest: Path | None, recursive: bool, max_pages: int | None,
            known: dict[str, str] | None = None) -> tuple[list[tuple[Path, Path]], list[str], list[Rejected]]:
    """`list_inputs` of a call naming inputs that get an id, their ids (`_named`, against the run's
    `known` pages) and the entries skipped while listing and naming them.

    Raises:
        InputError: no input at all and no page in the run either: nothing to do, nothing
            written; two files under one id (`_named`).
    """
    rejected: list[Rejected] = []
    candidates = list_inputs(input_dirs, manifest, recursive, max_pages, rejected)
    if not candidates and not rejected and not read_pages(run_dir):
        raise InputError(_no_images_message(input_dirs, manifest, recursive))
    return *_named(candidates, known, rejected), rejected


def manifest_pages(run_dir: Path, max_pages: int | None, shard: tuple[int, int] | None = None) -> list[PageRecord]:
    """The manifest's first `max_pages` pages (all with None), then shard K of N of them
    (`select_shard`): a call that names no inputs.

    Only the shard's lines are parsed and kept: each task of a Slurm array reads its slice of
    the run's manifest (parsing all 100k lines took 0.6 s in every task, holding them 80 MB).

    Raises:
        InputError: the run dir has no manifest, or an empty one.
    """
    path = Path(run_dir) / MANIFEST
    pages = _parse_lines(run_dir, select_shard(islice(jsonl_lines(path), max_pages), shard))
    if not pages and not any(islice(jsonl_lines(path), max_pages)):
        raise InputError(f"no pages: give --input-dir or --manifest (no manifest in {Path(run_dir) / 'manifests'})")
    return pages


def refresh_pages(run_dir: Path, pages: list[PageRecord],
                  limits: InputLimits = InputLimits()) -> tuple[list[PageRecord], list[Rejected]]:
    """`pages` of the manifest as their images are now, for a call that runs from the manifest
    (cluster jobs after `newsbag pages`): a page whose image changed since it was hashed (size
    or mtime) is inspected again and its record replaced in the manifest, so its outputs go
    stale, as a call naming the inputs would do; one that cannot be read any more is rejected
    for this call (the manifest keeps it and its outputs). A page whose image is gone stays as
    the manifest has it: stages that need no image (fusion, export) go on, and a runner names
    the missing file. One stat per unchanged page.
    """
    todo = [(Path(os.path.abspath(Path(run_dir) / p.path)), p, p.page_id) for p in pages]
    rejected: list[Rejected] = []
    fresh = _records(run_dir, todo, limits, rejected, gone_ok=True)
    known = {p.page_id: p for p in pages}
    changed = [p for p in fresh if p is not known[p.page_id]]
    if changed or rejected:  # else no lock and no manifest write: every job of an array does this
        _merge(run_dir, changed, rejected, {_shown(str(path)) for path, *_ in todo})
    return fresh, rejected


def _records(run_dir: Path, todo: list[tuple], limits: InputLimits, rejected: list[Rejected],
             gone_ok: bool = False) -> list[PageRecord]:
    """The record of each (image path, known record or None, page id) of `todo`: the
    known one while its image is unchanged (`_unchanged`, with `gone_ok`), else a new
    inspection; an image that cannot be read goes to `rejected` with its one line, and the
    rest go on. New inspections go into the manifest every `CHECKPOINT_PAGES` or `CHECKPOINT_S`
    (`_checkpoint`): a rerun after a kill finds them unchanged and inspects only the rest."""
    pages: list[PageRecord] = []
    unsaved: list[PageRecord] = []
    saved_at = time.monotonic()
    for path, old, page_id in todo:
        if unsaved and (len(unsaved) >= CHECKPOINT_PAGES or time.monotonic() - saved_at >= CHECKPOINT_S):
            _checkpoint(run_dir, unsaved)
            unsaved, saved_at = [], time.monotonic()
        if old is not None and _unchanged(run_dir, old, path, gone_ok):
            pages.append(old)
            continue
        if old is not None and (moved := _reanchored(run_dir, old, path)) is not None:
            pages.append(moved)
            unsaved.append(moved)
            continue
        rejudged = replace(old, conversion=CONVERSION_REVISION) if old is not None and old.judged_by_older_rule else None
        if rejudged is not None and _unchanged(run_dir, rejudged, path) and _still_passes(path, rejudged):
            pages.append(rejudged)  # only its revision was old, and it still passes as it is
            continue
        try:
            record = inspect_page(path, None, run_dir, limits, page_id=page_id)
        except InputError as exc:
            rejected.append(Rejected(str(path), str(exc), getattr(exc, "kind", "unreadable")))
            log.error("skipping input: %s", rejected[-1].error)
            continue
        if record.note:
            log.warning("page %s (%s): %s", record.page_id, record.path, record.note)
        pages.append(record)
        unsaved.append(record)
    return pages


def _merge(run_dir: Path, pages: list[PageRecord], rejected: list[Rejected], listed: set[str]) -> None:
    """`pages` into the manifest and `rejected` into rejected.jsonl (`_merge_rejected`; `listed`:
    the inputs this call looked at). The manifest is read again under the lock: another job may
    have added pages while this one inspected its images, and a merge from an earlier read would
    drop them."""
    with locks.manifest_lock(run_dir):
        _merge_pages(run_dir, pages)
        _merge_rejected(run_dir, rejected, listed)


def _checkpoint(run_dir: Path, pages: list[PageRecord]) -> None:
    """`pages` inspected so far into the manifest, as `_merge` puts them there at the end."""
    with locks.manifest_lock(run_dir):
        _merge_pages(run_dir, pages)


def _merge_pages(run_dir: Path, pages: list[PageRecord]) -> None:
    """`pages` into the manifest read again (the caller holds the manifest lock): a page it has keeps its place."""
    if pages:  # none (nothing new or changed, or every input rejected): the manifest stays as it is
        merged = {p.page_id: p for p in read_pages(run_dir)}
        merged.update({p.page_id: p for p in pages})
        write_pages(run_dir, merged.values())


def read_rejected(run_dir: Path) -> list[Rejected]:
    """The inputs the run skipped, with their reasons (RUN/manifests/rejected.jsonl)."""
    out = []
    for _, line in jsonl_lines(rundir.rejected_path(run_dir)):
        try:
            row = json.loads(line)
            out.append(Rejected(str(row["path"]), str(row["error"]), str(row.get("kind", "unreadable"))))
        except (ValueError, TypeError, KeyError):
            continue
    return out


def _merge_rejected(run_dir: Path, rejected: list[Rejected], listed: set[str]) -> None:
    """Rewrite rejected.jsonl: this call's rejections replace its inputs' old rows; rows of
    inputs another call listed stay, unless the path is gone or was accepted since."""
    previous = read_rejected(run_dir)
    if not previous and not rejected:
        return
    now = {r.path for r in rejected}
    keep = [r for r in previous
            if r.path not in now and r.path not in listed and os.path.lexists(r.path)]
    rows = sorted(keep + rejected, key=lambda r: r.path)
    atomic_write_text(rundir.rejected_path(run_dir), "".join(dumps_strict(asdict(r)) + "\n" for r in rows))

def _no_images_message(input_dirs: list[Path], manifest: Path | None, recursive: bool) -> str:
    """Why no page was found, with the fix: forgetting --recursive on a folder of issue folders is the usual cause."""
    where = ", ".join(str(d) for d in input_dirs) + (f" or {manifest}" if manifest and input_dirs else str(manifest or ""))
    msg = f"no page images ({', '.join(sorted(IMAGE_SUFFIXES))}) in {where}"
    if not recursive:
        nested = {d: len(discover_images(d, True)) for d in input_dirs}
        if any(nested.values()):
            n = sum(nested.values())
            return f"{msg}, but its sub-folders hold {n} image(s): add --recursive"
    return msg + "; nothing written"


def _unchanged(run_dir: Path, record: PageRecord, path: Path, gone_ok: bool = False) -> bool:
    """`record` still describes the image at `path`: the same file, unchanged since it was
    hashed, judged by this CONVERSION_REVISION, and its 8-bit copy (if any) not older; with
    `gone_ok`, also when the file is gone (it cannot be judged again).
    One or two stat calls when the paths are spelt alike: every job of a 100k-page run asks
    this of each of its pages."""
    original = Path(os.path.abspath(Path(run_dir) / record.path))
    if original != Path(os.path.abspath(path)) and original.resolve() != Path(path).resolve():
        return False
    identity = freshness.file_identity(original)
    if identity is None:
        return gone_ok
    if _changed_in_place(record, identity):
        return False  # hash it again, so its outputs become stale
    if record.judged_by_older_rule:
        return False  # judged by an older rule: judge it again (`_still_passes`, `PageRecord.image_sha256`)
    if record.image_path == str(original):
        return True
    cached = freshness.file_identity(Path(record.image_path))
    return cached is not None and cached[1] >= identity[1]


def _reanchored(run_dir: Path, record: PageRecord, path: Path) -> PageRecord | None:
    """`record` anchored at `path` when its original is gone from where the manifest says (a run
    moved or copied elsewhere: its run-relative path points nowhere now) and `path`, the input of
    this call with its page id, is that file: the same [size, mtime_ns] identity and content hash.
    None otherwise (inspected as a changed page). One hash, no decode: its outputs stay current."""
    if record.identity is None or record.judged_by_older_rule:
        return None
    if freshness.file_identity(os.path.abspath(Path(run_dir) / record.path)) is not None:
        return None
    if freshness.file_identity(path) != record.identity:
        return None
    try:
        if hash_file(path, hashlib.sha256()) != record.sha256:
            return None
    except OSError:
        return None
    where = os.path.abspath(path)
    return replace(record, path=os.path.relpath(where, os.path.abspath(run_dir)),
                   image_path=record.image_path if record.copy_sha256 else where)


def _changed_in_place(record: PageRecord, identity: list[int] | None) -> bool:
    """The original's [size, mtime_ns] `identity` is not the one its hash was taken at (a record of
    an older newsbag has none: not known to have changed; a file gone has none: not changed)."""
    return None not in (record.identity, identity) and record.identity != identity


def scan_changes(run_dir: Path, records: Iterable[PageRecord]) -> tuple[list[str], list[str]]:
    """Ids of the pages whose original was replaced on disk since it was inspected (the next call
    naming them hashes them again (`_unchanged`) and redoes their outputs if what runners read
    changed), and of those whose original is gone (a run moved or copied without its scans: its
    outputs stay, but no board, transcript or model pass can be made of them again).
    One stat a page and no hashing: `status` asks it of every page of a 100k-page run."""
    changed, missing = [], []
    for p in records:
        identity = freshness.file_identity(os.path.abspath(Path(run_dir) / p.path))
        if identity is None:
            missing.append(p.page_id)
        elif _changed_in_place(p, identity):
            changed.append(p.page_id)
    return changed, missing


def select_ids(ids: list[str], wanted: Iterable[str]) -> list[str]:
    """The ids of `ids` that `--pages` names, in their order; all of them when it names none.

    Raises:
        InputError: `wanted` names an id none of this call's pages has (a typo), before anything is written.
    """
    wanted = set(wanted)
    if not wanted:
        return list(ids)
    missing = sorted(wanted.difference(ids))
    if missing:
        near = difflib.get_close_matches(missing[0], ids, n=1)
        hint = f"did you mean {near[0]}? " if near else ""
        raise InputError(f"--pages: unknown page id(s) {', '.join(missing)}; {hint}page ids are the page_id "
                         f"column of RUN/manifests/pages.jsonl (e.g. {ids[0] if ids else 'issue1__p1-3fa9c2d1'})")
    return [i for i in ids if i in wanted]


def select_shard(pages: Iterable, shard: tuple[int, int] | None) -> list:
    """Pages of shard K of N: every N-th manifest line starting at K (balanced, stable), taken
    as they come (a manifest read line by line is held only for the shard's lines)."""
    if shard is None:
        return list(pages)
    k, n = shard
    return list(islice(pages, k, None, n))
