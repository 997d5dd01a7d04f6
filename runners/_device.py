"""GPU detection for torch and paddle runners: pick the device, report name and compute capability.

A framework build without kernels for the card fails only at the first real op (H200
sm_90 with some Paddle wheels, GB10 sm_121 with older CUDA builds): the report says whether
the card's capability is covered by the build's arch list, and a tiny matmul runs on the GPU
before the model loads, so such a card is a device failure (CPU fallback or exit 5) found
once, not the same CUDA error on every page. ``newsbag doctor``'s probe reports the same.
"""

from __future__ import annotations

from _errors import DeviceUnavailable, MissingDependency, error_line

__all__ = ["arch_supported", "choose", "torch_status", "paddle_status", "cuda_usable", "paddle_cuda_usable"]


def arch_supported(capability: tuple[int, int], arch_list: list[str]) -> bool | None:
    """Whether a build with `arch_list` (e.g. ["sm_80", "sm_90", "compute_90"]) runs on `capability`.

    A cubin sm_XY runs on the same major with minor >= Y; PTX compute_XY JIT-compiles for any
    capability >= (X, Y). Arch-specific targets (sm_90a) count as their base. None when the
    list is empty (unknown build).
    """
    if not arch_list:
        return None
    major, minor = capability
    for arch in arch_list:
        kind, _, num = arch.partition("_")
        digits = "".join(ch for ch in num if ch.isdigit())
        if len(digits) < 2:
            continue
        a_major, a_minor = int(digits[:-1]), int(digits[-1])
        if kind == "sm" and a_major == major and a_minor <= minor:
            return True
        if kind == "compute" and (a_major, a_minor) <= (major, minor):
            return True
    return False


def _gpu_op(matmul) -> dict:
    """``gpu_op_ok`` (and ``gpu_op_error``) of ``matmul()``, a 64x64 product of ones on the GPU."""
    try:
        return {"gpu_op_ok": matmul() == 64.0 * 64 * 64}
    except Exception as exc:  # no kernel image, a broken driver: any failure means the GPU is not usable
        return {"gpu_op_ok": False, "gpu_op_error": error_line(exc, 300)}


def cuda_usable(status: dict, why_not: str) -> tuple[bool, str]:
    """(usable, why not) from a `torch_status` / `paddle_status` report: the GPU is there and ran the op."""
    if not status["cuda_available"]:
        return False, why_not
    if status.get("gpu_op_ok") is False:
        return False, f"a GPU op failed: {status.get('gpu_op_error')}"
    return True, ""


def choose(device: str, allow_cpu_fallback: bool, cuda_ok: bool, why_not: str, require_cuda: bool = False) -> str:
    """"cuda" or "cpu" for a requested device ("auto" | "gpu" | "cpu").

    Raises:
        DeviceUnavailable: CUDA wanted (device "gpu" without fallback, or require_cuda) but not usable.
    """
    if require_cuda and not cuda_ok:
        raise DeviceUnavailable(f"require_cuda is set but CUDA is not usable: {why_not}")
    if device == "cpu":
        if require_cuda:
            raise DeviceUnavailable("require_cuda is set but the stage asks for device cpu")
        return "cpu"
    if cuda_ok:
        return "cuda"
    if device == "gpu" and not allow_cpu_fallback:
        raise DeviceUnavailable(f"GPU requested but CUDA is not usable ({why_not}) and CPU fallback is not allowed")
    return "cpu"


def torch_status() -> dict:
    """What torch sees: cuda_available, GPU name, capability, build arch list and coverage, and
    whether a tiny op runs on the GPU (gpu_op_ok, gpu_op_error)."""
    try:
        import torch
    except ImportError as exc:
        raise MissingDependency(f"torch is not installed: {exc}") from exc
    info = {"torch_version": str(torch.__version__), "torch_cuda": getattr(torch.version, "cuda", None),
            "cuda_available": bool(torch.cuda.is_available())}
    if info["cuda_available"]:
        cap = tuple(int(v) for v in torch.cuda.get_device_capability(0))
        arch_list = list(torch.cuda.get_arch_list())
        info.update({"gpu_name": torch.cuda.get_device_name(0), "compute_capability": f"{cap[0]}.{cap[1]}",
                     "arch_list": arch_list, "arch_supported": arch_supported(cap, arch_list)})

        def matmul() -> float:
            a = torch.ones(64, 64, device="cuda")
            return (a @ a).sum().item()

        info.update(_gpu_op(matmul))
    return info


def paddle_status() -> dict:
    """What paddle sees: compiled with CUDA, GPU count, name, capability, and whether a tiny op
    runs on the GPU (gpu_op_ok, gpu_op_error); paddle's current device is left as it was."""
    try:
        import paddle
    except ImportError as exc:
        raise MissingDependency(f"paddlepaddle is not installed: {exc}") from exc
    compiled = bool(paddle.device.is_compiled_with_cuda())
    count = int(paddle.device.cuda.device_count()) if compiled else 0
    info = {"paddle_version": str(paddle.__version__), "paddle_compiled_with_cuda": compiled,
            "cuda_available": compiled and count > 0}
    if info["cuda_available"]:
        cap = tuple(int(v) for v in paddle.device.cuda.get_device_capability(0))
        info.update({"gpu_name": paddle.device.cuda.get_device_name(0), "compute_capability": f"{cap[0]}.{cap[1]}"})

        def matmul() -> float:
            before = paddle.get_device()
            try:
                paddle.set_device("gpu:0")
                a = paddle.ones([64, 64], dtype="float32")
                return float(paddle.matmul(a, a).sum())
            finally:
                paddle.set_device(before)

        info.update(_gpu_op(matmul))
    return info


def paddle_cuda_usable(status: dict) -> tuple[bool, str]:
    """`cuda_usable` of a `paddle_status` report, with paddle's reason when it has no GPU: a CPU-only
    wheel and a machine without a visible card need different fixes."""
    why = "paddle is not compiled with CUDA" if not status["paddle_compiled_with_cuda"] else "paddle sees no GPU"
    return cuda_usable(status, why)
