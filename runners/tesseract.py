"""tesseract runner: Tesseract page layout analysis (typed blocks or paragraphs) via tesserocr.

No language data is needed: ``InitForAnalysePage`` sets up layout analysis only. The page
segmentation mode is PSM_AUTO_ONLY; the API's default (single block) returns one block.
"""

from __future__ import annotations

import sys

import _loop
from _errors import DeviceUnavailable, MissingDependency
from _image import open_page

LEVELS = ("block", "paragraph")


def block_type_names(pt) -> dict[int, str]:
    """PolyBlockType value -> lower-case enum name (``flowing_text``, ``horz_line``, ...)."""
    return {getattr(pt, name): name.lower() for name in dir(pt) if name.isupper() and name != "COUNT"}


def downscale_factor(width: int, height: int, max_side: int) -> float:
    """Factor (<= 1) that brings the long side to ``max_side``; 1 when ``max_side`` <= 0."""
    long_side = max(width, height)
    return max_side / long_side if 0 < max_side < long_side else 1.0


def source_dpi(info: dict) -> float | None:
    """The file's vertical resolution in dpi from Pillow's ``info`` (None when absent or bogus)."""
    dpi = info.get("dpi")
    if not dpi:
        return None
    value = float(dpi[1] if isinstance(dpi, (tuple, list)) else dpi)
    return value if 1 <= value <= 10000 else None


class TesseractDetector:
    """One tesserocr API object per job, reused for every page.

    One layout analysis gives both levels: the block and paragraph variants share it
    (``SHARED_PARAMS``; the iterator is rewound with ``Begin()`` between the levels).
    """

    SHARED_PARAMS = ("max_side",)

    def __init__(self, params: dict, device: str, allow_cpu_fallback: bool):
        try:
            import tesserocr
        except ImportError as exc:
            raise MissingDependency(
                f"tesserocr is not installed in {sys.executable}: {exc}; pip install tesserocr") from exc
        level = params["level"]
        if level not in LEVELS:
            raise ValueError(f"tesseract: unknown level {level!r}; choose one of {list(LEVELS)}")
        if device == "gpu" and not allow_cpu_fallback:
            raise DeviceUnavailable("tesseract layout analysis runs on CPU only; allow CPU fallback")
        self.params = params
        self.rils = {"block": tesserocr.RIL.BLOCK, "paragraph": tesserocr.RIL.PARA}
        self.max_side = int(params["max_side"])
        self.names = block_type_names(tesserocr.PT)
        self.iterate_level = tesserocr.iterate_level
        self.api = tesserocr.PyTessBaseAPI(init=False)
        self.api.InitForAnalysePage()
        self.api.SetPageSegMode(tesserocr.PSM.AUTO_ONLY)
        version = tesserocr.tesseract_version().split()[1]
        self.device_used = "cpu"
        self.info = {"model": f"tesseract-{version} layout", "tesseract_version": version,
                     "tesserocr_version": getattr(tesserocr, "__version__", None), "level": level}

    def detect(self, image_path: str, page: dict) -> list[dict]:
        return self.from_pass(self.params, self.model_pass(image_path))

    @staticmethod
    def from_pass(params: dict, out: dict) -> list[dict]:
        """This variant's level of the layout analysis."""
        return out[params["level"]]

    def model_pass(self, image_path: str) -> dict[str, list[dict]]:
        """The model pass: one AnalyseLayout, its regions at every level in ``LEVELS``."""
        from PIL import Image

        with open_page(image_path) as im:
            # Tesseract binarises internally; grey keeps the copy small.
            image = im.convert("L")
            dpi = source_dpi(im.info)
        width, height = image.size
        factor = downscale_factor(image.width, image.height, self.max_side)
        if factor < 1.0:
            size = (max(1, round(image.width * factor)), max(1, round(image.height * factor)))
            image = image.resize(size, Image.Resampling.LANCZOS)
        self.api.SetImage(image)
        if dpi is not None:
            # tesserocr hands Tesseract a BMP without resolution, so every page was 96 dpi;
            # the layout thresholds scale with it (xcol 0.0102 -> 0.0068 on nzz). After
            # SetImage, which resets it; times the downscale factor.
            self.api.SetSourceResolution(max(1, round(dpi * factor)))
        iterator = self.api.AnalyseLayout()
        if iterator is None:  # tesserocr's answer for an empty page
            return {level: [] for level in LEVELS}
        scale_x, scale_y = width / image.width, height / image.height
        out = {}
        for level in LEVELS:
            ril = self.rils[level]
            iterator.Begin()
            regions = []
            for item in self.iterate_level(iterator, ril):
                box = item.BoundingBox(ril)
                if box is None:
                    continue
                x0, y0, x1, y1 = box
                regions.append({
                    "bbox_xyxy": [x0 * scale_x, y0 * scale_y, x1 * scale_x, y1 * scale_y],
                    # At RIL.PARA this is the enclosing block's type, so headings stay headings.
                    "label": self.names.get(item.BlockType(), "unknown"),
                    "score": None, "order": None, "text": None,
                })
            out[level] = regions
        self.api.Clear()
        return out

    def close(self) -> None:
        self.api.End()


if __name__ == "__main__":
    _loop.main(TesseractDetector)
