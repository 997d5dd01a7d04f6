"""Find model weights offline (model dir, HF cache, PaddleX cache) and stage them to node-local disk.

Compute nodes often have no internet and slow shared file systems: a runner resolves its
weights to a local directory without any network call when it can, and may copy them to
node-local disk. The copy is reused by later jobs on the node only when the staging root
outlives the job: $NEWSBAG_STAGE_DIR (a node-local disk that persists, e.g. /tmp/$USER or
/state/partition1/$USER) is; $SLURM_TMPDIR and the per-job $TMPDIR the sbatch jobs set are
deleted when the job ends, so there each job copies once for itself.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import sys
from pathlib import Path

from _errors import MissingDependency
from _events import log

STAGED_MARKER = ".newsbag-staged"


def packaged_file(package: str, relpath: str, install_hint: str) -> str:
    """Path of a model file shipped inside an installed wheel, found without importing it."""
    import importlib.util

    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise MissingDependency(f"{package} is not installed in {sys.executable}; {install_hint}")
    return os.path.join(list(spec.submodule_search_locations)[0], relpath)


def hf_offline() -> bool:
    return os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in ("1", "true", "yes", "on")


def hf_hub_cache(cache_dir: str = "") -> Path:
    """The hub cache directory huggingface_hub would use (cache_dir > HF_HUB_CACHE > HF_HOME/hub)."""
    if cache_dir:
        return Path(cache_dir).expanduser()
    if os.environ.get("HF_HUB_CACHE"):
        return Path(os.environ["HF_HUB_CACHE"]).expanduser()
    home = os.environ.get("HF_HOME") or os.path.join(os.environ.get("XDG_CACHE_HOME", "~/.cache"), "huggingface")
    return Path(home).expanduser() / "hub"


def hf_cached_snapshot(repo_id: str, cache_dir: str = "", revision: str = "main") -> Path | None:
    """Local snapshot dir of `repo_id` in the hub cache layout, or None (no network).

    Layout (huggingface_hub): <cache>/models--<org>--<name>/refs/<revision> holds a commit
    hash; the files are in .../snapshots/<hash>/.
    """
    repo_dir = hf_hub_cache(cache_dir) / ("models--" + repo_id.replace("/", "--"))
    ref = repo_dir / "refs" / revision
    if ref.is_file():
        snap = repo_dir / "snapshots" / ref.read_text().strip()
        if snap.is_dir():
            return snap
    snap = repo_dir / "snapshots" / revision  # a commit hash given as revision
    return snap if snap.is_dir() else None


def hf_prestage_hint(hub_id: str, cache_dir: str = "") -> str:
    """The command that puts `hub_id` into the HF cache on a login node (with internet)."""
    return (f"pre-stage on a login node: HF_HOME={hf_hub_cache(cache_dir).parent} hf download {hub_id}"
            + (f" --cache-dir {cache_dir}" if cache_dir else ""))


def resolve_hf_model(model_dir: str, hub_id: str, cache_dir: str = "", revision: str = "main",
                     download: bool = True) -> Path:
    """A local directory holding the model: `model_dir` if set, else the cached snapshot of `hub_id`.

    Downloads (huggingface_hub.snapshot_download) only when the cache misses, `download` is
    true and HF_HUB_OFFLINE is not set.

    Raises:
        MissingDependency: nothing local and offline (or the download failed), with the
            command that pre-stages the weights on a login node.
    """
    if model_dir:
        path = Path(model_dir).expanduser()
        if not path.is_dir():
            raise MissingDependency(f"model_dir {path} does not exist; pre-stage the weights there or fix the config")
        return path
    if not hub_id:
        raise MissingDependency("neither model_dir nor hub_id is set in the variant params")
    cached = hf_cached_snapshot(hub_id, cache_dir, revision)
    if cached is not None:
        return cached
    hint = hf_prestage_hint(hub_id, cache_dir)
    if not download:
        raise MissingDependency(f"{hub_id} is not in the HF cache {hf_hub_cache(cache_dir)}; {hint}")
    if hf_offline():
        raise MissingDependency(f"{hub_id} is not in the HF cache {hf_hub_cache(cache_dir)} and HF_HUB_OFFLINE=1; {hint}")
    try:
        from huggingface_hub import snapshot_download
    except ImportError as exc:
        raise MissingDependency(f"{hub_id} not cached and huggingface_hub is missing: {exc}; {hint}") from exc
    try:
        return Path(snapshot_download(hub_id, revision=revision, cache_dir=cache_dir or None))
    except Exception as exc:  # network errors come in many classes
        raise MissingDependency(f"could not download {hub_id}: {type(exc).__name__}: {exc}; {hint}") from exc


def paddlex_cache_dir(model_name: str) -> Path:
    """Where paddlex keeps an official model: <PADDLE_PDX_CACHE_HOME or ~/.paddlex>/official_models/<name>.

    paddlex drops "-0.9B" from PaddleOCR-VL names (official_models.py ``_get_model_local_path``).
    """
    home = Path(os.environ.get("PADDLE_PDX_CACHE_HOME") or "~/.paddlex").expanduser()
    folder = model_name.replace("-0.9B", "") if "PaddleOCR-VL" in model_name else model_name
    return home / "official_models" / folder


def paddlex_prestage_hint(call: str) -> str:
    """The command that fills the PaddleX cache on a login node (with internet); `call` is e.g.
    ``LayoutDetection(model_name='PP-DocLayoutV3')``."""
    home = os.environ.get("PADDLE_PDX_CACHE_HOME") or "~/.paddlex"
    cls = call.split("(")[0]
    return f'pre-stage on a login node: PADDLE_PDX_CACHE_HOME={home} python -c "from paddleocr import {cls}; {call}"'



def local_stage_root() -> Path:
    """Where weights are staged: $NEWSBAG_STAGE_DIR (node-persistent), then $SLURM_TMPDIR, $TMPDIR, /tmp."""
    for var in ("NEWSBAG_STAGE_DIR", "SLURM_TMPDIR", "TMPDIR"):
        if os.environ.get(var):
            return Path(os.environ[var])
    return Path("/tmp")


def stage_to_local(src: Path, root: Path | None = None) -> Path:
    """Copy a weights file or directory to node-local disk once; return the local path.

    Safe for several jobs on one node at once:
    - a finished copy is a folder ``<key>-<name>/`` holding the weights and a marker; it
      becomes visible in one ``os.rename`` of a complete temp folder, marker included, so no
      reader ever sees a half copy or a copy without its marker;
    - a lock file per source serialises the copying: a second job waits for the first's copy
      and reuses it instead of copying again;
    - a finished copy is never deleted or rewritten (another job may be loading from it); a
      folder without a marker (not one this code made: node-local disk outlives a newsbag
      install) is moved aside, not removed.
    """
    src = Path(src).resolve()
    if not src.exists():
        raise MissingDependency(f"cannot stage {src}: it does not exist")
    base = (Path(root) if root is not None else local_stage_root()) / "newsbag-weights"
    key = hashlib.sha1(str(src).encode()).hexdigest()[:10]
    final = base / f"{key}-{src.name}"
    dest = final / src.name
    if (final / STAGED_MARKER).is_file() and dest.exists():
        return dest
    base.mkdir(parents=True, exist_ok=True)
    with open(base / f".{key}.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes, also if the job is killed
        if (final / STAGED_MARKER).is_file() and dest.exists():
            log(f"reusing staged weights {dest}")
            return dest
        if final.exists():
            os.rename(final, base / f".{final.name}.unmarked-{os.getpid()}")
        tmp = base / f".{final.name}.tmp-{os.getpid()}"
        if tmp.exists():
            shutil.rmtree(tmp)  # our own pid's leftover: nobody else writes or reads it
        tmp.mkdir()
        if src.is_dir():
            shutil.copytree(src, tmp / src.name, symlinks=False)  # HF snapshots are symlinks into blobs/
        else:
            shutil.copy2(src, tmp / src.name)
        (tmp / STAGED_MARKER).write_text(str(src) + "\n")
        os.rename(tmp, final)
    log(f"staged {src} -> {dest}")
    return dest
