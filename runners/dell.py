"""Runner: American Stories (Dell et al.) newspaper layout, a YOLOv8 ONNX model on onnxruntime.

Input: letterbox to `imgsz` (pad 114), RGB /255, NCHW float32. Output [1, 4 + 10, N]:
cx, cy, w, h in input pixels, then 10 class scores (no objectness). Decode, class-agnostic
NMS and un-letterbox are numpy (runners/_yolo.py); no ultralytics or American Stories checkout.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _loop  # noqa: E402
from _errors import DeviceUnavailable, MissingDependency  # noqa: E402
from _image import load_rgb  # noqa: E402
from _ort import make_session  # noqa: E402
from _shared import shared_floor  # noqa: E402
from _weights import stage_to_local  # noqa: E402
from _yolo import decode_yolov8, letterbox, nms_xyxy, unletterbox_xyxy  # noqa: E402

LABELS = ("article", "author", "cartoon_or_advertisement", "headline", "image_caption",
          "masthead", "newspaper_header", "page_number", "photograph", "table")


def _metadata_names(session) -> list[str] | None:
    """Class names Ultralytics stores in the ONNX metadata ("names": "{0: 'article', ...}")."""
    raw = session.get_modelmeta().custom_metadata_map.get("names")
    if not raw:
        return None
    names = ast.literal_eval(raw)
    if isinstance(names, dict):
        return [str(names[k]) for k in sorted(names)]
    return [str(n) for n in names]


def locate_weights(params: dict) -> Path:
    """The .onnx file this variant would load (no onnxruntime import).

    Raises:
        MissingDependency: not set, not there or empty.
    """
    if not params["model_path"]:
        raise MissingDependency("dell: params.model_path (the American Stories layout .onnx) is not set")
    path = Path(params["model_path"]).expanduser()
    if not path.is_file():
        raise MissingDependency(f"dell: model file not found: {params['model_path']}")
    if path.stat().st_size == 0:
        raise MissingDependency(f"dell: model file {path} is empty: the copy is incomplete")
    return path


class DellDetector:
    """One onnxruntime session per job; numpy letterbox, decode and NMS per page.

    Variants that differ only in ``conf`` share one pass per page (``SHARED_FLOOR``): the pass
    decodes above the lowest conf and each variant cuts at its own afterwards. Exact: NMS is
    greedy in score order (stable), so the boxes above a cut are kept or suppressed only by
    boxes above it, and ``max_det`` keeps a prefix of that score order either way.
    """

    SHARED_PARAMS = ("model_path", "imgsz", "iou", "max_det", "labels")
    SHARED_FLOOR = "conf"

    def __init__(self, params: dict, device: str, allow_cpu_fallback: bool):
        self.params = params
        model_path = params["model_path"]
        path = locate_weights(params)
        if params["stage_weights"]:
            path = stage_to_local(path)
        self.session, ort_info = make_session(str(path), device, allow_cpu_fallback, int(params["threads"]))
        if params["require_cuda_provider"] and "CUDAExecutionProvider" not in ort_info["providers_used"]:
            raise DeviceUnavailable(
                f"dell: require_cuda_provider is set but the session uses {ort_info['providers_used']}; "
                "install onnxruntime-gpu matching the node's CUDA/cuDNN")
        inp = self.session.get_inputs()[0]
        self.input_name = inp.name
        fixed = [d for d in inp.shape[2:] if isinstance(d, int)]
        self.imgsz = fixed[0] if fixed else int(params["imgsz"])
        names = _metadata_names(self.session)
        self.labels = names if names else list(params["labels"] or LABELS)
        out_shape = self.session.get_outputs()[0].shape
        n_out = out_shape[1] if len(out_shape) == 3 else None
        if isinstance(n_out, int) and n_out != 4 + len(self.labels):
            raise MissingDependency(
                f"dell: model output has {n_out} rows, expected 4 + {len(self.labels)} labels; wrong model file?")
        self.iou, self.max_det = float(params["iou"]), int(params["max_det"])
        self.device_used = ort_info["device_used"]
        self.info = {"model": f"american_stories_layout:{Path(model_path).name}", "model_path": str(path),
                     "imgsz": self.imgsz, "labels": self.labels, **ort_info}

    def model_pass(self, image_path: str) -> dict:
        """Boxes above the conf of the pass (`_shared.shared_floor`) after NMS, in page pixels, best
        first, with their label names (JSON lists)."""
        conf = shared_floor(self, float(self.params["conf"]))
        image = load_rgb(image_path)
        height, width = image.shape[:2]
        canvas, gain, pad = letterbox(image, self.imgsz, 114)
        blob = np.ascontiguousarray(canvas.transpose(2, 0, 1)[None], dtype=np.float32) / 255.0
        output = self.session.run(None, {self.input_name: blob})[0]
        xyxy, score, cls = decode_yolov8(output, conf)
        keep = nms_xyxy(xyxy, score, self.iou, self.max_det)
        boxes = unletterbox_xyxy(xyxy[keep], gain, pad, width, height)
        return {"xyxy": boxes.tolist(), "score": score[keep].tolist(),
                "label": [self.labels[int(c)] for c in cls[keep]]}

    def detect(self, image_path: str, page: dict) -> list[dict]:
        return self.from_pass(self.params, self.model_pass(image_path))

    @staticmethod
    def from_pass(params: dict, out: dict) -> list[dict]:
        """The pass's boxes above this variant's conf."""
        score = np.asarray(out["score"], dtype=np.float32)  # decode compares float32 scores with conf
        boxes = np.asarray(out["xyxy"], dtype=np.float64).reshape(-1, 4)
        return [{"bbox_xyxy": boxes[i].tolist(), "label": out["label"][i], "score": float(score[i]),
                 "order": None, "text": None}
                for i in np.flatnonzero(score > float(params["conf"]))]

    def close(self) -> None:
        self.session = None


if __name__ == "__main__":
    _loop.main(DellDetector)
