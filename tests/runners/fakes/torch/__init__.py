"""Fake torch: only what the runners and the doctor probe touch (device queries)."""

from types import SimpleNamespace

import _fake_control as _c

__version__ = "2.9.0+cu128"
version = SimpleNamespace(cuda="12.8")


class _Cuda:
    @staticmethod
    def is_available() -> bool:
        return _c.cuda()

    @staticmethod
    def _check():
        if not _c.cuda():
            # real torch without a driver: RuntimeError "Found no NVIDIA driver on your system..."
            raise RuntimeError("Found no NVIDIA driver on your system.")

    def get_device_name(self, index=0) -> str:
        self._check()
        return _c.gpu_name()

    def get_device_capability(self, index=0) -> tuple:
        self._check()
        return _c.capability()

    def synchronize(self):
        self._check()

    @staticmethod
    def get_arch_list() -> list:
        import os
        return [a for a in os.environ.get("FAKE_ARCH_LIST", "sm_80,sm_86,sm_90").split(",") if a] if _c.cuda() else []


cuda = _Cuda()


def ones(*shape, device="cpu"):
    import numpy as np
    if str(device).startswith("cuda"):
        cuda._check()
    return _Tensor(np.ones(shape, dtype=np.float32), str(device))


class _Tensor:
    def __init__(self, array, device):
        self.array, self.device = array, device

    def __matmul__(self, other):
        if _c.no_kernels(self.device):
            raise RuntimeError("CUDA error: no kernel image is available for execution on the device")
        return _Tensor(self.array @ other.array, self.device)

    def sum(self):
        return _Tensor(self.array.sum(), self.device)

    def item(self):
        return float(self.array)


