"""Decode a page image to the 8-bit, upright pixels every model library reads, or pass it as it is."""

from __future__ import annotations

import hashlib
import importlib.util
import os
import threading
from contextlib import contextmanager
from dataclasses import dataclass
from io import BytesIO
from pathlib import Path
from typing import Callable

import numpy as np
from PIL import Image, UnidentifiedImageError

from .errors import InputError, InputRejected, first_line
from .image_depth import BAND_ROWS, declared_max, scaled_8bit, shown_as_stored, tag_values, to_8bit

__all__ = [
    "CONVERSION_REVISION",
    "DEFAULT_MAX_MEGAPIXELS",
    "READ_ONCE_MAX_BYTES",
    "InputLimits",
    "PageImage",
    "open_accepted_image",
    "decode_page",
    "passes_as_is",
    "copy_png",
    "pixels_sha256",
]

# A 600 dpi scan of a full broadsheet (about 24 x 30 in with margins) is ~260 MP; 400 MP leaves room
# for larger sheets and 800 dpi tabloids while refusing a decompression bomb before it costs
# 1.2 GB of RGB in every process that reads it (README, "Inputs").
DEFAULT_MAX_MEGAPIXELS = 400.0
# Real scans hold at most ~50 pixels per file byte (a bilevel G4 TIFF of an NZZ page: 47; PNG 1-bit:
# 32; JPEG/deflate grey: 5-6). 1000 is 20x that; only blank pages and bombs get there. Checked only
# above 16 MP, where decoding starts to cost (a 16 MP RGB page is 48 MB).
MAX_PIXELS_PER_BYTE = 1000.0
_RATIO_FLOOR_PIXELS = 16_000_000
# EXIF/TIFF Orientation -> the transpose that shows the page as a viewer does (Pillow's exif_transpose).
_ORIENT = {2: Image.Transpose.FLIP_LEFT_RIGHT, 3: Image.Transpose.ROTATE_180, 4: Image.Transpose.FLIP_TOP_BOTTOM,
           5: Image.Transpose.TRANSPOSE, 6: Image.Transpose.ROTATE_270, 7: Image.Transpose.TRANSVERSE,
           8: Image.Transpose.ROTATE_90}
_GUARD_LOCK = threading.RLock()
# Formats and modes every model library reads as they are; anything else gets an 8-bit copy.
_PASS_FORMATS = frozenset({"PNG", "JPEG", "TIFF"})
_PASS_MODES = frozenset({"L", "RGB"})
# A new page up to this size is read once: hashed, and decoded from the same bytes. A larger one
# (an uncompressed TIFF at the 400 MP limit is 1.2 GB) is decoded from the file and hashed by a
# second, streaming read, so its bytes are never held whole beside its pixels.
READ_ONCE_MAX_BYTES = 64 << 20
# The revision of the rules that pass a page as it is or make its 8-bit copy (formats, scaling in
# `image_depth`, colour, orientation): bump it whenever one changes. A manifest page an older revision
# converted is converted again: a copy is made again, a page passed as it is has its header read (`passes_as_is`);
# its outputs are redone only if what the runners read changed (`PageRecord.image_sha256`).
# 1: 12-bit data in 16-bit samples scaled by 4095; 2: unsigned 32-bit TIFFs read as unsigned;
# 3: 16-bit colour PNGs decoded at 16 bits; 4: 16-bit binary PPMs read at 16 bits, and deep
# WhiteIsZero TIFFs no longer copied as their negative.
CONVERSION_REVISION = 4


@dataclass(frozen=True)
class PageImage:
    """A page as the runners will read it, upright (as a viewer shows it).

    `width` and `height` are those of the upright page, which every box is in; `copy` is its 8-bit
    L or RGB copy, None when the file is read as it is; `dpi` is the file's, turned with the page.
    """

    width: int
    height: int
    orientation: int   # the file's EXIF/TIFF Orientation (1: as stored)
    copy: Image.Image | None
    dpi: tuple | None
    note: str          # what the manifest says of the page: frames, orientation, conversion
    data: bytes | None  # the file's bytes when read once (`READ_ONCE_MAX_BYTES`), else None


@dataclass(frozen=True)
class _Decoded:
    """An open page as read from its file, before it is turned upright (`_upright`)."""

    fmt: str
    mode: str          # its mode, or what a deep page's samples hold (for the note)
    width: int
    height: int
    frames: int
    orientation: int
    dpi: tuple | None
    copy: Image.Image | None   # None: passed as it is
    depth: str         # what scaling a deep page to 8 bits did (`image_depth.scaled_8bit`)
    upright_on_load: bool = False   # Pillow turned it (a TIFF) as it loaded it


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


def pixels_sha256(page: Image.Image) -> str:
    """sha256 of an 8-bit copy's mode, size and pixels, a band of rows at a time: the same for the
    same pixels whatever PNG encoder (Pillow, zlib version) wrote the copy."""
    h = hashlib.sha256(f"{page.mode} {page.width}x{page.height}".encode())
    for row in range(0, page.height, BAND_ROWS):
        h.update(page.crop((0, row, page.width, min(row + BAND_ROWS, page.height))).tobytes())
    return h.hexdigest()


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
    bits = max(tag_values(im.tag_v2.get(258, 8)) or [8])
    return bits if bits > 8 and importlib.util.find_spec("tifffile") is not None else 0


def _read_deep_png(path: Path, data: bytes | None, limits: InputLimits) -> tuple[Image.Image, str]:
    """A 16-bit PNG with more than one sample a pixel at its full depth, scaled to 8 bits as
    `to_8bit` scales Pillow's deep pages (with what the scaling did): RGB for colour, L for grey
    and alpha (the alpha dropped, as for an 8-bit one). Pillow has no such 16-bit mode, so its PNG
    decoder runs twice for colour: unpacking each sample's high byte (``RGB;16B``, its default),
    then its low byte (``RGB;16L`` takes the big-endian pair the other way round). Grey+alpha
    (``LA;16B``, which has no low-byte twin) is unpacked once as 8-bit RGBA: the same 4 bytes a
    pixel, so the same unfiltering, giving grey high, grey low, alpha high, alpha low. It decodes
    `data` when `decode_page` read the file once, else the file (its size checked already: `limits`
    unused)."""
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
    out, how = scaled_8bit(arr)
    return Image.fromarray(out, "L" if grey else "RGB"), how


def _read_deep_ppm(path: Path, data: bytes | None, limits: InputLimits) -> tuple[Image.Image, str]:
    """A binary 16-bit PPM (P6, maxval 65535) at its full depth, scaled to 8-bit RGB as `to_8bit`
    scales Pillow's deep pages (with what the scaling did): its samples are big-endian after the
    header, read in place (`data`, the file's bytes when `decode_page` read them once, else the file;
    its size checked already: `limits` unused)."""
    with _pillow_guard_lifted(), Image.open(path if data is None else BytesIO(data)) as im:
        (width, height), offset = im.size, im.tile[0].offset
    count = width * height * 3
    if data is not None:
        arr = np.frombuffer(data, ">u2", count=min(count, max(len(data) - offset, 0) // 2), offset=offset)
    else:
        arr = np.fromfile(path, ">u2", count=count, offset=offset)
    if arr.size < count:
        raise OSError(f"image file is truncated ({arr.size} of {count} 16-bit samples)")
    out, how = scaled_8bit(arr.reshape(height, width, 3))
    return Image.fromarray(out, "RGB"), how


def _read_tiff_with_tifffile(path: Path, data: bytes | None, limits: InputLimits) -> tuple[Image.Image, str]:
    """A TIFF Pillow cannot identify (float64, float colour) or reads at 8 bits (16-bit colour), read
    with tifffile and scaled to 8-bit L or RGB as `to_8bit` scales Pillow's pages (with what the
    scaling did). It decodes `data`, the file's bytes when `decode_page` read them once, else the file."""
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

            declared = declared_max(tag)
            try:
                arr = tif.pages[0].asarray()
            except Exception as exc:  # noqa: BLE001 - its decoders raise anything on a cut file (zlib.error...)
                raise InputRejected(f"{path}: cannot decode image: {first_line(exc)}", "corrupt") from None
        if planar:
            arr = np.moveaxis(arr, 0, -1)
        if arr.ndim == 3 and arr.shape[-1] < 3:
            arr = arr[..., 0]  # grey + alpha
        if arr.ndim not in (2, 3):
            raise ValueError(f"pixel array of shape {arr.shape}")
        if arr.ndim == 2:
            out, how = shown_as_stored(*scaled_8bit(arr, declared), tag(262))
            return Image.fromarray(out, "L"), how
        out, how = scaled_8bit(arr[..., :3], declared)
        return Image.fromarray(out, "RGB"), how
    except (tifffile.TiffFileError, ValueError, TypeError, IndexError, OSError) as exc:
        raise InputRejected(f"{path}: not a readable image ({first_line(exc)})", "not_an_image") from None


def _check_declared_size(path: Path, width: int, height: int, limits: InputLimits) -> None:
    """Refuse, from the header alone, a page too large to decode or absurd for its file size."""
    pixels = width * height
    if width < 1 or height < 1:
        raise InputRejected(f"{path}: image has no pixels ({width}x{height})", "empty")
    if limits.max_pixels and pixels > limits.max_pixels:
        raise InputRejected(
            f"{path}: declares {width}x{height} = {pixels / 1e6:.0f} MP, over the {limits.max_pixels / 1e6:g} MP "
            f"limit; if it is a real scan, rerun with --max-megapixels {pixels / 1e6 * 1.1:.0f}", "too_large")
    size = max(1, os.path.getsize(path))
    if limits.max_pixels_per_byte and pixels > _RATIO_FLOOR_PIXELS and pixels / size > limits.max_pixels_per_byte:
        raise InputRejected(
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


def _decide_conversion(im: Image.Image) -> tuple[int, int, int, bool]:
    """(frames, deep colour bits, orientation, passed as it is) of an open page, from its header:
    every model library reads a page as it is when it has one frame, upright, in a format and mode
    they all read at 8 bits; any other gets an 8-bit copy."""
    frames = getattr(im, "n_frames", 1)
    deep_colour = _deep_colour_bits(im)  # before the EXIF look-up: on a PNG it decodes the page
    orientation = _orientation(im)
    passes = (im.format in _PASS_FORMATS and im.mode in _PASS_MODES and frames == 1 and orientation == 1
              and not deep_colour)
    return frames, deep_colour, orientation, passes


# The reader of each format whose deep colour pages Pillow reads at 8 bits (`_deep_colour_bits`).
_DEEP_READERS: dict[str, Callable[[Path, bytes | None, InputLimits], tuple[Image.Image, str]]] = {
    "PNG": _read_deep_png, "PPM": _read_deep_ppm, "TIFF": _read_tiff_with_tifffile}


def decode_page(path: Path, size: int | None, limits: InputLimits) -> PageImage:
    """The page in the image file at `path`, upright, with its 8-bit copy when the runners cannot
    read the file as it is (a format, mode or depth not every model library reads at 8 bits, more
    than one frame, an orientation).

    The header is checked against `limits` before anything is decoded. A file of `size` bytes
    up to `READ_ONCE_MAX_BYTES` is read once and decoded from those bytes (`PageImage.data`).

    Raises:
        InputError: the file is missing, unreadable, not an image, truncated, too large or absurd
            for its size (``InputRejected``: the message names it, ``.kind`` says which).
    """
    try:
        data = _read_once(path, size)
        decoded = _decoded(path, data, limits)
    except InputError:
        raise
    except FileNotFoundError:
        raise InputRejected(f"{path}: file not found", "unreadable") from None
    except PermissionError:
        raise InputRejected(f"{path}: unreadable (permission denied)", "unreadable") from None
    except UnidentifiedImageError:
        if path.suffix.lower() not in (".tif", ".tiff"):
            raise InputRejected(f"{path}: not a readable image (unknown format or corrupt header)",
                                "not_an_image") from None
        copy, depth = _read_tiff_with_tifffile(path, data, limits)
        decoded = _Decoded("TIFF", "(tifffile)", copy.width, copy.height, 1, 1, None, copy, depth)
    except (OSError, SyntaxError, ValueError, Image.DecompressionBombError) as exc:
        raise InputRejected(f"{path}: cannot decode image: {first_line(exc)}", "corrupt") from None
    return _upright(decoded, data)


def _read_once(path: Path, size: int | None) -> bytes | None:
    """The bytes of the file at `path` when its `size` is at most `READ_ONCE_MAX_BYTES`, else None;
    None too when the read finds it larger (still being copied in): it is decoded from the file."""
    if size is None or size > READ_ONCE_MAX_BYTES:
        return None
    with open(path, "rb") as fh:
        data = fh.read(READ_ONCE_MAX_BYTES + 1)
    return None if len(data) > READ_ONCE_MAX_BYTES else data


def _decoded(path: Path, data: bytes | None, limits: InputLimits) -> _Decoded:
    """The page Pillow opens from `data` (else the file), its size checked against `limits` first:
    loaded as it is when it passes (a truncated file fails now, not in every runner later), else its
    8-bit copy, a deep colour page's from its format's reader (`_DEEP_READERS`)."""
    with _pillow_guard_lifted(), Image.open(path if data is None else BytesIO(data)) as im:
        fmt, mode = im.format, im.mode
        # A PNG's samples by its raw mode, before `_decide_conversion` decodes it (Pillow calls grey+alpha RGBA).
        samples = str(im.tile[0].args).split(";")[0] if fmt == "PNG" and im.tile else mode
        _check_declared_size(path, im.width, im.height, limits)
        frames, deep_colour, orientation, passes = _decide_conversion(im)
        width, height = im.size
        dpi = im.info.get("dpi")
        if deep_colour:
            copy, depth = _DEEP_READERS[fmt](path, data, limits)
            return _Decoded(fmt, f"{samples} {deep_colour}-bit", width, height, frames, orientation, dpi, copy, depth)
        if passes:
            im.load()
            return _Decoded(fmt, mode, width, height, frames, orientation, dpi, None, "")
        im.seek(0)
        im.load()
        # Pillow turned it (a TIFF) if the tag is gone after load: the size is now upright.
        upright_on_load = orientation != 1 and fmt == "TIFF" and 0x0112 not in im.tag_v2
        if upright_on_load:
            width, height = im.size
        copy, depth = to_8bit(im)
        return _Decoded(fmt, mode, width, height, frames, orientation, dpi, copy, depth, upright_on_load)


def _upright(page: _Decoded, data: bytes | None) -> PageImage:
    """`page` turned upright (its copy, size and dpi), with what the manifest says of it."""
    width, height, copy, dpi = page.width, page.height, page.copy, page.dpi
    notes = [f"multi-page {page.fmt} ({page.frames} frames): first page used"] if page.frames > 1 else []
    if page.orientation >= 5 and dpi:
        dpi = tuple(reversed(dpi))
    if page.orientation != 1:
        if not page.upright_on_load:
            copy = copy.transpose(_ORIENT[page.orientation])
            if page.orientation >= 5:
                width, height = height, width
        notes.append(f"EXIF orientation {page.orientation}: stored upright as {width}x{height}")
    if copy is not None and not (page.fmt in _PASS_FORMATS and page.mode in _PASS_MODES and page.orientation != 1):
        depth = f": {page.depth}" if page.depth else ""
        notes.append(f"{page.fmt} {page.mode} converted to 8-bit {copy.mode}{depth}")
    return PageImage(int(width), int(height), page.orientation, copy, dpi, "; ".join(notes), data)


def passes_as_is(path: Path) -> bool:
    """The image file at `path` would be read by the runners as it is (`decode_page` makes it no
    copy), decided from its header: no hash and no decode but a PNG's EXIF look-up. False when it
    cannot be read."""
    try:
        with open_accepted_image(path) as im:
            return _decide_conversion(im)[3]
    except (OSError, SyntaxError, ValueError, UnidentifiedImageError, Image.DecompressionBombError):
        return False


def copy_png(page: PageImage) -> bytes:
    """The PNG file of `page`'s 8-bit copy, keeping the file's dpi."""
    buf = BytesIO()
    save = {"dpi": tuple(float(v) for v in page.dpi)} if _valid_dpi(page.dpi) else {}
    page.copy.save(buf, format="PNG", **save)
    return buf.getvalue()


def _valid_dpi(dpi) -> bool:
    try:
        return dpi is not None and len(dpi) == 2 and all(0 < float(v) < 1e5 for v in dpi)
    except (TypeError, ValueError):
        return False

