"""Knobs shared by the fake model libraries (env vars set by the tests) and a call log."""

from __future__ import annotations

import json
import os
from pathlib import Path

# The libraries' own serialised outputs (../shared/formats beside the checkout), replayed by the fakes.
DATA = Path(__file__).resolve().parents[3].parent / "shared" / "formats"


def cuda() -> bool:
    return os.environ.get("FAKE_CUDA", "0") == "1"


def capability() -> tuple[int, int]:
    major, minor = os.environ.get("FAKE_CAPABILITY", "9.0").split(".")
    return int(major), int(minor)


def gpu_name() -> str:
    return os.environ.get("FAKE_GPU_NAME", "NVIDIA H200")


def no_kernels(device) -> bool:
    """$FAKE_KERNEL_FAIL=1: the wheel has no kernels for the card, so the first real op on the
    GPU fails (loading weights onto it, a copy, still works), in every library of the env."""
    return os.environ.get("FAKE_KERNEL_FAIL") == "1" and str(device).startswith(("cuda", "gpu"))


def record(call: str, **fields) -> None:
    """Append one JSON line to $FAKE_CALL_LOG so tests can assert how the library was called."""
    path = os.environ.get("FAKE_CALL_LOG")
    if path:
        with open(path, "a", encoding="utf-8") as fh:
            fh.write(json.dumps({"call": call, **fields}, default=str) + "\n")


def should_raise(name: str) -> bool:
    """Pages whose file name contains $FAKE_RAISE_ON (default "bad") make the fake model raise."""
    return os.environ.get("FAKE_RAISE_ON", "bad") in os.path.basename(str(name))


def hang_if_asked(name: str) -> None:
    """Pages whose file name contains $FAKE_HANG_ON never finish (a stuck generation)."""
    needle = os.environ.get("FAKE_HANG_ON")
    if needle and needle in os.path.basename(str(name)):
        import time

        time.sleep(3600)


def load(name: str):
    return json.loads((DATA / name).read_text(encoding="utf-8"))
