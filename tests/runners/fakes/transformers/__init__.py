"""Fake transformers: Qwen2VLForConditionalGeneration / AutoProcessor loading as MinerU2.5 uses them.

Like the real from_pretrained offline, a path that is not a model directory raises OSError.
"""

import os

import _fake_control as _c

__version__ = "5.10.1"


def _check_model_dir(path) -> None:
    if not os.path.isfile(os.path.join(str(path), "config.json")):
        raise OSError(f"{path} does not appear to have a file named config.json. "
                      "Checkout 'https://huggingface.co/{path}/tree/main' for available files.")


class Qwen2VLForConditionalGeneration:
    def __init__(self, path, device):
        self.name_or_path, self.device = str(path), device

    @classmethod
    def from_pretrained(cls, path, **kwargs):
        _check_model_dir(path)
        _c.record("Qwen2VLForConditionalGeneration.from_pretrained", path=str(path), **kwargs)
        device_map = kwargs.get("device_map") or {"": "cpu"}
        return cls(path, device_map.get("", "cpu"))


class AutoProcessor:
    def __init__(self, path):
        self.name_or_path = str(path)

    @classmethod
    def from_pretrained(cls, path, **kwargs):
        _check_model_dir(path)
        _c.record("AutoProcessor.from_pretrained", path=str(path), **kwargs)
        return cls(path)
