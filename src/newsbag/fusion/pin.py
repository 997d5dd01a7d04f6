"""Which fused variant a run recommends, and who chose it: a pin the run owns, else the config, else the score.

The pin (RUN/recommended.json, `rundir.pin_path`) is written by ``newsbag recommend`` (by the
user) and ``newsbag tune`` (by tuning); it outlives reruns of fusion and a new --config, which
rewrite config.resolved.json. Fusion reads it each time it ranks the variants (`choose_recommended`),
so summary.json, `status`, exports and transcription, which all read the summary, agree.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from .. import rundir
from ..io import read_json, write_json
from .options import FusionConfig

__all__ = ["Pin", "read_pin", "write_pin", "choose_recommended", "is_pinned"]


@dataclass(frozen=True)
class Pin:
    variant: str
    by: str   # "user", or "tuned on N pages: held-out gain ..." (RUN/recommended.json's keys)


def read_pin(run_dir: Path) -> Pin | None:
    """The run's pin, or None (no pin, or one that cannot be read: fusion then ranks without it)."""
    try:
        value = read_json(rundir.pin_path(run_dir))
    except (OSError, ValueError):
        return None
    ok = isinstance(value, dict) and isinstance(value.get("variant"), str) and isinstance(value.get("by"), str)
    return Pin(value["variant"], value["by"]) if ok else None


def write_pin(run_dir: Path, variant: str, by: str) -> None:
    """Pin `variant` as the run's recommendation, `by` saying who chose it (atomic)."""
    if by != "user" and not by.startswith("tuned"):
        raise ValueError(f"a pin is made by the user or by tuning, got {by!r}")
    write_json(rundir.pin_path(run_dir), {"variant": variant, "by": by})


def choose_recommended(cfg: FusionConfig, active: dict[str, list[str]], vrows: list[dict],
                       pin: Pin | None = None) -> tuple[str | None, str]:
    """(the recommended variant, who chose it): the run's `pin` ("user", "tuned on ..."), else the
    config's ``recommended`` ("config"), else the best no-GT score ("score"); a pin or config
    choice whose variant did not run is named in the reason of the next choice."""
    skipped = []
    if pin is not None:
        if pin.variant in active:
            return pin.variant, pin.by
        skipped.append(f"pinned {pin.variant!r} ({pin.by.split(':')[0]}) was skipped")
    if cfg.recommended is not None:
        if cfg.recommended in active:
            return cfg.recommended, "config" + (f" ({skipped[0]})" if skipped else "")
        skipped.append(f"pinned {cfg.recommended!r} was skipped")
    scored = [r for r in vrows if r["score"] is not None]
    recommended, by = (scored[0]["name"], "score") if scored else (None, "none")
    return recommended, by + (f" ({'; '.join(skipped)})" if skipped else "")


def is_pinned(by: str) -> bool:
    """Whether `choose_recommended`'s reason is a pin (user, tuning, config) rather than the score."""
    return not by.startswith(("score", "none"))
