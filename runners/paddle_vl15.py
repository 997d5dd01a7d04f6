"""Runner: PaddleOCR-VL 1.5 doc parser through paddleocr's ``PaddleOCRVL`` pipeline.

Regions are the layout boxes of ``layout_det_res`` (label, score, reading order); each one
carries as ``text`` the content the VLM produced for its ``parsing_res_list`` block (tables
as HTML, formulas as LaTeX), so the recognised text is kept. Results are read through the
library's own serialiser (``res.json["res"]``), whose shape is pinned in ../shared/formats.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _loop  # noqa: E402
from _checkpoint import check_paddle_folder  # noqa: E402
from _device import choose, paddle_cuda_usable, paddle_status  # noqa: E402
from _errors import MissingDependency  # noqa: E402
from _weights import paddlex_cache_dir, paddlex_prestage_hint, stage_to_local  # noqa: E402
from paddle_layout import raise_if_no_model_source, set_offline  # noqa: E402

# A parsing block is the same box as its layout box (block_bbox comes from coordinate);
# a loose IoU floor only guards against rounding after the pipeline's own rescaling.
MATCH_IOU = 0.9


def _iou_matrix(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """(N, M) IoU of xyxy boxes a (N, 4) and b (M, 4)."""
    if len(a) == 0 or len(b) == 0:
        return np.zeros((len(a), len(b)))
    ix0 = np.maximum(a[:, None, 0], b[None, :, 0])
    iy0 = np.maximum(a[:, None, 1], b[None, :, 1])
    ix1 = np.minimum(a[:, None, 2], b[None, :, 2])
    iy1 = np.minimum(a[:, None, 3], b[None, :, 3])
    inter = np.clip(ix1 - ix0, 0, None) * np.clip(iy1 - iy0, 0, None)
    area_a = (a[:, 2] - a[:, 0]) * (a[:, 3] - a[:, 1])
    area_b = (b[:, 2] - b[:, 0]) * (b[:, 3] - b[:, 1])
    union = area_a[:, None] + area_b[None, :] - inter
    return np.divide(inter, union, out=np.zeros_like(inter, dtype=float), where=union > 0)


def regions_from_vl(res: dict, width: int, height: int) -> list[dict]:
    """Regions from one serialised PaddleOCRVLResult (``res.json["res"]``), in original pixels.

    Every layout box becomes a region; a parsing block matched to it (same label, IoU >= 0.9)
    gives its content as ``text`` (null where the pipeline read nothing: images, charts, the
    later blocks of a merged group, whose text the group's first block holds) and its
    ``block_order``. A layout box with no block (the pipeline's overlap filter dropped it:
    reference, tiny, duplicate) has no order: its layout ``order`` numbers the boxes before
    that filter, a sequence ``block_order`` does not follow.
    Blocks with no layout box (the pipeline built them) are kept as regions without a score.
    """
    sx, sy = width / float(res.get("width") or width), height / float(res.get("height") or height)
    scale = np.array([sx, sy, sx, sy])
    boxes = res["layout_det_res"]["boxes"]
    blocks = res["parsing_res_list"]
    box_xyxy = np.array([b["coordinate"] for b in boxes], dtype=float).reshape(-1, 4)
    block_xyxy = np.array([b["block_bbox"] for b in blocks], dtype=float).reshape(-1, 4)
    same_label = (np.array([b["block_label"] for b in blocks], dtype=object)[:, None]
                  == np.array([b["label"] for b in boxes], dtype=object)[None, :]).reshape(len(blocks), len(boxes))
    iou = np.where(same_label, _iou_matrix(block_xyxy, box_xyxy), 0.0)
    block_for_box: dict[int, int] = {}
    for bi in np.argsort(-iou.max(axis=1, initial=0.0), kind="stable"):  # best matches claim first
        if iou.shape[1] == 0:
            break
        candidates = np.where(iou[bi] >= MATCH_IOU)[0]
        free = [int(j) for j in candidates[np.argsort(-iou[bi, candidates])] if int(j) not in block_for_box]
        if free:
            block_for_box[free[0]] = int(bi)
    regions = []
    for j, box in enumerate(boxes):
        block = blocks[block_for_box[j]] if j in block_for_box else None
        regions.append({
            "bbox_xyxy": (box_xyxy[j] * scale).tolist(), "label": box["label"], "score": float(box["score"]),
            "order": block.get("block_order") if block is not None else None,
            "text": (block.get("block_content") or None) if block is not None else None,
        })
    matched = set(block_for_box.values())
    for bi, block in enumerate(blocks):
        if bi not in matched:
            regions.append({"bbox_xyxy": (block_xyxy[bi] * scale).tolist(), "label": block["block_label"],
                            "score": None, "order": block.get("block_order"), "text": block.get("block_content") or None})
    return regions


LAYOUT_MODEL = {"v1": "PP-DocLayoutV2", "v1.5": "PP-DocLayoutV3", "v1.6": "PP-DocLayoutV3"}
VL_MODEL = {"v1": "PaddleOCR-VL-0.9B", "v1.5": "PaddleOCR-VL-1.5-0.9B", "v1.6": "PaddleOCR-VL-1.6-0.9B"}


def locate_weights(params: dict) -> dict[str, Path]:
    """The two model folders the pipeline loads (layout, VLM), each checked; never a download.

    The VLM is not needed locally with a server backend (vl_rec_backend other than native).

    Raises:
        MissingDependency: naming which of the two models is missing, with the pre-stage command.
    """
    version = params["pipeline_version"]
    hint = paddlex_prestage_hint(f"PaddleOCRVL(pipeline_version='{version}')")
    wanted = {"layout_detection": params["layout_detection_model_name"] or LAYOUT_MODEL.get(version, "PP-DocLayoutV3")}
    if params["vl_rec_backend"] in ("", "native"):
        wanted["vl_rec"] = params["vl_rec_model_name"] or VL_MODEL.get(version, "PaddleOCR-VL-1.5-0.9B")
    found = {}
    for role, name in wanted.items():
        given = params[f"{role}_model_dir"]
        what = f"paddle_vl15: the {'layout model' if role == 'layout_detection' else 'VL recognition model'} {name}"
        if given:
            path = Path(given).expanduser()
            if not path.is_dir():
                raise MissingDependency(f"{what}: {role}_model_dir {path} does not exist; {hint}")
        else:
            path = paddlex_cache_dir(name)
            if not path.is_dir():
                raise MissingDependency(f"{what} is not in the PaddleX cache {path}; {hint} "
                                        f"or set {role}_model_dir")
        try:
            check_paddle_folder(path, hint)
        except MissingDependency as exc:
            raise MissingDependency(f"{what}: {exc}") from None
        found[role] = path
    return found


class PaddleVL15Detector:
    def __init__(self, params: dict, device: str, allow_cpu_fallback: bool):
        status = paddle_status()
        self.device_used = choose(device, allow_cpu_fallback, *paddle_cuda_usable(status))
        weights = locate_weights(params)  # before importing paddleocr: no download, ever
        set_offline()
        try:
            import paddleocr
            from paddleocr import PaddleOCRVL
        except ImportError as exc:
            raise MissingDependency(f"paddle_vl15: {exc}; install paddleocr[doc-parser]") from exc
        kwargs = {"pipeline_version": params["pipeline_version"],
                  "device": "gpu:0" if self.device_used == "cuda" else "cpu",
                  "vl_rec_backend": params["vl_rec_backend"],
                  # keep page geometry: unwarping/rotation would move boxes off the original pixels
                  "use_doc_orientation_classify": False, "use_doc_unwarping": False}
        for key in ("layout_detection_model_name", "vl_rec_model_name", "vl_rec_server_url"):
            if params[key]:
                kwargs[key] = params[key]
        for role, path in weights.items():
            kwargs[f"{role}_model_dir"] = str(stage_to_local(path) if params["stage_weights"] else path)
        if params["layout_threshold"] > 0:
            kwargs["layout_threshold"] = float(params["layout_threshold"])
        try:
            self.pipeline = PaddleOCRVL(**kwargs)
        except Exception as exc:
            raise_if_no_model_source(exc, "paddle_vl15: a model of the pipeline (not the layout or VL model "
                                     "checked above: orientation/unwarping/chart)", paddlex_prestage_hint(
                                         f"PaddleOCRVL(pipeline_version='{params['pipeline_version']}')"))
            raise  # CUDA init, kernels for this GPU, corrupt weights, a bug: its own message
        names = {role: path.name for role, path in weights.items()}
        self.info = {"model": f"PaddleOCR-VL-{params['pipeline_version']} ({', '.join(names.values())})",
                     "model_dirs": {role: str(path) for role, path in weights.items()},
                     "paddleocr_version": paddleocr.__version__, "pipeline_kwargs": kwargs, **status}

    def detect(self, image_path: str, page: dict) -> list[dict]:
        return list(self.detect_batch([(image_path, page)]))[0]

    def detect_batch(self, items: list[tuple[str, dict]]):
        """One page's regions at a time, as the pipeline finishes each page (a generator).

        ``predict_iter`` is the library's own generator (``predict`` is ``list()`` of it): the
        layout model sees the whole batch, then the VLM reads page after page, so each page is
        written and reported as soon as it is done, the no-progress limit restarts with it, and
        a page that hangs or crashes loses only the pages after it.
        """
        n = 0
        for res, (_, page) in zip(self.pipeline.predict_iter([path for path, _ in items]), items):
            n += 1
            yield regions_from_vl(res.json["res"], int(page["width"]), int(page["height"]))
        if n != len(items):
            raise RuntimeError(f"PaddleOCRVL returned {n} results for {len(items)} images")

    def close(self) -> None:
        self.pipeline = None


if __name__ == "__main__":
    _loop.main(PaddleVL15Detector)
