"""Fake paddlepaddle: device queries and one tiny op (what runners/_device.py and runners/_probe.py use)."""

import os
from types import SimpleNamespace

import numpy as np

import _fake_control as _c

__version__ = "3.3.1"
version = SimpleNamespace(cuda=lambda: "12.6", cudnn=lambda: "9.5.1")
_device = {"name": "cpu"}


def _compiled() -> bool:
    return os.environ.get("FAKE_PADDLE_CUDA_BUILD", "1") == "1"


def _gpu_check():
    if not _c.cuda():
        raise ValueError("The device should not be 'gpu', since PaddlePaddle is not compiled with CUDA or no GPU")


class _Cuda:
    @staticmethod
    def device_count() -> int:
        return 1 if (_compiled() and _c.cuda()) else 0

    @staticmethod
    def get_device_capability(index=0):
        _gpu_check()
        return _c.capability()

    @staticmethod
    def get_device_name(index=0):
        _gpu_check()
        return _c.gpu_name()


device = SimpleNamespace(is_compiled_with_cuda=_compiled, cuda=_Cuda())


def get_device() -> str:
    return _device["name"]


def set_device(name: str):
    if name.startswith("gpu"):
        _gpu_check()
    _device["name"] = name
    return name


def ones(shape, dtype="float32"):
    return np.ones(shape, dtype=dtype)


def matmul(a, b):
    if _c.no_kernels(_device["name"]):
        # what a wheel without kernels for the card reports at the first real op
        raise RuntimeError("(External) CUDA error(209), no kernel image is available for execution on the device.")
    return a @ b
