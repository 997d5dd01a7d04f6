"""Fake paddleocr 3.7: LayoutDetection and PaddleOCRVL with the real constructor checks and result JSON.

Results replay the real serialised outputs in ../shared/formats (LayoutAnalysisResult for V2/V3,
DetResult for PP-DocLayout_plus-L, PaddleOCRVLResult), scaled from the 2000x3000 sample
to the input image. Like the real wrappers: unknown keywords raise ValueError, the
constructor "downloads" (fails offline) unless model_dir or the PaddleX cache has the
model, predict() returns a list with one result per image, `.json` is {"res": {...}}.
"""

import copy
import os

import numpy as np
from PIL import Image

import _fake_control as _c

__version__ = "3.7.0"
__all__ = ["LayoutDetection", "PaddleOCRVL"]

_COMMON = {"device", "engine", "engine_config", "enable_hpi", "use_tensorrt", "precision", "enable_mkldnn",
           "mkldnn_cache_capacity", "cpu_threads", "enable_cinn"}
_SAMPLE_W, _SAMPLE_H = 2000, 3000
_NO_SOURCE = ("Encounter exception when download model from bos. No model source is available! "
              "Please check network or use local model files!")


def _check_kwargs(kwargs, allowed):
    for name in kwargs:
        if name not in allowed | _COMMON:
            raise ValueError(f"Unknown argument: {name}")


def _weights_available(model_name, model_dir):
    _c.record("paddlex.env", model_source_check_disabled=os.environ.get("PADDLE_PDX_DISABLE_MODEL_SOURCE_CHECK"),
              hf_offline=os.environ.get("HF_HUB_OFFLINE"))
    if os.environ.get("FAKE_PADDLE_INIT_ERROR"):
        # what a wheel without kernels for the card (or a broken CUDA) raises while building the predictor
        raise RuntimeError(os.environ["FAKE_PADDLE_INIT_ERROR"])
    if model_dir is not None:
        if not os.path.isdir(model_dir):
            raise FileNotFoundError(f"The model directory {model_dir} does not exist")
        return
    home = os.environ.get("PADDLE_PDX_CACHE_HOME") or os.path.expanduser("~/.paddlex")
    if not os.path.isdir(os.path.join(home, "official_models", model_name)):
        raise Exception(_NO_SOURCE)


def _inputs(input):
    return [input] if isinstance(input, (str, os.PathLike)) else list(input)


def _open(path):
    if _c.should_raise(path):
        raise RuntimeError("(PreconditionNotMet) Cannot allocate 512.000000MB memory on GPU 0")
    with Image.open(path) as im:
        return np.asarray(im.convert("RGB"))[:, :, ::-1]  # paddlex keeps BGR in input_img


class _Result(dict):
    """dict subclass like paddlex BaseResult; `.json` drops input_img and wraps in {"res": ...}."""

    _json_drop = ("input_img",)

    @property
    def json(self):
        return {"res": {k: copy.deepcopy(v) for k, v in self.items() if k not in self._json_drop}}


class LayoutDetection:
    _ALLOWED = {"model_name", "model_dir", "img_size", "threshold", "layout_nms", "layout_unclip_ratio",
                "layout_merge_bboxes_mode"}

    def __init__(self, *, model_name=None, model_dir=None, **kwargs):
        _check_kwargs(kwargs, self._ALLOWED)
        self.model_name = model_name or "PP-DocLayout_plus-L"
        _weights_available(self.model_name, model_dir)
        self.threshold = kwargs.get("threshold")
        self.device = kwargs.get("device")
        _c.record("LayoutDetection", model_name=self.model_name, model_dir=model_dir, **kwargs)

    def predict(self, input, batch_size=None, threshold=None, **kwargs):
        if _c.no_kernels(self.device):
            raise RuntimeError("(External) CUDA error(209), no kernel image is available for execution on the device.")
        paths = _inputs(input)
        _c.record("LayoutDetection.predict", n=len(paths), batch_size=batch_size, threshold=threshold, **kwargs)
        plus_l = self.model_name == "PP-DocLayout_plus-L"
        sample = _c.load("paddleocr_layout_detection.plus_l.res.json" if plus_l else "paddleocr_layout_detection.res.json")
        thr = threshold if threshold is not None else (self.threshold if self.threshold is not None else 0.5)
        out = []
        for path in paths:
            img = _open(path)
            h, w = img.shape[:2]
            sx, sy = w / _SAMPLE_W, h / _SAMPLE_H
            boxes = []
            for box in sample["boxes"]:
                if box["score"] < thr:
                    continue
                b = dict(box)
                x0, y0, x1, y1 = box["coordinate"]
                coord = [x0 * sx, y0 * sy, x1 * sx, y1 * sy]
                # V2/V3 round to int (LayoutAnalysisProcess); plus-L keeps float32 values
                b["coordinate"] = [float(np.float32(v)) for v in coord] if plus_l else [int(round(v)) for v in coord]
                if "polygon_points" in b:
                    b["polygon_points"] = [[px * sx, py * sy] for px, py in b["polygon_points"]]
                boxes.append(b)
            out.append(_Result(input_path=str(path), page_index=None, input_img=img, boxes=boxes))
        return out


class _Block:
    """PaddleOCRVLBlock in memory: attributes, not a dict (only `.json` gives dicts)."""

    def __init__(self, d):
        self.label, self.bbox, self.content = d["block_label"], d["block_bbox"], d["block_content"]
        self.group_id = d["group_id"]


class _VLResult(_Result):
    _json_drop = ("input_img", "imgs_in_doc", "table_res_list", "doc_preprocessor_res", "spotting_res")

    def __init__(self, serialised, **kw):
        super().__init__(**kw)
        self._serialised = serialised

    @property
    def json(self):
        return {"res": copy.deepcopy(self._serialised)}


class PaddleOCRVL:
    _ALLOWED = {"pipeline_version", "layout_detection_model_name", "layout_detection_model_dir", "layout_threshold",
                "layout_nms", "layout_unclip_ratio", "layout_merge_bboxes_mode", "vl_rec_model_name",
                "vl_rec_model_dir", "vl_rec_backend", "vl_rec_server_url", "vl_rec_max_concurrency",
                "vl_rec_api_model_name", "vl_rec_api_key", "doc_orientation_classify_model_name",
                "doc_orientation_classify_model_dir", "doc_unwarping_model_name", "doc_unwarping_model_dir",
                "use_doc_orientation_classify", "use_doc_unwarping", "use_layout_detection",
                "use_chart_recognition", "use_seal_recognition", "use_ocr_for_image_block", "format_block_content",
                "merge_layout_blocks", "markdown_ignore_labels", "use_queues", "paddlex_config"}

    def __init__(self, pipeline_version="v1.6", **kwargs):
        _check_kwargs(kwargs, self._ALLOWED)
        if pipeline_version not in ("v1", "v1.5", "v1.6"):
            raise ValueError(f"Invalid pipeline version: {pipeline_version}")
        layout_name = kwargs.get("layout_detection_model_name") or ("PP-DocLayoutV2" if pipeline_version == "v1" else "PP-DocLayoutV3")
        vl_name = kwargs.get("vl_rec_model_name") or {"v1": "PaddleOCR-VL-0.9B", "v1.5": "PaddleOCR-VL-1.5-0.9B",
                                                      "v1.6": "PaddleOCR-VL-1.6-0.9B"}[pipeline_version]
        _weights_available(layout_name, kwargs.get("layout_detection_model_dir"))
        if kwargs.get("vl_rec_backend", "native") in (None, "native"):
            _weights_available(vl_name, kwargs.get("vl_rec_model_dir"))
        self.device = kwargs.get("device")
        _c.record("PaddleOCRVL", pipeline_version=pipeline_version, **kwargs)

    def predict(self, input, **kwargs):
        """A list, like the real wrapper (``list(self.predict_iter(...))``, paddleocr_vl.py:157-214)."""
        _c.record("PaddleOCRVL.predict", n=len(_inputs(input)), **kwargs)
        return list(self._results(_inputs(input)))

    def predict_iter(self, input, **kwargs):
        """The paddlex generator: one result per page as the page's VLM work is done (:100-155)."""
        _c.record("PaddleOCRVL.predict_iter", n=len(_inputs(input)), **kwargs)
        return self._results(_inputs(input))

    def _results(self, paths):
        if _c.no_kernels(self.device):
            raise RuntimeError("(External) CUDA error(209), no kernel image is available for execution on the device.")
        # The layout model reads and detects every page of the call first (an unreadable page
        # fails them all), then the VLM reads each page's blocks: that is where a page can hang.
        imgs = [_open(path) for path in paths]
        for path, img in zip(paths, imgs):
            _c.hang_if_asked(path)
            _c.record("PaddleOCRVL.page", path=os.path.basename(str(path)))
            h, w = img.shape[:2]
            sx, sy = w / _SAMPLE_W, h / _SAMPLE_H
            res = _c.load("paddleocr_vl.res.json")
            res.update(input_path=str(path), width=w, height=h)

            def scale(c):
                return [int(round(c[0] * sx)), int(round(c[1] * sy)), int(round(c[2] * sx)), int(round(c[3] * sy))]

            for block in res["parsing_res_list"]:
                block["block_bbox"] = scale(block["block_bbox"])
                block.pop("block_polygon_points", None)
            for box in res["layout_det_res"]["boxes"]:
                box["coordinate"] = scale(box["coordinate"])
                box.pop("polygon_points", None)
            yield _VLResult(res, input_path=str(path), page_index=None, page_count=None, width=w, height=h,
                            parsing_res_list=[_Block(b) for b in res["parsing_res_list"]],
                            layout_det_res=_Result(res["layout_det_res"]), input_img=img)
