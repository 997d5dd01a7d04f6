"""text_lines runner: PP-OCR DB text-line detection (rapidocr-onnxruntime's ONNX), optionally grouped into blocks.

Lines (raw label ``text_line``) are evidence for fusion metrics; grouped (``group``: true)
they become ``text_block`` regions, a bag member of their own.
"""

from __future__ import annotations

import os

import numpy as np

import _db
import _loop
import _picodet
from _errors import MissingDependency
from _image import load_page_array
from _ort import make_session
from _weights import packaged_file

DET_MODEL = "ch_PP-OCRv4_det_infer.onnx"


def default_det_model() -> str:
    """The PP-OCRv4 det model inside the installed rapidocr-onnxruntime package."""
    return packaged_file("rapidocr_onnxruntime", f"models/{DET_MODEL}",
                         "pip install rapidocr-onnxruntime==1.4.4 or set params.model_path to a PP-OCR det .onnx file")


def lines_to_blocks(xyxy: np.ndarray, scores: np.ndarray, gap_factor: float):
    """Union box and mean line score of each block of grouped lines."""
    pieces, parent, block = _db.group_lines(xyxy, gap_factor=gap_factor)
    k = int(block.max()) + 1 if block.size else 0
    mean_score = np.bincount(block, weights=scores[parent], minlength=k) / np.maximum(np.bincount(block, minlength=k), 1)
    return _db.union_xyxy(pieces, block), mean_score


def locate_weights(params: dict) -> str:
    """The det .onnx this variant would load."""
    path = params["model_path"] or default_det_model()
    if not os.path.isfile(path):
        raise MissingDependency(f"text_lines: model file not found: {path}")
    return path


class TextLinesDetector:
    """DB detector session loaded once; numpy pre/post-processing per page.

    lines and blocks differ only in grouping: they share one DB pass per page (``SHARED_PARAMS``).
    """

    SHARED_PARAMS = ("model_path", "max_side", "bin_threshold", "box_threshold", "unclip_ratio")

    def __init__(self, params: dict, device: str, allow_cpu_fallback: bool):
        self.params = params
        model_path = params["model_path"] or default_det_model()
        self.session, ort_info = make_session(model_path, device, allow_cpu_fallback)
        self.input_name = self.session.get_inputs()[0].name
        self.max_side = int(params["max_side"])
        self.bin_threshold = float(params["bin_threshold"])
        self.box_threshold = float(params["box_threshold"])
        self.unclip_ratio = float(params["unclip_ratio"])
        self.device_used = ort_info["device_used"]
        self.info = {"model": f"{os.path.basename(model_path)} (DB, onnxruntime)",
                     "model_path": os.path.abspath(model_path), **ort_info}

    def model_pass(self, image_path: str) -> dict:
        """The model pass: DB text lines in page pixels, as JSON lists (shared by the variants)."""
        image = load_page_array(image_path)
        height, width = image.shape[:2]
        in_hw = _db.db_input_hw(height, width, self.max_side)
        tensor = _picodet.to_input_tensor(image, in_hw)
        prob = self.session.run(None, {self.input_name: tensor})[0][0, 0]
        xyxy, scores = _db.db_boxes(prob, self.bin_threshold, self.box_threshold, self.unclip_ratio)
        xyxy = xyxy * np.array([width / in_hw[1], height / in_hw[0]] * 2)
        return {"xyxy": xyxy.tolist(), "score": scores.tolist()}

    def detect(self, image_path: str, page: dict) -> list[dict]:
        return self.from_pass(self.params, self.model_pass(image_path))

    @staticmethod
    def from_pass(params: dict, out: dict) -> list[dict]:
        """This variant's regions from the pass: the lines, or (``group``) their blocks."""
        xyxy = np.array(out["xyxy"], dtype=np.float64).reshape(-1, 4)
        scores = np.array(out["score"], dtype=np.float64)
        label = "text_line"
        if params["group"]:
            xyxy, scores = lines_to_blocks(xyxy, scores, float(params["gap_factor"]))
            label = "text_block"
        return [{"bbox_xyxy": box.tolist(), "label": label, "score": float(s), "order": None, "text": None}
                for box, s in zip(xyxy, scores)]

    def close(self) -> None:
        self.session = None


if __name__ == "__main__":
    _loop.main(TextLinesDetector)
