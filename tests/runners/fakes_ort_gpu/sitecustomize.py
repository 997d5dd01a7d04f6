"""Fake onnxruntime-gpu over the real onnxruntime, on a test env's PYTHONPATH (only with $FAKE_ORT_GPU).

What ../shared/formats/onnxruntime_providers.md found the onnxruntime-gpu 1.31.1 wheel doing:
``get_available_providers()`` lists CUDAExecutionProvider whether or not it can load, and
``get_device()`` says GPU. $FAKE_ORT_GPU picks what a CUDA session then does:

- ``no_cuda_libs`` (verified there): the CUDA provider library does not load; the session is
  created on CPU without a Python exception or warning, two C++ log lines go to stderr.
- ``ok``: a node where CUDA works: the session gets CUDAExecutionProvider and runs.
- ``run_fails`` (inferred, not verified: no GPU here): the session gets CUDAExecutionProvider,
  and the first inference fails as onnxruntime reports a CUDA error (a wheel without kernels
  for the card), with ``onnxruntime.capi.onnxruntime_pybind11_state.Fail``.

Sessions really run on the CPU provider underneath, so outputs are the real model's.
"""

import os
import sys

_MODE = os.environ.get("FAKE_ORT_GPU")

if _MODE:
    import onnxruntime as _ort
    from onnxruntime.capi.onnxruntime_pybind11_state import Fail as _Fail

    _Real = _ort.InferenceSession
    _CUDA = "CUDAExecutionProvider"

    def _names(providers):
        return [p[0] if isinstance(p, tuple) else p for p in providers or []]

    class InferenceSession(_Real):
        def __init__(self, path_or_bytes, sess_options=None, providers=None, provider_options=None, **kwargs):
            super().__init__(path_or_bytes, sess_options=sess_options, providers=["CPUExecutionProvider"], **kwargs)
            self._on_cuda = _CUDA in _names(providers) and _MODE in ("ok", "run_fails")
            if _CUDA in _names(providers) and _MODE == "no_cuda_libs":
                sys.stderr.write(
                    "[E:onnxruntime:Default, provider_bridge_ort.cc:2458 operator()] ... Failed to load library "
                    "libonnxruntime_providers_cuda.so with error: libcublasLt.so.13: cannot open shared object file\n"
                    "[W:onnxruntime:Default, onnxruntime_pybind_state.cc:1295 CreateExecutionProviderFactoryInstance] "
                    "Failed to create CUDAExecutionProvider. Require cuDNN 9.* and CUDA 13.*.\n")

        def get_providers(self):
            return [_CUDA, "CPUExecutionProvider"] if self._on_cuda else super().get_providers()

        def run(self, output_names, input_feed, run_options=None):
            if self._on_cuda and _MODE == "run_fails":
                raise _Fail("[ONNXRuntimeError] : 1 : FAIL : CUDA failure 209: no kernel image is available for "
                            "execution on the device ; GPU=0 ; expr=cudaLaunchKernel")
            return super().run(output_names, input_feed, run_options)

    _ort.InferenceSession = InferenceSession
    _ort.get_available_providers = lambda: ["TensorrtExecutionProvider", _CUDA, "CPUExecutionProvider"]
    _ort.get_device = lambda: "GPU"
