"""Environment probe run by ``newsbag doctor`` in a model env's interpreter: imports, GPU, one real op.

Prints one JSON object on stdout. A wheel without kernels for the card fails only at the
first real GPU op, so for torch and paddle a tiny matmul runs on the GPU; its error text
("no kernel image is available ...") is reported as is.
"""

from __future__ import annotations

import argparse
import importlib
import json
import platform
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _device import arch_supported  # noqa: E402


def _first_line(exc: BaseException) -> str:
    text = f"{type(exc).__name__}: {exc}".strip()
    return text.splitlines()[0][:300] if text else type(exc).__name__


def probe_imports(names: list[str]) -> dict:
    out = {}
    for name in names:
        try:
            mod = importlib.import_module(name)
            out[name] = {"ok": True, "version": str(getattr(mod, "__version__", "") or "")}
        except Exception as exc:  # an import can fail with anything (missing .so, CUDA init)
            out[name] = {"ok": False, "error": _first_line(exc)}
    return out


def probe_torch() -> dict:
    import torch

    info = {"version": str(torch.__version__), "cuda_build": getattr(torch.version, "cuda", None),
            "cuda_available": bool(torch.cuda.is_available())}
    if info["cuda_available"]:
        cap = tuple(int(v) for v in torch.cuda.get_device_capability(0))
        arch_list = list(torch.cuda.get_arch_list())
        info.update(gpu_name=torch.cuda.get_device_name(0), compute_capability=f"{cap[0]}.{cap[1]}",
                    arch_list=arch_list, arch_supported=arch_supported(cap, arch_list))
        try:
            a = torch.ones(64, 64, device="cuda")
            info["gpu_op_ok"] = (a @ a).sum().item() == 64.0 * 64 * 64
        except Exception as exc:
            info.update(gpu_op_ok=False, gpu_op_error=_first_line(exc))
    return info


def probe_paddle() -> dict:
    import paddle

    compiled = bool(paddle.device.is_compiled_with_cuda())
    count = int(paddle.device.cuda.device_count()) if compiled else 0
    info = {"version": str(paddle.__version__), "compiled_with_cuda": compiled, "cuda_available": count > 0}
    if count > 0:
        cap = tuple(int(v) for v in paddle.device.cuda.get_device_capability(0))
        info.update(gpu_name=paddle.device.cuda.get_device_name(0), compute_capability=f"{cap[0]}.{cap[1]}")
        try:
            paddle.set_device("gpu:0")
            a = paddle.ones([64, 64], dtype="float32")
            info["gpu_op_ok"] = float(paddle.matmul(a, a).sum()) == 64.0 * 64 * 64
        except Exception as exc:
            info.update(gpu_op_ok=False, gpu_op_error=_first_line(exc))
    return info


def probe_onnxruntime() -> dict:
    import onnxruntime as ort

    available = list(ort.get_available_providers())
    # Listed is not loadable (onnxruntime-gpu lists CUDA without a GPU): the runner's
    # providers_used from a real page is the authority; this only says what could be tried.
    return {"version": ort.__version__, "available_providers": available,
            "cuda_available": "CUDAExecutionProvider" in available, "cuda_listed_only": True}


FRAMEWORKS = {"torch": probe_torch, "paddle": probe_paddle, "onnxruntime": probe_onnxruntime}


def probe_weights(family: str, params: dict) -> dict:
    """Are the weights where the variant's params say? The family's own ``locate_weights``
    answers (the code the runner uses), without loading a model or downloading anything."""
    try:
        module = importlib.import_module(family)
    except Exception as exc:  # a family module that cannot import here: say so, do not guess
        return {"ok": False, "error": f"cannot check: {_first_line(exc)}"}
    locate = getattr(module, "locate_weights", None)
    if locate is None:
        return {"ok": True, "paths": [], "note": "no weights outside the installed packages"}
    try:
        found = locate(params)
    except Exception as exc:
        return {"ok": False, "error": str(exc).splitlines()[0][:600] if str(exc) else _first_line(exc)}
    paths = list(found.values()) if isinstance(found, dict) else [found]
    return {"ok": True, "paths": [str(p) for p in paths]}


def main() -> None:
    parser = argparse.ArgumentParser(description="newsbag env probe")
    parser.add_argument("--imports", default="", help="comma-separated modules to import")
    parser.add_argument("--weights", default="", help="family whose weights to locate (with --params)")
    parser.add_argument("--params", default="{}", help="the variant's parameters, JSON")
    args = parser.parse_args()
    if args.weights:
        sys.stdout.write(json.dumps({"weights": probe_weights(args.weights, json.loads(args.params))}) + "\n")
        return
    names = [n for n in args.imports.split(",") if n]
    report = {"python": sys.executable, "python_version": platform.python_version(),
              "imports": probe_imports(names), "frameworks": {}}
    for name, fn in FRAMEWORKS.items():
        if report["imports"].get(name, {}).get("ok"):
            try:
                report["frameworks"][name] = fn()
            except Exception as exc:
                report["frameworks"][name] = {"error": _first_line(exc), "cuda_available": False}
    sys.stdout.write(json.dumps(report) + "\n")


if __name__ == "__main__":
    main()
