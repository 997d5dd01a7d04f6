"""The commands that choose the run's recommended layout: `recommend` (pin one) and `tune` (fit one to ground truth).

Each is built by a function that takes cli.py's shared option decorator (`--run-dir`,
`--log-level`), so this module never imports cli.py; cli.py calls `register`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable

import click

__all__ = ["register"]


def register(group: click.Group, common: Callable) -> None:
    """Add `recommend` and `tune` to the CLI `group`, each with its shared options (`common`)."""
    group.add_command(recommend_command(common))
    group.add_command(tune_command(common))


def recommend_command(common: Callable) -> click.Command:
    @click.command("recommend")
    @common
    @click.argument("variant")
    def recommend(run_dir: Path, variant: str) -> None:
        """Pin the fused VARIANT as the run's recommendation (exports and transcription follow it)."""
        from .recommend import pin_recommended

        summary = pin_recommended(run_dir, variant)
        click.echo(f"recommended: {summary['recommended_variant']} (by {summary['recommended_by']})")

    return recommend


def tune_command(common: Callable) -> click.Command:
    @click.command("tune")
    @common
    @click.option("--gt", "gt_dir", required=True, type=click.Path(exists=True, path_type=Path),
                  help="Ground truth as `evaluate --gt` reads it: a PAGE-XML or ALTO folder, a COCO file, or nzz.")
    @click.option("--trials", type=click.IntRange(min=1), default=40, show_default=True,
                  help="Fusion settings tried per fold (and for the final fit).")
    @click.option("--seed", type=int, default=0, show_default=True, help="Seed of the optimiser and the bootstrap.")
    @click.option("--folds", type=click.IntRange(min=2), default=3, show_default=True,
                  help="Cross-validation folds, grouped by issue.")
    def tune(run_dir: Path, gt_dir: Path, trials: int, seed: int, folds: int) -> None:
        """Fit the fusion to corrected pages (GT) and adopt it as `tuned` when held-out pages gain."""
        from .tuning.run import TuneOptions, run_tune

        result = run_tune(run_dir, gt_dir, TuneOptions(trials=trials, seed=seed, folds=folds))
        click.echo(result["verdict"])
        for path in result["written"]:
            click.echo(path)

    return tune
