"""Test helpers shared by every test folder: tiny page images, fake-runner configs, a `Boxes` builder.

A module with a unique name (not conftest.py): several folders have a conftest, and
`from nbtest import ...` would pick whichever was imported first."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
from PIL import Image

from newsbag import labels
from newsbag.contract import Boxes, PageMeta

FAKE_RUNNERS = Path(__file__).parent / "fake_runners"
REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared"


def make_boxes(xyxy, score=None, label=None, page_id="p", width=1000, height=1000, **data) -> Boxes:
    """`Boxes` from plain lists: make_boxes([[0,0,10,10]], score=[.9], label=["text"])."""
    xyxy = np.asarray(xyxy, dtype=np.float64).reshape(-1, 4)
    n = len(xyxy)
    score = np.full(n, 0.9) if score is None else score
    label = ["text"] * n if label is None else label
    return Boxes(xyxy=xyxy, score=score, label=[labels.label_code(x) for x in label],
                 meta=PageMeta(page_id, width, height), data={k: np.asarray(v, dtype=object) for k, v in data.items()})


def write_image(path: Path, size=(64, 48), mode="L", fmt=None, **save) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    w, h = size
    arr = (np.arange(w * h).reshape(h, w) % 251).astype(np.uint8)
    if mode == "RGB":
        im = Image.fromarray(np.stack([arr, arr[::-1], 255 - arr], -1), "RGB")
    elif mode == "CMYK":
        im = Image.fromarray(np.stack([arr, arr, 255 - arr, arr // 2], -1), "CMYK")
    elif mode == "I;16":
        im = Image.fromarray(arr.astype(np.uint16) * 257)
        assert im.mode.startswith("I;16"), im.mode
    elif mode == "1":
        im = Image.fromarray(arr > 128)
    else:
        im = Image.fromarray(arr, mode)
    im.save(path, format=fmt, **save)
    return path


def write_fake_config(path: Path, variants: dict, *, page_timeout_s=60, env=None, python=None,
                      extra_stages=(), device="auto", allow_cpu_fallback=True, max_restarts=3) -> Path:
    config = {
        "version": 1,
        "runners_dir": str(FAKE_RUNNERS),
        "envs": {"fake": {"python": python or "", "env": env or {}}},
        "device": device,
        "allow_cpu_fallback": allow_cpu_fallback,
        "stages": [{"name": "fake", "family": "fake", "env": "fake", "page_timeout_s": page_timeout_s,
                    "max_restarts": max_restarts, "variants": variants}, *extra_stages],
    }
    path.write_text(json.dumps(config))
    return path

