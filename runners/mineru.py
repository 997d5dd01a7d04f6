"""Runner: MinerU2.5 (opendatalab/MinerU2.5-2509-1.2B) layout through transformers + mineru_vl_utils.

Loads the Qwen2-VL model and processor once (the way MinerU's own transformers backend
does), hands them to ``MinerUClient(backend="transformers")`` and sends pages in batches
(``batch_layout_detect``; ``batch_two_step_extract`` when mode is "two_step"). MinerU
bboxes are normalised 0..1 and are scaled to page pixels here. Besides run_report.json it
writes run_meta.json with ``cuda_available`` (operators look for it there).
"""

from __future__ import annotations

import re
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _loop  # noqa: E402
from _device import choose, torch_status  # noqa: E402
from _image import load_pil_rgb  # noqa: E402
from _weights import resolve_hf_model, stage_to_local  # noqa: E402

MODES = ("layout", "two_step")


def _version_tuple(text: str) -> tuple[int, ...]:
    return tuple(int(v) for v in re.findall(r"\d+", str(text))[:2])


def blocks_to_regions(blocks, width: int, height: int) -> list[dict]:
    """MinerU ContentBlocks (normalised [x1,y1,x2,y2]) -> regions in pixels; list order is reading order."""
    regions = []
    for i, block in enumerate(blocks):
        x0, y0, x1, y1 = (float(v) for v in block["bbox"])
        regions.append({"bbox_xyxy": [x0 * width, y0 * height, x1 * width, y1 * height],
                        "label": str(block["type"]), "score": None, "order": i + 1,
                        "text": block.get("content")})
    return regions


class MinerUDetector:
    def __init__(self, params: dict, device: str, allow_cpu_fallback: bool):
        if params["mode"] not in MODES:
            raise ValueError(f"mineru: mode must be one of {MODES}, got {params['mode']!r}")
        status = torch_status()
        self.device_used = choose(device, allow_cpu_fallback, status["cuda_available"],
                                  "torch.cuda.is_available() is False", bool(params["require_cuda"]))
        try:
            import transformers
            from mineru_vl_utils import MinerUClient
            from transformers import AutoProcessor, Qwen2VLForConditionalGeneration
        except ImportError as exc:
            raise _loop.MissingDependency(f"mineru: {exc}; install mineru-vl-utils[transformers]") from exc
        import mineru_vl_utils

        path = resolve_hf_model(params["model_dir"], params["hub_id"], params["cache_dir"], params["revision"])
        if params["stage_weights"]:
            path = stage_to_local(path)
        # transformers renamed torch_dtype to dtype in 4.56 (MinerU's own loader does the same switch).
        dtype_key = "dtype" if _version_tuple(transformers.__version__) >= (4, 56) else "torch_dtype"
        torch_device = "cuda:0" if self.device_used == "cuda" else "cpu"
        try:
            model = Qwen2VLForConditionalGeneration.from_pretrained(
                str(path), device_map={"": torch_device}, **{dtype_key: params["dtype"]})
            processor = AutoProcessor.from_pretrained(str(path), use_fast=True)
        except OSError as exc:  # incomplete snapshot: missing config/weights files
            raise _loop.MissingDependency(f"mineru: cannot load the model from {path}: {exc}") from exc
        self.client = MinerUClient(backend="transformers", model=model, processor=processor,
                                   batch_size=int(params["batch_size"]), use_tqdm=False)
        self.mode = params["mode"]
        self.info = {"model": params["hub_id"] or Path(params["model_dir"]).name, "model_path": str(path),
                     "mode": self.mode, "transformers_version": transformers.__version__,
                     "mineru_vl_utils_version": getattr(mineru_vl_utils, "__version__", None), **status}

    def detect(self, image_path: str, page: dict) -> list[dict]:
        return self.detect_batch([(image_path, page)])[0]

    def detect_batch(self, items: list[tuple[str, dict]]) -> list[list[dict]]:
        images = [load_pil_rgb(path) for path, _ in items]
        if self.mode == "two_step":
            results = self.client.batch_two_step_extract(images)
        else:
            results = self.client.batch_layout_detect(images)
        return [blocks_to_regions(blocks, *image.size) for blocks, image in zip(results, images)]

    def close(self) -> None:
        self.client = None


META_KEYS = ("model", "model_path", "mode", "device_used", "cuda_available", "gpu_name", "compute_capability",
             "arch_supported", "torch_version", "torch_cuda", "transformers_version", "mineru_vl_utils_version",
             "state", "counts", "page_totals", "empty_share", "flags", "updated")


def write_run_meta(job: dict, report: dict) -> None:
    """out_dir/run_meta.json: cuda_available and what ran where, mirrored from the run report.

    Written each time the run report is (pages finishing, the end), never when the model
    refused to start: a source folder must only exist for a member that ran.
    """
    meta = {"stage": job["stage"], "variant": job["variant"], "device_requested": job.get("device", "auto"),
            **{k: report[k] for k in META_KEYS if k in report}}
    _loop.atomic_write_json(Path(job["out_dir"]) / "run_meta.json", meta)


if __name__ == "__main__":
    _loop.main(MinerUDetector, on_flush=write_run_meta)
