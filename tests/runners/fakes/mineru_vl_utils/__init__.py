"""Fake mineru_vl_utils 2.0.7: MinerUClient replaying real ContentBlock output, normalised 0..1 bboxes.

An image whose top-left pixel is pure red makes the fake "model" raise (a page that fails).
"""

import _fake_control as _c

from .structs import ContentBlock, ExtractResult

__version__ = "2.0.7"
__all__ = ["MinerUClient", "ContentBlock", "ExtractResult"]

_BACKENDS = ("http-client", "transformers", "mlx-engine", "lmdeploy-engine", "vllm-engine",
             "vllm-async-engine", "llama-cpp-engine")


class MinerUClient:
    def __init__(self, backend, model_name=None, server_url=None, server_headers=None, model=None,
                 processor=None, vllm_llm=None, vllm_async_llm=None, lmdeploy_engine=None,
                 llama_cpp_engine=None, model_path=None, prompts=None, system_prompt="You are a helpful assistant.",
                 sampling_params=None, layout_image_size=(1036, 1036), min_image_edge=28,
                 max_image_edge_ratio=50, simple_post_process=False, handle_equation_block=True,
                 abandon_list=False, abandon_paratext=False, image_analysis=False, incremental_priority=False,
                 max_concurrency=100, executor=None, batch_size=0, http_timeout=600, connect_timeout=10,
                 max_connections=None, max_keepalive_connections=20, keepalive_expiry=5, use_tqdm=True,
                 debug=False, max_retries=3, retry_backoff_factor=0.5, skip_model_name_checking=False,
                 scored=False, enable_table_formula_eq_wrap=False, enable_cross_page_table_merge=False,
                 *, isolate_block_errors=False):
        if backend not in _BACKENDS:
            raise ValueError(f"Unsupported backend: {backend}")
        if backend == "transformers" and (model is None or processor is None) and not model_path:
            raise ValueError("model_path must be provided when model or processor is None.")
        self.backend, self.model, self.batch_size = backend, model, batch_size
        _c.record("MinerUClient", backend=backend, batch_size=batch_size, use_tqdm=use_tqdm,
                  model_device=getattr(model, "device", None))

    @staticmethod
    def _blocks(image, example: str) -> ExtractResult:
        if image.mode != "RGB":
            image = image.convert("RGB")
        if image.getpixel((0, 0)) == (255, 0, 0):
            raise RuntimeError("CUDA error: an illegal memory access was encountered")
        return ExtractResult([ContentBlock(**b) for b in _c.load(example)])

    def layout_detect(self, image, priority=None, scored=None):
        return self.batch_layout_detect([image])[0]

    def batch_layout_detect(self, images, priority=None, scored=None):
        _c.record("batch_layout_detect", n=len(images))
        return [self._blocks(im, "mineru_layout_detect.example.json") for im in images]

    def two_step_extract(self, image, priority=None, not_extract_list=None, scored=None, image_analysis=None):
        return self.batch_two_step_extract([image])[0]

    def batch_two_step_extract(self, images, priority=None, not_extract_list=None, scored=None,
                               image_analysis=None):
        _c.record("batch_two_step_extract", n=len(images))
        return [self._blocks(im, "mineru_two_step_extract.example.json") for im in images]
