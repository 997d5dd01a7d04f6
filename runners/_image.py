"""Image loading for runners (Pillow + numpy; no newsbag import, no cv2).

The orchestrator already normalises exotic inputs (16-bit, CMYK, multi-page TIFF) into a
plain 8-bit cache image, so runners only need a straight RGB decode.
"""

from __future__ import annotations

import numpy as np
from PIL import Image

Image.MAX_IMAGE_PIXELS = None  # broadsheet scans exceed Pillow's bomb guard


def load_rgb(path: str) -> np.ndarray:
    """(H, W, 3) uint8 RGB array of the page image."""
    with Image.open(path) as im:
        return np.asarray(im.convert("RGB"))


def load_page_array(path: str) -> np.ndarray:
    """(H, W) for grey pages, (H, W, 3) RGB otherwise: resizing a grey scan is 3x cheaper."""
    with Image.open(path) as im:
        if im.mode in ("L", "1", "I;16", "I"):
            return np.asarray(im.convert("L"))
        return np.asarray(im.convert("RGB"))


def load_pil_rgb(path: str) -> Image.Image:
    with Image.open(path) as im:
        return im.convert("RGB")
