"""A reviewed page's images: the page view's scan and the list's thumbnail, the pixel helpers the
boards share with them, and whether a page's gallery files are whole."""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
from PIL import Image

from .. import freshness
from ..io import atomic_write_bytes
from .gallery import DATA_JS, SCANS, THUMB

__all__ = ["SCAN_WIDTH", "fit_width", "black_and_white", "to_one_bit", "write_scan", "written_files", "files_whole"]

# The page list's thumbnails.
_THUMB_WIDTH = 120
# The page view shows the scan at most this wide: body text stays legible, and an NZZ page is
# ~0.1 MB as a 1-bit PNG (a 1600-px JPEG at quality 80 was 0.3-1.1 MB, the review's largest file).
SCAN_WIDTH = 1200
_SCAN_QUALITY = 60
# A page is black and white when under a half of its pixels are grey (NZZ scans: 9-30 %; a
# greyscale photograph of a page: ~97 %).
_GREY_LOW, _GREY_HIGH, _MAX_GREY_SHARE = 32, 224, 0.5
_JPEG_MAX_SIDE = 65500  # libjpeg refuses a longer side (a 1 x 70000 strip stopped the whole run)


def fit_width(image: Image.Image, width: int) -> Image.Image:
    """`image` at most `width` wide and `_JPEG_MAX_SIDE` high (libjpeg refuses longer sides)."""
    scale = min(1.0, width / image.width, _JPEG_MAX_SIDE / image.height)
    if scale >= 1.0:
        return image
    return image.resize((max(1, round(image.width * scale)), max(1, round(image.height * scale))),
                        Image.Resampling.LANCZOS)


def black_and_white(image: Image.Image) -> bool:
    """Whether the page is mostly black or white pixels already (a binarised scan), measured on
    every 4th pixel of every 4th row: a 1-bit copy loses nothing a reviewer needs there."""
    grey = np.asarray(image.convert("L"))[::4, ::4]
    return bool(np.mean((grey > _GREY_LOW) & (grey < _GREY_HIGH)) < _MAX_GREY_SHARE)


def to_one_bit(image: Image.Image) -> Image.Image:
    return image.convert("L").point(lambda v: 255 if v > 127 else 0).convert("1", dither=Image.Dither.NONE)


def write_scan(image: Image.Image, page_dir: Path) -> str:
    """The page view's scan (browsers show no TIFF) and the list's thumbnail; returns the scan's
    file name (one of `SCANS`), removing the other one."""
    scan = fit_width(image, SCAN_WIDTH)
    buf = io.BytesIO()
    if black_and_white(image):
        name = SCANS[0]
        to_one_bit(scan).save(buf, format="PNG", optimize=True)
    else:
        name = SCANS[1]
        scan.save(buf, format="JPEG", quality=_SCAN_QUALITY)
    atomic_write_bytes(page_dir / name, buf.getvalue())
    for other in SCANS:
        if other != name:
            (page_dir / other).unlink(missing_ok=True)
    buf = io.BytesIO()
    fit_width(image, _THUMB_WIDTH).save(buf, format="JPEG", quality=_SCAN_QUALITY)
    atomic_write_bytes(page_dir / THUMB, buf.getvalue())
    return name


def written_files(page_dir: Path, scan: str) -> dict[str, int]:
    """The size of each gallery file of a page just written (its scan `scan`, thumbnail and
    data.js): what its info.json records for `files_whole`."""
    return freshness.file_sizes(page_dir, (scan, THUMB, DATA_JS))


def files_whole(page_dir: Path, info: dict) -> bool:
    """Whether the gallery files a page's `info` (its info.json, made ok) names each still have
    the size it records (``files``): one cut short by an interrupted copy has not. A page
    reviewed before sizes were recorded: each file exists. Stat calls only."""
    made, files = (THUMB, DATA_JS, info["scan"]), info.get("files")
    if isinstance(files, dict) and files.keys() == set(made):
        return freshness.sizes_hold(page_dir, files)
    return all((page_dir / name).is_file() for name in made)
