"""onnxruntime session creation with an honest device report (shared by ONNX runners).

onnxruntime never raises when CUDA cannot load: it silently runs on CPU (checked with
1.31.1, CPU and GPU wheels; ../shared/formats/onnxruntime_providers.md). The only
reliable test is ``"CUDAExecutionProvider" in session.get_providers()`` after creation.
"""

from __future__ import annotations

import os
import sys

from _loop import DeviceUnavailable, MissingDependency


def make_session(model_path: str, device: str, allow_cpu_fallback: bool, threads: int = 0):
    """Create an InferenceSession, GPU first when asked, and say what it really uses.

    Args:
        model_path: .onnx file.
        device: "auto" (CUDA when it loads, else CPU), "gpu" (CUDA wanted), "cpu".
        allow_cpu_fallback: with device "gpu", whether a CPU-only session is acceptable.
        threads: intra-op threads (0 = onnxruntime's default).

    Returns:
        (session, info) where info has ``providers_used`` and ``device_used``.

    Raises:
        MissingDependency: onnxruntime or the model file is missing.
        DeviceUnavailable: "gpu" requested, CUDA did not load, fallback refused.
    """
    try:
        import onnxruntime as ort
    except ImportError as exc:
        raise MissingDependency(f"onnxruntime is not installed in {sys.executable}: {exc}") from exc
    if not os.path.isfile(model_path):
        raise MissingDependency(f"model file not found: {model_path}")
    providers = ["CPUExecutionProvider"]
    if device in ("gpu", "auto") and "CUDAExecutionProvider" in ort.get_available_providers():
        providers = ["CUDAExecutionProvider", "CPUExecutionProvider"]
    options = ort.SessionOptions()
    if threads:
        options.intra_op_num_threads = int(threads)
    session = ort.InferenceSession(model_path, sess_options=options, providers=providers)
    used = list(session.get_providers())
    on_cuda = "CUDAExecutionProvider" in used
    if device == "gpu" and not on_cuda and not allow_cpu_fallback:
        raise DeviceUnavailable(
            f"CUDAExecutionProvider did not load (providers used: {used}); "
            "install onnxruntime-gpu with CUDA/cuDNN, or allow CPU fallback"
        )
    return session, {"providers_used": used, "device_used": "cuda" if on_cuda else "cpu",
                     "onnxruntime_version": ort.__version__}
