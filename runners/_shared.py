"""One model pass per page, shared by the variants of a stage that differ only in post-processing."""

from __future__ import annotations

import json
import os
from pathlib import Path

from _writes import atomic_write_json

SHARED_DIR = "_shared"


class SharedModelOutput:
    """One model pass per page for the variants of a stage that differ only in post-processing.

    The first variant to reach a page stores the model's output (JSON; floats round-trip
    exactly) in ``<stage>/_shared/<key>/<page_id>.json``, where ``key`` hashes the family
    and the values of its ``SHARED_PARAMS``; a sibling variant with the same key reads it
    instead of running the model, so tesseract blocks + paragraphs cost one layout analysis
    and text_lines lines + blocks one DB pass. An entry records the image's identity (path,
    size, mtime) and is ignored when that changed; it is deleted once every variant sharing
    the key has written its page from it (``release``), and the pipeline drops what is left
    when the stage ends (newsbag ``rundir.drop_shared_passes``), so the cache holds only
    pages in flight.
    With ``SHARED_FLOOR`` the pass keeps every box above the sharing variants' lowest score
    cut (``floor``, part of the key) and each variant applies its own cut afterwards: one
    PP-PicoDet or YOLO pass serves variants that differ only in threshold.
    """

    def __init__(self, folder: Path, variant_dirs: list[Path], floor: float | None = None):
        self.folder = folder
        self.variant_dirs = variant_dirs  # every variant sharing the key, this one included
        self.floor = floor  # the lowest SHARED_FLOOR of those variants (part of the folder key)

    @staticmethod
    def key(family: str, params: dict, names, floor: float | None = None) -> str:
        import hashlib

        blob = json.dumps([family, {k: params.get(k) for k in names}, *([] if floor is None else [floor])],
                          sort_keys=True, default=str)
        return hashlib.sha256(blob.encode()).hexdigest()[:12]

    @staticmethod
    def _identity(page: dict) -> list:
        st = os.stat(page["image_path"])
        return [str(page["image_path"]), st.st_size, st.st_mtime_ns]

    def get(self, page: dict) -> tuple | None:
        """(output, made) of the page's stored pass, None when there is none for this image;
        ``made`` is the device and model the pass ran with (what the reader's page records)."""
        try:
            with open(self.folder / f"{page['page_id']}.json", encoding="utf-8") as fh:
                entry = json.load(fh)
            if entry.get("image") == self._identity(page):
                return entry["output"], {"device": str(entry["made"]["device"]), "model": str(entry["made"]["model"])}
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            pass
        return None

    def put(self, page: dict, output, made: dict) -> None:
        atomic_write_json(self.folder / f"{page['page_id']}.json",
                          {"image": self._identity(page), "output": output, "made": made}, durable=False)

    def release(self, page_id: str) -> None:
        """Delete the page's entry once every sharing variant has written its page from it.

        A sibling's page counts only if it is not older than the entry: on a rerun after a
        change (new scan, new parameters, ``--force``) the orchestrator deletes each variant's
        stale page just before running that variant, so the first variant still sees its
        sibling's old page, which must not release the pass the sibling is about to read.
        """
        entry = self.folder / f"{page_id}.json"
        try:
            made = entry.stat().st_mtime_ns
            if all((d / f"{page_id}.json").stat().st_mtime_ns >= made for d in self.variant_dirs):
                entry.unlink(missing_ok=True)
        except FileNotFoundError:  # no entry, or a sibling without its page yet
            pass


def shared_for(job: dict, detector_cls, out_dir: Path) -> SharedModelOutput | None:
    """The shared-output store of this job, or None when no other variant of the stage shares its model pass."""
    names = getattr(detector_cls, "SHARED_PARAMS", None)
    variants = job.get("stage_variants") or {}
    params = job.get("params", {})
    shares = getattr(detector_cls, "shares_pass", lambda _params: True)
    if not names or len(variants) < 2 or not shares(params):
        return None
    key = SharedModelOutput.key(job["family"], params, names)
    sharing = {v: p for v, p in variants.items()
               if shares(p) and SharedModelOutput.key(job["family"], p, names) == key}
    if len(sharing) < 2:
        return None
    floor_name = getattr(detector_cls, "SHARED_FLOOR", None)
    # The floor is part of the folder key: an entry computed at a higher floor (say, before a
    # variant with a lower cut was added to the config) is never read by a variant below it.
    floor = min(float(p[floor_name]) for p in sharing.values()) if floor_name else None
    return SharedModelOutput(out_dir.parent / SHARED_DIR / SharedModelOutput.key(job["family"], params, names, floor),
                             [out_dir.parent / v for v in sharing], floor)


def shared_floor(detector, own: float) -> float:
    """The score cut the model pass runs at: the sharing variants' lowest, else this variant's own."""
    shared = getattr(detector, "shared", None)
    return own if shared is None or shared.floor is None else shared.floor
