"""Runner: MinerU2.5 (opendatalab/MinerU2.5-2509-1.2B) layout through transformers + mineru_vl_utils.

Loads the Qwen2-VL model and processor once, the way mineru-vl-utils 2.x does
(``transformers_loading.load_transformers_model``: the checkpoint's tie_word_embeddings is
copied onto the text config, else transformers 5.10.1-5.15.1 leave ``lm_head`` randomly
initialised for MinerU2.5-Pro-style checkpoints), then checks that no weight was newly
initialised and refuses otherwise. The tokenizer pads on the left (batched generation of a
decoder-only model; right padding corrupts two_step text). Pages go to
``MinerUClient(backend="transformers")`` in batches (``batch_layout_detect``;
``batch_two_step_extract`` when mode is "two_step") with generation limits from the params.
MinerU bboxes are normalised 0..1 and are scaled to page pixels here; a container block and
the blocks it holds become one region (`_CONTAINERS`). A page whose answer
holds no layout block is reported ``empty`` with the start of that answer. Besides
run_report.json it writes run_meta.json with ``cuda_available`` (operators look for it there).
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _loop  # noqa: E402
from _checkpoint import check_hf_folder  # noqa: E402
from _device import choose, cuda_usable, torch_status  # noqa: E402
from _errors import MissingDependency  # noqa: E402
from _image import load_pil_rgb  # noqa: E402
from _regions import NoRegions  # noqa: E402
from _weights import hf_prestage_hint, resolve_hf_model, stage_to_local  # noqa: E402
from _writes import atomic_write_json  # noqa: E402

MODES = ("layout", "two_step")
LOG_PREVIEW = 300  # characters of a library log message kept (raw answers can be megabytes)


def _version_tuple(text: str) -> tuple[int, ...]:
    return tuple(int(v) for v in re.findall(r"\d+", str(text))[:2])


# MinerU2.5 answers a container (structs.BlockType "containers": list, image_block,
# equation_block) beside the blocks it holds: batch_layout_detect returns them side by side,
# batch_two_step_extract too for lists and image blocks. The MinerU stack makes each container
# and what it holds one unit, the container's box:
# - mineru-vl-utils 2.0.7 MinerUClientHelper.prepare_for_extract drops an image_caption that an
#   image, chart or image_block covers (>= 0.9 of the caption's area);
# - mineru-vl-utils 2.0.7 post_process.equation_block.do_handle_equation_block replaces the
#   equations an equation_block covers (> 0.9) by one equation with the block's box (one
#   equation: the block is dropped instead; one region either way, here the block's box);
# - MinerU's vlm_magic_model.fix_list_blocks nests the text blocks a list covers (>= 0.8; two_step
#   has made list_item text) in the list, and visual_magic_model_utils.absorb_image_block_members
#   the images and charts an image_block covers (>= 0.9) in the image block.
# Rows: (container types, types it holds, least share of a held block's area inside it).
_CONTAINERS = (
    ({"list"}, {"list_item", "text", "ref_text"}, 0.8),
    ({"image_block"}, {"image", "chart"}, 0.9),
    ({"image", "chart", "image_block"}, {"image_caption"}, 0.9),
    ({"equation_block"}, {"equation"}, 0.9),
)


def _share_inside(inner, outer) -> float:
    """Share of box `inner`'s area inside box `outer` (normalised [x1,y1,x2,y2]; 0 for no area)."""
    area = (inner[2] - inner[0]) * (inner[3] - inner[1])
    w = min(inner[2], outer[2]) - max(inner[0], outer[0])
    h = min(inner[3], outer[3]) - max(inner[1], outer[1])
    return w * h / area if area > 0 and w > 0 and h > 0 else 0.0


def _held_blocks(blocks) -> dict[int, list[int]]:
    """Container index -> indices of the blocks it holds (by `_CONTAINERS`), in answer order; a
    block goes to the first container that holds it, and a held block holds nothing itself (an
    image inside an image_block leaves the caption to the image_block, the region written)."""
    held: dict[int, list[int]] = {}
    taken = set()
    for containers, kinds, share in _CONTAINERS:
        for c, container in enumerate(blocks):
            if container["type"] not in containers or c in taken:
                continue
            for i, block in enumerate(blocks):
                if (i != c and i not in taken and block["type"] in kinds
                        and _share_inside(block["bbox"], container["bbox"]) >= share):
                    held.setdefault(c, []).append(i)
                    taken.add(i)
    return {c: sorted(items) for c, items in held.items()}


def blocks_to_regions(blocks, width: int, height: int) -> list[dict]:
    """MinerU ContentBlocks (normalised [x1,y1,x2,y2]) -> regions in pixels; list order is reading order.

    Each container and the blocks it holds are one region (`_CONTAINERS`): the container's box
    and label, and, when it has no content of its own (two_step extracts no list), the text of
    the blocks it holds, one per line.
    """
    held = _held_blocks(blocks)
    gone = {i for items in held.values() for i in items}
    regions = []
    for i, block in enumerate(blocks):
        if i in gone:
            continue
        x0, y0, x1, y1 = (float(v) for v in block["bbox"])
        text = block.get("content")
        if text is None and i in held:
            text = "\n".join(t for t in (blocks[j].get("content") for j in held[i]) if t) or None
        regions.append({"bbox_xyxy": [x0 * width, y0 * height, x1 * width, y1 * height],
                        "label": str(block["type"]), "score": None, "order": len(regions) + 1,
                        "text": text})
    return regions


def locate_weights(params: dict, download: bool = False) -> Path:
    """The model folder the runner would load, checked complete (no model library imported).

    Raises:
        MissingDependency: not cached / not there / half-copied, with the pre-stage command.
    """
    hint = ("copy the model folder there again or fix params.model_dir" if params["model_dir"]
            else hf_prestage_hint(params["hub_id"], params["cache_dir"]))
    path = resolve_hf_model(params["model_dir"], params["hub_id"], params["cache_dir"], params["revision"],
                            download=download)
    check_hf_folder(path, hint)
    return path


def quiet_library_log(level: str) -> None:
    """mineru-vl-utils logs every page's whole raw answer at DEBUG through loguru, whose default
    handler prints everything to stderr: keep `level` and above, each message cut short."""
    try:
        from loguru import logger
    except ImportError:
        return

    def short(record) -> bool:
        if len(record["message"]) > LOG_PREVIEW:
            record["message"] = record["message"][:LOG_PREVIEW] + f"... ({len(record['message'])} chars)"
        return True

    logger.remove()
    logger.add(sys.stderr, level=level, filter=short,
               format="[{time:HH:mm:ss}] mineru_vl_utils {level}: {message}")


def load_model(path: Path, torch_device: str, dtype: str):
    """Qwen2-VL as mineru-vl-utils 2.x loads it, plus proof that every weight came from the checkpoint.

    Raises:
        MissingDependency: a weight was newly initialised (the transformers version mishandles
            this checkpoint) or lm_head is not tied although the checkpoint says so.
    """
    import transformers
    from transformers import AutoConfig, PretrainedConfig, Qwen2VLForConditionalGeneration

    config = AutoConfig.from_pretrained(str(path))
    raw, _ = PretrainedConfig.get_config_dict(str(path))
    text_config = config.get_text_config(decoder=True)
    tied = raw.get("tie_word_embeddings")
    if tied is None:
        tied = getattr(text_config, "tie_word_embeddings", None)
    if tied is not None:  # transformers_loading.load_transformers_model does the same sync
        text_config.tie_word_embeddings = tied
        config.tie_word_embeddings = tied
    # transformers renamed torch_dtype to dtype in 4.56 (MinerU's own loader does the same switch).
    dtype_key = "dtype" if _version_tuple(transformers.__version__) >= (4, 56) else "torch_dtype"
    model, loading = Qwen2VLForConditionalGeneration.from_pretrained(
        str(path), config=config, device_map={"": torch_device}, output_loading_info=True, **{dtype_key: dtype})
    missing = sorted(loading.get("missing_keys") or [])
    fix = (f"transformers {transformers.__version__} left them randomly initialised; install a tested "
           "version (see the README's MinerU section: transformers >=5.16,<6 with mineru-vl-utils 2.0.x)")
    if missing:
        raise MissingDependency(
            f"mineru: {len(missing)} weight(s) of {path} were not in the checkpoint as loaded "
            f"({', '.join(missing[:3])}); {fix}")
    head, emb = model.get_output_embeddings(), model.get_input_embeddings()
    if tied and head is not None and head.weight.data_ptr() != emb.weight.data_ptr():
        raise MissingDependency(f"mineru: {path} ties lm_head to the embeddings but the loaded lm_head "
                                f"is a separate tensor; {fix}")
    return model


class MinerUDetector:
    def __init__(self, params: dict, device: str, allow_cpu_fallback: bool):
        if params["mode"] not in MODES:
            raise ValueError(f"mineru: mode must be one of {MODES}, got {params['mode']!r}")
        status = torch_status()
        self.device_used = choose(device, allow_cpu_fallback,
                                  *cuda_usable(status, "torch.cuda.is_available() is False"),
                                  bool(params["require_cuda"]))
        try:
            import transformers
            from mineru_vl_utils import MinerUClient
            from mineru_vl_utils.mineru_client import DEFAULT_SAMPLING_PARAMS, MinerUSamplingParams
            from transformers import AutoProcessor
        except ImportError as exc:
            raise MissingDependency(f"mineru: {exc}; install mineru-vl-utils[transformers]") from exc
        import mineru_vl_utils

        quiet_library_log(params["library_log_level"])
        path = locate_weights(params, download=True)
        if params["stage_weights"]:
            path = stage_to_local(path)
        torch_device = "cuda:0" if self.device_used == "cuda" else "cpu"
        model = load_model(path, torch_device, params["dtype"])
        processor = AutoProcessor.from_pretrained(str(path), use_fast=True)
        # Batched generation with a decoder-only model needs left padding; mineru-vl-utils pads
        # with padding=True and never sets the side, so the checkpoint's tokenizer config decides.
        processor.tokenizer.padding_side = "left"
        sampling = self._sampling_params(params, DEFAULT_SAMPLING_PARAMS, MinerUSamplingParams)
        self.client = MinerUClient(backend="transformers", model=model, processor=processor,
                                   batch_size=int(params["batch_size"]), use_tqdm=False,
                                   sampling_params=sampling)
        self.answers: list[str] = []
        self._hook_layout_parser()
        self.mode = params["mode"]
        self.max_new_tokens = int(params["max_new_tokens"])
        self.tokenizer = processor.tokenizer
        model_name = Path(params["model_dir"]).name if params["model_dir"] else params["hub_id"]
        self.info = {"model": model_name, "model_dir": params["model_dir"] or None, "model_path": str(path),
                     "mode": self.mode, "padding_side": "left",
                     "generation": {"max_new_tokens": self.max_new_tokens,
                                    "content_max_new_tokens": int(params["content_max_new_tokens"]),
                                    "no_repeat_ngram_size": int(params["no_repeat_ngram_size"]),
                                    "repetition_penalty": float(params["repetition_penalty"])},
                     "transformers_version": transformers.__version__,
                     "mineru_vl_utils_version": getattr(mineru_vl_utils, "__version__", None), **status}

    @staticmethod
    def _sampling_params(params: dict, defaults: dict, cls) -> dict:
        """The library's per-prompt sampling params with our generation limits on top."""
        out = {}
        for key, base in defaults.items():
            limit = params["max_new_tokens"] if key == "[layout]" else params["content_max_new_tokens"]
            out[key] = cls(temperature=base.temperature, top_p=base.top_p, top_k=base.top_k,
                           presence_penalty=base.presence_penalty, frequency_penalty=base.frequency_penalty,
                           repetition_penalty=(params["repetition_penalty"] if key == "[layout]"
                                               else base.repetition_penalty),
                           no_repeat_ngram_size=params["no_repeat_ngram_size"], max_new_tokens=int(limit))
        return out

    def _hook_layout_parser(self) -> None:
        """Keep each page's raw layout answer, so an empty page says what the model did answer.

        The library parses one answer per image, in order (executor None), through
        ``helper.parse_layout_output``; without that method the reason is generic.
        """
        helper = getattr(self.client, "helper", None)
        parse = getattr(helper, "parse_layout_output", None)
        if parse is None:
            return

        def parse_and_keep(output: str):
            self.answers.append(output)
            return parse(output)

        helper.parse_layout_output = parse_and_keep

    def _empty_reason(self, answer: str | None) -> str:
        if answer is None:
            return "the model's answer held no layout block"
        if not answer.strip():
            return "the model answered nothing"
        cap = ""
        try:
            if len(self.tokenizer(answer)["input_ids"]) >= self.max_new_tokens - 2:
                cap = f" (stopped at max_new_tokens {self.max_new_tokens})"
        except Exception:  # counting tokens is a courtesy, never a failure
            pass
        return f"no layout block in the model's answer{cap}: {answer[:120]!r}"

    def detect(self, image_path: str, page: dict) -> list[dict]:
        return self.detect_batch([(image_path, page)])[0]

    def detect_batch(self, items: list[tuple[str, dict]]) -> list[list[dict]]:
        images = [load_pil_rgb(path) for path, _ in items]
        self.answers = []
        if self.mode == "two_step":
            results = self.client.batch_two_step_extract(images)
        else:
            results = self.client.batch_layout_detect(images)
        answers = self.answers if len(self.answers) == len(images) else [None] * len(images)
        out = []
        for blocks, image, answer in zip(results, images, answers):
            regions = blocks_to_regions(blocks, *image.size)
            out.append(regions if regions else NoRegions(self._empty_reason(answer)))
        return out

    def close(self) -> None:
        self.client = None


META_KEYS = ("model", "model_path", "mode", "device_used", "cuda_available", "gpu_name", "compute_capability",
             "arch_supported", "gpu_op_ok", "gpu_op_error", "torch_version", "torch_cuda", "transformers_version",
             "mineru_vl_utils_version", "state", "counts", "page_totals", "empty_share", "flags", "updated")


def write_run_meta(job: dict, report: dict) -> None:
    """out_dir/run_meta.json: cuda_available and what ran where, mirrored from the run report.

    Written each time the run report is (pages finishing, the end), never when the model
    refused to start: a source folder must only exist for a member that ran.
    """
    meta = {"stage": job["stage"], "variant": job["variant"], "device_requested": job.get("device", "auto"),
            **{k: report[k] for k in META_KEYS if k in report}}
    atomic_write_json(Path(job["out_dir"]) / "run_meta.json", meta)


if __name__ == "__main__":
    _loop.main(MinerUDetector, on_flush=write_run_meta)
