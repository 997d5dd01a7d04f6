"""Fake mineru_vl_utils.mineru_client (2.0.7): sampling params, the client and its layout-answer parser.

The fake "model" answers in MinerU2.5's raw layout format, built from the real example
output (0..1000 integer coordinates); the helper parses it with the library's regex and
logs the raw answer at DEBUG through loguru, as the real ``parse_layout_output`` does.
An image whose top-left pixel is pure blue gets a garbage answer ($FAKE_MINERU_ANSWER, default a
refusal with no layout block); pure red makes the model raise: on the GPU an illegal memory
access, after which every call of the process fails (CUDA's sticky errors), on the CPU a plain
error of that page.
"""

import os
import re
from dataclasses import dataclass

from loguru import logger

import _fake_control as _c

from .structs import BLOCK_TYPES, ContentBlock, ExtractResult

_layout_re = (
    r"<\|box_start\|>(\d+)\s+(\d+)\s+(\d+)\s+(\d+)"
    r"<\|box_end\|><\|ref_start\|>(\w+?)<\|ref_end\|>"
    r"(?:(<\|rotate_(?:up|right|down|left)\|>))?"
    r"(.*?)(?=<\|box_start\|>|$)"
)
# torch's text for cudaErrorIllegalAddress, a sticky error: the CUDA context of the process is
# lost and every later CUDA call fails with it until the process exits (CUDA runtime API docs).
_ILLEGAL_ACCESS = ("CUDA error: an illegal memory access was encountered\nCUDA kernel errors might be asynchronously "
                   "reported at some other API call, so the stacktrace below might be incorrect.")
_POISONED: list = []
_BACKENDS = ("http-client", "transformers", "mlx-engine", "lmdeploy-engine", "vllm-engine",
             "vllm-async-engine", "llama-cpp-engine")


@dataclass
class SamplingParams:
    temperature: float | None = None
    top_p: float | None = None
    top_k: int | None = None
    presence_penalty: float | None = None
    frequency_penalty: float | None = None
    repetition_penalty: float | None = None
    no_repeat_ngram_size: int | None = None
    max_new_tokens: int | None = None


class MinerUSamplingParams(SamplingParams):
    def __init__(self, temperature=0.0, top_p=0.01, top_k=1, presence_penalty=0.0, frequency_penalty=0.0,
                 repetition_penalty=1.0, no_repeat_ngram_size=100, max_new_tokens=None):
        super().__init__(temperature, top_p, top_k, presence_penalty, frequency_penalty, repetition_penalty,
                         no_repeat_ngram_size, max_new_tokens)


DEFAULT_SAMPLING_PARAMS = {
    "table": MinerUSamplingParams(presence_penalty=1.0, frequency_penalty=0.005),
    "equation": MinerUSamplingParams(presence_penalty=1.0, frequency_penalty=0.05),
    "image": MinerUSamplingParams(presence_penalty=1.0, frequency_penalty=0.05),
    "chart": MinerUSamplingParams(presence_penalty=1.0, frequency_penalty=0.05),
    "[default]": MinerUSamplingParams(presence_penalty=1.0, frequency_penalty=0.05),
    "[layout]": MinerUSamplingParams(),
    "[cross_page_table_merge]": MinerUSamplingParams(presence_penalty=1.0, frequency_penalty=0.05),
}


def _raw_answer(example: str) -> str:
    out = []
    for b in _c.load(example):
        x0, y0, x1, y1 = (round(v * 1000) for v in b["bbox"])
        out.append(f"<|box_start|>{x0} {y0} {x1} {y1}<|box_end|><|ref_start|>{b['type']}<|ref_end|><|rotate_up|>")
    return "\n".join(out)


class MinerUClientHelper:
    def parse_layout_output(self, output: str) -> list:
        logger.debug("Layout raw output: \n{}", output)
        blocks, matched = [], False
        for match in re.finditer(_layout_re, output, re.DOTALL):
            matched = True
            x1, y1, x2, y2, ref_type = match.groups()[:5]
            if ref_type not in BLOCK_TYPES:
                logger.warning("Unknown block type in layout output line: {}", match.group(0))
                continue
            blocks.append(ContentBlock(ref_type, [int(v) / 1000.0 for v in (x1, y1, x2, y2)], angle=0))
        if not matched and output.strip():
            logger.warning("Layout output does not match expected format: {}", output)
        return blocks


class MinerUClient:
    def __init__(self, backend, model_name=None, server_url=None, server_headers=None, model=None,
                 processor=None, vllm_llm=None, vllm_async_llm=None, lmdeploy_engine=None,
                 llama_cpp_engine=None, model_path=None, prompts=None, system_prompt="You are a helpful assistant.",
                 sampling_params=DEFAULT_SAMPLING_PARAMS, layout_image_size=(1036, 1036), min_image_edge=28,
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
        self.backend, self.model, self.processor, self.batch_size = backend, model, processor, batch_size
        self.sampling_params = sampling_params
        self.helper = MinerUClientHelper()
        layout = sampling_params.get("[layout]")
        _c.record("MinerUClient", backend=backend, batch_size=batch_size, use_tqdm=use_tqdm,
                  model_device=getattr(model, "device", None),
                  layout_max_new_tokens=getattr(layout, "max_new_tokens", None),
                  text_max_new_tokens=getattr(sampling_params.get("[default]"), "max_new_tokens", None),
                  no_repeat_ngram_size=getattr(layout, "no_repeat_ngram_size", None))

    def _answer(self, image, example: str) -> str:
        if image.mode != "RGB":
            image = image.convert("RGB")
        if image.getpixel((0, 0)) == (255, 0, 0):
            if not str(getattr(self.model, "device", "cpu")).startswith("cuda"):
                raise RuntimeError("index out of range in self")
            _POISONED.append(True)
            raise RuntimeError(_ILLEGAL_ACCESS)
        if image.getpixel((0, 0)) == (0, 0, 255):
            return os.environ.get("FAKE_MINERU_ANSWER", "Sorry, I cannot read this page.")
        return _raw_answer(example)

    def _layout(self, images, example):
        if _POISONED:  # CUDA's sticky errors: every later call of the process fails the same way
            raise RuntimeError(_ILLEGAL_ACCESS)
        if _c.no_kernels(getattr(self.model, "device", None)):
            raise RuntimeError("CUDA error: no kernel image is available for execution on the device")
        padding = getattr(getattr(self.processor, "tokenizer", None), "padding_side", None)
        _c.record("batch_predict", n=len(images), padding_side=padding)
        answers = [self._answer(im, example) for im in images]
        return [ExtractResult(self.helper.parse_layout_output(a)) for a in answers]

    def layout_detect(self, image, priority=None, scored=None):
        return self.batch_layout_detect([image])[0]

    def batch_layout_detect(self, images, priority=None, scored=None):
        _c.record("batch_layout_detect", n=len(images))
        return self._layout(images, "mineru_layout_detect.example.json")

    def two_step_extract(self, image, priority=None, not_extract_list=None, scored=None, image_analysis=None):
        return self.batch_two_step_extract([image])[0]

    def batch_two_step_extract(self, images, priority=None, not_extract_list=None, scored=None,
                               image_analysis=None):
        _c.record("batch_two_step_extract", n=len(images))
        results = self._layout(images, "mineru_two_step_extract.example.json")
        contents = [b.get("content") for b in _c.load("mineru_two_step_extract.example.json")]
        for blocks in results:
            for block, content in zip(blocks, contents):
                block["content"] = content
        return results
