"""Image loading for runners (Pillow + numpy; no newsbag import, no cv2).

The orchestrator already normalises exotic inputs (16-bit, CMYK, multi-page TIFF) into a
plain 8-bit cache image, so runners only need a straight RGB decode.
"""

from __future__ import annotations

import threading
from contextlib import contextmanager
from typing import TYPE_CHECKING

from PIL import Image

if TYPE_CHECKING:
    import numpy as np

# numpy is imported where an array is made: the tesseract runner needs none, and numpy is
# most of its start-up (about 0.25 of 0.39 s).

_GUARD_LOCK = threading.RLock()


@contextmanager
def open_page(path: str):
    """`Image.open` of a page the orchestrator accepted, with Pillow's bomb guard lifted for
    this block only (never at import).

    The orchestrator refused over-limit and bomb-like pages from their headers (newsbag
    pages.py, ``--max-megapixels``); Pillow's fixed 179 MP refusal would fail real broadsheets.
    """
    with _GUARD_LOCK:
        saved = Image.MAX_IMAGE_PIXELS
        Image.MAX_IMAGE_PIXELS = None
        try:
            with Image.open(path) as im:
                yield im
        finally:
            Image.MAX_IMAGE_PIXELS = saved


def load_rgb(path: str) -> np.ndarray:
    """(H, W, 3) uint8 RGB array of the page image."""
    import numpy as np

    with open_page(path) as im:
        return np.asarray(im.convert("RGB"))


def load_page_array(path: str) -> np.ndarray:
    """(H, W) for grey pages, (H, W, 3) RGB otherwise: resizing a grey scan is 3x cheaper."""
    import numpy as np

    with open_page(path) as im:
        if im.mode in ("L", "1", "I;16", "I"):
            return np.asarray(im.convert("L"))
        return np.asarray(im.convert("RGB"))


def load_pil_rgb(path: str) -> Image.Image:
    with open_page(path) as im:
        return im.convert("RGB")
