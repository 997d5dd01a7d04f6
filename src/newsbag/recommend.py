"""Pin a fused variant as the run's recommendation and let fusion's summary say so (`newsbag recommend`)."""

from __future__ import annotations

from pathlib import Path

from . import rundir
from .config import load_run_config, to_jsonable
from .errors import InputError
from .fusion.pin import write_pin

__all__ = ["pin_recommended", "refresh_fusion_summary", "fusion_section"]


def fusion_section(run_dir: Path) -> dict:
    """The fusion section of the config the run records (the embedded one when it records none)."""
    return to_jsonable(load_run_config(run_dir, None).builtin("fusion").options)


def refresh_fusion_summary(run_dir: Path) -> dict:
    """Rerun fusion over no page: its leaderboards and summary.json are rewritten from the stored
    per-page records with the pin read again, and no page is fused."""
    from .stages import run_stage   # the stages' code: only when fusion runs

    return run_stage("fusion", Path(run_dir), [], fusion_section(run_dir))


def pin_recommended(run_dir: Path, variant: str, by: str = "user") -> dict:
    """Pin `variant` (a fused variant of the run) as recommended by `by`; returns fusion's summary.

    Raises:
        InputError: the run has no fusion summary yet, or `variant` has no fused pages.
    """
    run_dir = Path(run_dir)
    summary = rundir.fusion_summary(run_dir)
    if not summary:
        raise InputError(f"{rundir.fusion_dir(run_dir) / 'summary.json'}: no fusion summary; "
                         f"run `newsbag fuse --run-dir {run_dir}` first")
    fused = rundir.discover_fused(run_dir)
    if variant not in fused:
        raise InputError(f"{rundir.fusion_dir(run_dir)}: no fused variant {variant!r}; "
                         f"choose from {', '.join(fused) or 'none (run fusion first)'}")
    write_pin(run_dir, variant, by)
    return refresh_fusion_summary(run_dir)
