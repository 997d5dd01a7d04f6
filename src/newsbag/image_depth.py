"""Scaling a page's samples of any depth (16-bit, 32-bit, float) to the 8 bits every model library
reads, with what the scaling did for the manifest's note. A change to these rules changes the
pages' 8-bit copies: bump `images.CONVERSION_REVISION` with it."""

from __future__ import annotations

import numpy as np
from PIL import Image

__all__ = ["BAND_ROWS", "to_8bit", "shown_as_stored", "declared_max", "tag_values", "scaled_8bit"]

BAND_ROWS = 256  # rows scaled at once by scaled_8bit: ~30 MB of int64 on a 600 dpi broadsheet


def to_8bit(im: Image.Image) -> tuple[Image.Image, str]:
    """8-bit L or RGB rendering of any Pillow mode (16/32-bit and float scaled by `scaled_8bit`,
    CMYK/P/1/LA converted), and what the scaling did when the manifest should say so."""
    if im.mode in ("I;16", "I;16B", "I;16L", "I;16N", "I", "F"):
        tags = getattr(im, "tag_v2", {})
        arr = np.asarray(im)
        if arr.dtype == np.int32 and tag_values(tags.get(258)) == [32] and tag_values(tags.get(339, 1)) == [1]:
            arr = arr.view(np.uint32)  # Pillow holds an unsigned 32-bit TIFF's samples as int32: >= 2**31 negative
        arr, how = shown_as_stored(*scaled_8bit(arr, declared_max(tags.get)), tags.get(262))
        return Image.fromarray(arr, "L"), how
    if im.mode in ("1", "L", "LA"):
        return im.convert("L"), ""
    return im.convert("RGB"), ""


def shown_as_stored(grey: np.ndarray, how: str, photometric) -> tuple[np.ndarray, str]:
    """An 8-bit grey page (`scaled_8bit`'s result) with black where its TIFF's PhotometricInterpretation
    (`photometric`, tag 262) puts it: WhiteIsZero (0) stores black as the largest value. Pillow inverts
    1- and 8-bit such pages on load but reads deeper ones as stored, as tifffile does: their copy was
    the page's negative, with nothing said."""
    if tag_values(photometric) != [0]:
        return grey, how
    np.subtract(255, grey, out=grey)
    return grey, "; ".join(filter(None, [how, "WhiteIsZero: inverted"]))


def declared_max(tag_value) -> int | None:
    """A TIFF's MaxSampleValue (281) or SMaxSampleValue (341), one value or one per sample, as one
    integer; None when absent or not a positive number. `tag_value` looks a tag's value up by its
    code (None when absent), from Pillow's or tifffile's tags."""
    value = tag_value(281)
    values = tag_values(tag_value(341) if value is None else value)
    return max(values) if values and min(values) > 0 else None


def tag_values(value) -> list[int] | None:
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


def scaled_8bit(arr: np.ndarray, declared: int | None = None) -> tuple[np.ndarray, str]:
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
    for row in range(0, arr.shape[0], BAND_ROWS):
        out[row:row + BAND_ROWS] = scale(arr[row:row + BAND_ROWS])
    return out, how


def _finite_range(arr: np.ndarray) -> tuple[float, float]:
    """(min, max) of the finite pixels of a float page, a band at a time: one NaN or inf pixel
    in the range made the whole 8-bit copy black.

    Raises:
        ValueError: no pixel is finite (the page has no content to show).
    """
    lo, hi = np.inf, -np.inf
    for row in range(0, arr.shape[0], BAND_ROWS):
        band = arr[row:row + BAND_ROWS]
        finite = band[np.isfinite(band)]
        if finite.size:
            lo, hi = min(lo, float(finite.min())), max(hi, float(finite.max()))
    if lo > hi:
        raise ValueError("no finite pixel value (every pixel is NaN or infinite)")
    return lo, hi
