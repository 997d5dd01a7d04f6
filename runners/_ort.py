"""onnxruntime session creation with an honest device report (shared by ONNX runners).

onnxruntime never raises when CUDA cannot load: it silently runs on CPU (checked with
1.31.1, CPU and GPU wheels; ../shared/formats/onnxruntime_providers.md). The only
reliable test is ``"CUDAExecutionProvider" in session.get_providers()`` after creation.
A CUDA session can still fail at its first run (a wheel without kernels for the card), so
a CUDA session runs once on a dummy input before any page: a failure there is a device
failure (fallback or exit 5), not the same error on every page of the job.
The session comes wrapped (`TypedSession`): a float16 export is fed float16 and answers float32.
"""

from __future__ import annotations

import os
import sys

from _errors import DeviceUnavailable, MissingDependency, error_line


def make_session(model_path: str, device: str, allow_cpu_fallback: bool, threads: int = 0):
    """Create an InferenceSession, GPU first when asked, and say what it really uses.

    Args:
        model_path: .onnx file.
        device: "auto" (CUDA when it loads, else CPU), "gpu" (CUDA wanted), "cpu".
        allow_cpu_fallback: with device "gpu", whether a CPU-only session is acceptable.
        threads: intra-op threads (0 = onnxruntime's default).

    Returns:
        (session, info) where session is a `TypedSession` and info has ``providers_used``, ``device_used`` and, when CUDA
        loaded but could not run the model and the CPU session is used instead, ``cuda_error``.

    Raises:
        MissingDependency: onnxruntime or the model file is missing.
        DeviceUnavailable: "gpu" requested, CUDA did not load or run, fallback refused.
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
    info = {"onnxruntime_version": ort.__version__}
    cuda_error = _first_run_error(session) if on_cuda else None
    if cuda_error is not None:
        cpu = ort.InferenceSession(model_path, sess_options=options, providers=["CPUExecutionProvider"])
        if _first_run_error(cpu) is None:  # the model runs, CUDA does not
            if device == "gpu" and not allow_cpu_fallback:
                raise DeviceUnavailable(f"CUDAExecutionProvider loaded but its first inference failed "
                                        f"({cuda_error}); fix the CUDA/cuDNN install or allow CPU fallback")
            print(f"onnxruntime: CUDA loaded but its first inference failed ({cuda_error}); "
                  "falling back to CPU", file=sys.stderr, flush=True)
            session, used, on_cuda = cpu, list(cpu.get_providers()), False
            info["cuda_error"] = cuda_error
    return TypedSession(session), {"providers_used": used, "device_used": "cuda" if on_cuda else "cpu", **info}


class TypedSession:
    """An InferenceSession whose ``run`` feeds each float input the type the model declares and
    hands float16 outputs back as float32.

    onnxruntime refuses a float32 array for a float16 input ("Unexpected input data type"), so
    an fp16 export (Ultralytics ``half=True``) failed every page; the runners' numpy pre- and
    post-processing stays float32 whatever the export. Everything else is the session's own.
    """

    def __init__(self, session):
        import numpy as np

        self.session = session
        # read once at load: {input name: numpy dtype} of the float inputs
        self.float_inputs = {i.name: np.dtype(_DTYPES[i.type]) for i in session.get_inputs()
                             if _DTYPES.get(i.type, "").startswith("float")}

    def run(self, output_names, feeds: dict) -> list:
        import numpy as np

        typed = {name: value.astype(self.float_inputs[name], copy=False)
                 if name in self.float_inputs and getattr(value, "dtype", None) is not None and value.dtype.kind == "f"
                 else value for name, value in feeds.items()}
        return [out.astype(np.float32) if getattr(out, "dtype", None) == np.float16 else out
                for out in self.session.run(output_names, typed)]

    def __getattr__(self, name):
        return getattr(self.session, name)


_DTYPES = {"tensor(float)": "float32", "tensor(float16)": "float16", "tensor(double)": "float64",
           "tensor(int64)": "int64", "tensor(int32)": "int32", "tensor(uint8)": "uint8", "tensor(bool)": "bool"}


def _first_run_error(session) -> str | None:
    """Run `session` once on ones (dynamic dims: 1 for the batch, 64 else); the first line of its
    error, or None when it ran or no dummy input can be made (a type not in `_DTYPES`, no rank)."""
    import numpy as np

    feeds = {}
    for inp in session.get_inputs():
        if inp.type not in _DTYPES or inp.shape is None:
            return None
        shape = [d if isinstance(d, int) and d > 0 else (1 if i == 0 else 64) for i, d in enumerate(inp.shape)]
        feeds[inp.name] = np.ones(shape, dtype=_DTYPES[inp.type])
    try:
        session.run(None, feeds)
    except Exception as exc:  # onnxruntime raises its own pybind classes: any failure counts
        return error_line(exc)
    return None
