"""Test helpers shared by every test folder: tiny page images, fake-runner configs, a `Boxes` builder.

A module with a unique name (not conftest.py): several folders have a conftest, and
`from conftest import ...` would pick whichever was imported first."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from newsbag import labels
from newsbag.contract import Boxes, PageMeta

FAKE_RUNNERS = Path(__file__).parent / "fake_runners"
REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared"
EXAMPLE_PAGE = REPO / "examples" / "port_gibson_reveille_1921-03-03_p1.png"  # the quick start's page, in the clone


def shared_path(*parts: str, module_level: bool = False) -> Path:
    """A path under ../shared, or skip the test that needs it, saying so.

    ../shared (evaluation pages, the model libraries' own outputs) lives beside a development
    checkout, not in the repository, so a fresh clone runs every test that does not need it.
    """
    path = SHARED.joinpath(*parts)
    if not path.exists():
        pytest.skip(f"needs ../shared/{'/'.join(parts)} beside the checkout (data not in the repository)",
                    allow_module_level=module_level)
    return path


def make_boxes(xyxy, label="text", source="a/x", family=None, score=None, width=1000, height=1000):
    """Boxes of one page from plain lists; scalars broadcast over the boxes."""
    xyxy = np.asarray(xyxy, float).reshape(-1, 4)
    n = len(xyxy)

    def col(v, dtype=object):
        return np.array(v if isinstance(v, (list, tuple)) else [v] * n, dtype=dtype)

    src = col(source)
    fam = col(family) if family is not None else np.array([s.split("/")[0] for s in src], object)
    sc = np.full(n, np.nan) if score is None else col(score, float)
    lab = np.array([labels.label_code(name) for name in col(label)], np.int8)
    return Boxes(xyxy=xyxy, score=sc, label=lab, meta=PageMeta("p", width, height),
                 data={"source": src, "family": fam, "raw_label": col(label)})


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


def write_png16(path: Path, arr: np.ndarray, interlaced: bool = False) -> Path:
    """A 16-bit PNG with more than one sample a pixel (grey+alpha, RGB or RGBA: colour type 4, 2 or
    6) of `arr` (H, W, 2|3|4 uint16), written by hand: Pillow writes none. Rows filtered with Sub,
    as encoders do, so unfiltering counts; `interlaced`: Adam7, each pass's rows filtered alike."""
    import struct
    import zlib

    h, w, c = arr.shape

    def filtered(part: np.ndarray) -> bytes:
        big = part.astype(">u2").view(np.uint8).reshape(part.shape[0], -1).astype(np.int16)
        sub = np.concatenate([big[:, :c * 2], big[:, c * 2:] - big[:, :-c * 2]], axis=1) % 256
        return b"".join(b"\x01" + row.astype(np.uint8).tobytes() for row in sub)

    passes = ((0, 0, 8, 8), (4, 0, 8, 8), (0, 4, 4, 8), (2, 0, 4, 4), (0, 2, 2, 4), (1, 0, 2, 2), (0, 1, 1, 2))
    parts = [arr[y0::dy, x0::dx] for x0, y0, dx, dy in passes] if interlaced else [arr]
    raw = b"".join(filtered(part) for part in parts if part.size)

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    path.parent.mkdir(parents=True, exist_ok=True)
    header = struct.pack(">IIBBBBB", w, h, 16, {2: 4, 3: 2, 4: 6}[c], 0, 0, int(interlaced))
    path.write_bytes(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(raw))
                     + chunk(b"IEND", b""))
    return path


def write_fake_config(path: Path, variants: dict, *, page_timeout_s=60, env=None, python=None,
                      extra_stages=(), device="auto", allow_cpu_fallback=True, max_restarts=3,
                      runners_dir: Path = FAKE_RUNNERS) -> Path:
    config = {
        "version": 1,
        "runners_dir": str(runners_dir),
        "envs": {"fake": {"python": python or "", "env": env or {}}},
        "device": device,
        "allow_cpu_fallback": allow_cpu_fallback,
        "stages": [{"name": "fake", "family": "fake", "env": "fake", "page_timeout_s": page_timeout_s,
                    "max_restarts": max_restarts, "variants": variants}, *extra_stages],
    }
    path.write_text(json.dumps(config))
    return path


def start_newsbag(*args, stderr=subprocess.DEVNULL) -> subprocess.Popen:
    """`newsbag ARGS` as a child in its own process group, for tests that signal or kill it mid-run.

    The child gets SIGINT's default action, as a command typed at a terminal does: a test run
    started in the background of a non-interactive shell ignores SIGINT, its children inherit
    that, and Python then installs no Ctrl-C handler (the SIGINT test saw exit 0, not 130)."""
    import signal

    return subprocess.Popen([sys.executable, "-m", "newsbag", *map(str, args)], stdout=subprocess.DEVNULL,
                            stderr=stderr, start_new_session=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))


def manifest_line(row: dict) -> str:
    """One line of RUN/manifests/pages.jsonl holding the page record `row`, with the run format and
    the conversion revision this newsbag writes unless `row` names its own."""
    from newsbag.images import CONVERSION_REVISION
    from newsbag.manifest import RUN_FORMAT

    return json.dumps({"run_format": RUN_FORMAT, "conversion": CONVERSION_REVISION, **row}) + "\n"


def write_manifest(run: Path, rows) -> Path:
    """RUN/manifests/pages.jsonl of the page records `rows` (dicts, `manifest_line`), written by hand."""
    path = Path(run) / "manifests" / "pages.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(manifest_line(r) for r in rows))
    return path


def run_cli(capsys, *args):
    """`newsbag ARGS` through the real entry point: (exit code, stdout, stderr)."""
    import pytest

    from newsbag.cli import main

    with pytest.raises(SystemExit) as exc:
        main([str(a) for a in args])
    out, err = capsys.readouterr()
    return exc.value.code, out, err


def write_hf_model(folder: Path, config: dict | None = None, *, truncate: bool = False) -> Path:
    """A transformers model folder as the MinerU runner checks it: config.json + a safetensors file.

    The default config is MinerU2.5-2509-style (root tie_word_embeddings, no lm_head in the
    checkpoint); `truncate` cuts the weights file short like a half-finished copy.
    """
    import struct

    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(json.dumps(config or {"model_type": "qwen2_vl", "tie_word_embeddings": True}))
    header = json.dumps({"w": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]}}).encode()
    data = struct.pack("<Q", len(header)) + header + bytes(16)
    (folder / "model.safetensors").write_bytes(data[:-6] if truncate else data)
    return folder
