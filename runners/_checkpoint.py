"""Is a model folder complete? Stdlib-only checks run before a model library loads it.

A half-copied folder (job killed mid-rsync, quota hit) otherwise fails deep inside the
library with a message that does not say "copy again". Safetensors files are checked from
their header: 8 bytes of header length, a JSON header whose ``data_offsets`` say how long
the data must be; a truncated copy is shorter than that.
"""

from __future__ import annotations

import json
import struct
from pathlib import Path

from _errors import MissingDependency

__all__ = ["check_safetensors", "check_hf_folder", "check_paddle_folder"]


def check_safetensors(path: Path) -> None:
    """Raise MissingDependency when `path` is not a complete safetensors file."""
    size = path.stat().st_size
    with open(path, "rb") as fh:
        head = fh.read(8)
        if len(head) < 8:
            raise MissingDependency(f"{path} is truncated ({size} bytes): the copy is incomplete")
        (n,) = struct.unpack("<Q", head)
        if n > 100_000_000 or 8 + n > size:
            raise MissingDependency(f"{path} is truncated or not safetensors (header of {n} bytes, file {size} bytes)")
        try:
            header = json.loads(fh.read(n))
        except ValueError:
            raise MissingDependency(f"{path}: unreadable safetensors header; the copy is corrupt") from None
    end = max((t["data_offsets"][1] for k, t in header.items() if k != "__metadata__"), default=0)
    if 8 + n + end > size:
        raise MissingDependency(f"{path} is truncated: {size} of {8 + n + end} bytes; the copy is incomplete")


def check_hf_folder(path: Path, hint: str) -> None:
    """A transformers model folder: config.json and every weight shard present and complete.

    Raises:
        MissingDependency: with what is missing and `hint` (how to stage the weights again).
    """
    if not path.is_dir() or not any(path.iterdir()):
        raise MissingDependency(f"model folder {path} is empty; {hint}")
    if not (path / "config.json").is_file():
        raise MissingDependency(f"model folder {path} has no config.json (half-copied?); {hint}")
    index = path / "model.safetensors.index.json"
    if index.is_file():
        shards = sorted(set(json.loads(index.read_text(encoding="utf-8")).get("weight_map", {}).values()))
    else:
        shards = [p.name for p in path.glob("*.safetensors")]
    if not shards:
        raise MissingDependency(f"model folder {path} has no *.safetensors weights (half-copied?); {hint}")
    missing = [s for s in shards if not (path / s).is_file()]
    if missing:
        raise MissingDependency(f"model folder {path} lacks {len(missing)} weight shard(s) ({missing[0]}, ...); {hint}")
    for shard in shards:
        try:
            check_safetensors(path / shard)
        except MissingDependency as exc:
            raise MissingDependency(f"{exc}; {hint}") from None


def check_paddle_folder(path: Path, hint: str) -> None:
    """A PaddleX model folder: weights in one of the formats paddlex reads (model_paths.py)."""
    if not path.is_dir() or not any(path.iterdir()):
        raise MissingDependency(f"model folder {path} is empty; {hint}")
    static = (path / "inference.pdiparams").is_file() and any(
        (path / f"inference.{ext}").is_file() for ext in ("json", "pdmodel"))
    other = [path / name for name in ("inference.onnx", "model_state.pdparams", "inference.pdparams",
                                      "model.safetensors") if (path / name).is_file()]
    if not static and not other:
        raise MissingDependency(f"model folder {path} holds no weights (inference.json/.pdmodel + "
                                f"inference.pdiparams, model.safetensors, ...): half-copied?; {hint}")
    for weights in [path / "inference.pdiparams"] * static + other:
        if weights.stat().st_size == 0:
            raise MissingDependency(f"{weights} is empty: the copy is incomplete; {hint}")
        if weights.suffix == ".safetensors":
            try:
                check_safetensors(weights)
            except MissingDependency as exc:
                raise MissingDependency(f"{exc}; {hint}") from None
