"""Environment probe run by ``newsbag doctor`` in a model env's interpreter: imports, GPU, one real op.

Prints one JSON object on stdout. A wheel without kernels for the card fails only at the
first real GPU op, so for torch and paddle a tiny matmul runs on the GPU (``_device``, the
check the runners make too); its error text ("no kernel image is available ...") is
reported as is.
"""

from __future__ import annotations

import argparse
import importlib
import json
import platform
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _device import paddle_status, torch_status  # noqa: E402
from _errors import error_line  # noqa: E402


def probe_imports(names: list[str]) -> dict:
    out = {}
    for name in names:
        try:
            mod = importlib.import_module(name)
            out[name] = {"ok": True, "version": str(getattr(mod, "__version__", "") or "")}
        except Exception as exc:  # an import can fail with anything (missing .so, CUDA init)
            out[name] = {"ok": False, "error": error_line(exc, 300)}
    return out


def probe_onnxruntime() -> dict:
    import onnxruntime as ort

    available = list(ort.get_available_providers())
    # Listed is not loadable (onnxruntime-gpu lists CUDA without a GPU): the runner's
    # providers_used from a real page is the authority; this only says what could be tried.
    return {"version": ort.__version__, "available_providers": available,
            "cuda_available": "CUDAExecutionProvider" in available, "cuda_listed_only": True}


# torch and paddle: what the runners themselves check before loading a model (a GPU op included).
FRAMEWORKS = {"torch": torch_status, "paddle": paddle_status, "onnxruntime": probe_onnxruntime}


def probe_weights(family: str, params: dict) -> dict:
    """Are the weights where the variant's params say? The family's own ``locate_weights``
    answers (the code the runner uses), without loading a model or downloading anything."""
    try:
        module = importlib.import_module(family)
    except Exception as exc:  # a family module that cannot import here: say so, do not guess
        return {"ok": False, "error": f"cannot check: {error_line(exc, 300)}"}
    locate = getattr(module, "locate_weights", None)
    if locate is None:
        return {"ok": True, "paths": [], "note": "no weights outside the installed packages"}
    try:
        found = locate(params)
    except Exception as exc:
        return {"ok": False, "error": str(exc).splitlines()[0][:600] if str(exc) else error_line(exc, 300)}
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
                report["frameworks"][name] = {"error": error_line(exc, 300), "cuda_available": False}
    sys.stdout.write(json.dumps(report) + "\n")


if __name__ == "__main__":
    main()
