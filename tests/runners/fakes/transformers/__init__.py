"""Fake transformers: Qwen2VLForConditionalGeneration / AutoConfig / AutoProcessor loading as MinerU2.5 uses them.

Like the real from_pretrained offline, a path that is not a model directory raises OSError.
Like transformers 5.10.1-5.15.1 (reproduced with the real 5.15.1 on a tiny MinerU2.5-Pro-style
checkpoint: text fields and tie_word_embeddings under text_config only), AutoConfig leaves the
root tie_word_embeddings False; loaded with that config, a checkpoint without lm_head.weight
gets a newly initialised lm_head, reported in output_loading_info["missing_keys"].
FAKE_LOAD_MISSING adds a missing key; FAKE_PADDING_SIDE sets the tokenizer's padding side.
"""

import json
import os

import _fake_control as _c

__version__ = "5.15.1"


def _check_model_dir(path) -> None:
    if not os.path.isfile(os.path.join(str(path), "config.json")):
        raise OSError(f"{path} does not appear to have a file named config.json. "
                      "Checkout 'https://huggingface.co/{path}/tree/main' for available files.")


def _raw(path) -> dict:
    _check_model_dir(path)
    with open(os.path.join(str(path), "config.json"), encoding="utf-8") as fh:
        return json.load(fh)


class _TextConfig:
    def __init__(self, tie):
        self.tie_word_embeddings = tie
        self.max_position_embeddings = 16384


class _Config:
    def __init__(self, raw):
        text = raw.get("text_config", {})
        self.tie_word_embeddings = bool(raw.get("tie_word_embeddings", False))
        self.text_config = _TextConfig(text.get("tie_word_embeddings", raw.get("tie_word_embeddings", False)))

    def get_text_config(self, decoder=False):
        return self.text_config


class AutoConfig:
    @staticmethod
    def from_pretrained(path, **kwargs):
        return _Config(_raw(path))


class PretrainedConfig:
    @staticmethod
    def get_config_dict(path, **kwargs):
        return _raw(path), {}


class _Weight:
    def __init__(self):
        self._ptr = id(self)

    def data_ptr(self):
        return self._ptr


class _Module:
    def __init__(self, weight):
        self.weight = weight


class Qwen2VLForConditionalGeneration:
    def __init__(self, path, device, config):
        self.name_or_path, self.device, self.config = str(path), device, config
        self.embed_tokens = _Module(_Weight())
        self.lm_head = _Module(self.embed_tokens.weight if config.tie_word_embeddings else _Weight())

    def get_input_embeddings(self):
        return self.embed_tokens

    def get_output_embeddings(self):
        return self.lm_head

    @classmethod
    def from_pretrained(cls, path, config=None, output_loading_info=False, **kwargs):
        raw = _raw(path)
        config = config or AutoConfig.from_pretrained(path)
        _c.record("Qwen2VLForConditionalGeneration.from_pretrained", path=str(path),
                  tie=config.tie_word_embeddings, output_loading_info=output_loading_info, **kwargs)
        device_map = kwargs.get("device_map") or {"": "cpu"}
        model = cls(path, device_map.get("", "cpu"), config)
        missing = []
        if not config.tie_word_embeddings and not raw.get("_fake_lm_head_in_checkpoint"):
            missing.append("lm_head.weight")
        missing += [k for k in os.environ.get("FAKE_LOAD_MISSING", "").split(",") if k]
        if output_loading_info:
            return model, {"missing_keys": missing, "unexpected_keys": [], "mismatched_keys": [], "error_msgs": []}
        return model


class _Tokenizer:
    def __init__(self):
        self.padding_side = os.environ.get("FAKE_PADDING_SIDE", "right")

    def __call__(self, text):
        return {"input_ids": list(range(len(text.split())))}


class AutoProcessor:
    def __init__(self, path):
        self.name_or_path = str(path)
        self.tokenizer = _Tokenizer()

    @classmethod
    def from_pretrained(cls, path, **kwargs):
        _check_model_dir(path)
        _c.record("AutoProcessor.from_pretrained", path=str(path), **kwargs)
        return cls(path)
