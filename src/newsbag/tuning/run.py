"""`newsbag tune`: fit the fusion to ground-truth pages by cross-validation, and adopt it only when held-out pages gain.

Protocol: the pages with ground truth fall into folds by issue (`protocol.fold_split`). For each
fold an Optuna TPE study (seeded) searches the fusion settings (`space.suggest`) on the other
folds' pages, maximising text IoU-F1 with pixel F1 kept within `protocol.PIXEL_GUARD` of the
current recommendation's; its best setting is then scored on the held-out fold. The held-out
gains over the current recommendation give a bootstrap 95 % interval by issue; when it lies
above 0 (`protocol.decide`), a last study on every page gives the ``tuned`` variant, which goes
into the run's config, is fused for every page and pinned as recommended.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, fields
from pathlib import Path

import numpy as np

from .. import manifest, rundir
from ..config import load_run_config, to_jsonable
from ..errors import InputError
from ..fusion.pin import write_pin
from ..fusion.options import DEFAULT_FUSION_CFG, METHODS, Variant, parse_fusion_config
from ..io import atomic_write_text, write_json
from ..progress import track
from ..recommend import fusion_section
from ..review.evaluation import write_evaluation_data
from ..stages import run_stage
from ..tables import tsv_text
from .pages import TunePage, load_pages, score_candidate
from .protocol import PIXEL_GUARD, bootstrap_interval, decide, fold_split
from .space import Candidate, baseline_trial, suggest, to_variant_spec

__all__ = ["TuneOptions", "run_tune", "TUNED"]

TUNED = "tuned"   # the variant tuning writes into the run's config


@dataclass(frozen=True)
class TuneOptions:
    trials: int = 40     # settings tried per study
    seed: int = 0
    folds: int = 3
    bootstrap: int = 2000


@dataclass(frozen=True)
class _Search:
    """What a study searches from: the current recommendation and the members it may take."""

    base: Variant                 # the recommended variant as configured
    methods: list[str]            # configured methods that declare options
    sources: list[str]            # region sources the searched methods' variants take
    members: list[str]            # the recommended variant's own
    order: tuple[str, ...]        # the run's source order ("auto" granularity)


def _search(run_dir: Path, current: str) -> _Search:
    """What tune searches, from the run's fusion config and the sources each variant took last time."""
    summary = rundir.fusion_summary(run_dir)
    cfg = parse_fusion_config(fusion_section(run_dir))
    base = next((v for v in cfg.variants if v.name == current), None)
    ran = summary.get("variants") or {}
    if base is None or current not in ran:
        raise InputError(f"tune: the recommended variant {current!r} is not in the run's fusion config; "
                         "rerun fusion first")
    methods = sorted({v.method for v in cfg.variants if v.name in ran and fields(METHODS[v.method])})
    sources = sorted({s for v in cfg.variants if v.method in methods for s in ran.get(v.name, {}).get("sources", [])}
                     | set(ran[current]["sources"]))
    if not methods or not sources:
        raise InputError("tune: no configured fusion method declares options to tune")
    order = tuple(summary.get("source_order") or sources)
    return _Search(base, methods, sources, sorted(ran[current]["sources"]), order)


def _study(pages: list[TunePage], search: _Search, opts: TuneOptions, seed: int, label: str, rows: list[dict],
           tracker) -> Candidate | None:
    """The best feasible candidate of one TPE study on `pages` (None: none kept pixel F1 within the guard)."""
    import optuna

    floor = float(np.mean([p.current[1] for p in pages])) - PIXEL_GUARD
    tried: dict[int, Candidate] = {}

    def objective(trial) -> float:
        c = tried[trial.number] = suggest(trial, search.base, search.methods, search.sources)
        scores = score_candidate(pages, c, search.order)
        iou, pixel = float(scores.iou_f1.mean()), float(scores.pixel_f1.mean())
        feasible = pixel >= floor
        rows.append({"fold": label, "trial": trial.number, "method": c.method, "iou_f1": iou, "pixel_f1": pixel,
                     "feasible": "yes" if feasible else "no", "params": json.dumps(trial.params, sort_keys=True)})
        tracker.advance("ok")
        return iou if feasible else iou - 1.0

    study = optuna.create_study(direction="maximize", sampler=optuna.samplers.TPESampler(seed=seed))
    if start := baseline_trial(search.base, search.methods, search.sources, search.members):
        study.enqueue_trial(start)
    study.optimize(objective, n_trials=opts.trials)
    best = study.best_trial
    return tried[best.number] if best.value is not None and best.value >= 0 else None


def _held_out(pages: list[TunePage], best: Candidate | None, search: _Search) -> tuple[np.ndarray, np.ndarray]:
    """(P, 2) tuned and current (iou_f1, pixel_f1) of held-out pages; no feasible setting keeps the current."""
    current = np.array([p.current for p in pages])
    if best is None:
        return current, current
    scores = score_candidate(pages, best, search.order)
    return np.column_stack([scores.iou_f1, scores.pixel_f1]), current


def _cross_validate(pages: list[TunePage], folds: list[list[str]], search: _Search, opts: TuneOptions
                    ) -> tuple[list[dict], list[dict], list[dict]]:
    """(trial rows, fold rows, held-out page rows) of the cross-validation over `folds` (page ids)."""
    by_id = {p.page_id: p for p in pages}
    trial_rows, fold_rows, page_rows = [], [], []
    for k, test_ids in enumerate(folds):
        train = [p for p in pages if p.page_id not in test_ids]
        test = [by_id[i] for i in test_ids]
        with track(f"tune fold {k + 1}/{len(folds)}", opts.trials) as tracker:
            best = _study(train, search, opts, opts.seed + k, str(k), trial_rows, tracker)
        tuned, current = _held_out(test, best, search)
        fold_rows.append({"fold": k, "train_pages": len(train), "test_pages": len(test),
                          "issues": " ".join(sorted({p.issue for p in test})),
                          "method": best.method if best else "", "tuned_iou_f1": float(tuned[:, 0].mean()),
                          "current_iou_f1": float(current[:, 0].mean()), "tuned_pixel_f1": float(tuned[:, 1].mean()),
                          "current_pixel_f1": float(current[:, 1].mean())})
        page_rows += [{"page_id": p.page_id, "issue": p.issue, "fold": k, "tuned_iou_f1": t[0], "current_iou_f1": c[0],
                       "gain": t[0] - c[0], "tuned_pixel_f1": t[1], "current_pixel_f1": c[1]}
                      for p, t, c in zip(test, tuned, current)]
    return trial_rows, fold_rows, page_rows


def _adopt(run_dir: Path, spec: dict, reason: str) -> dict:
    """Write `spec` as the ``tuned`` variant into the run's config, pin it, and fuse every page."""
    def change(now: dict | None) -> dict:
        now = now or to_jsonable(load_run_config(run_dir, None).resolved)
        stage = next((s for s in now.get("stages", []) if s.get("kind") == "fusion"), None)
        if stage is None:
            raise InputError(f"{rundir.config_record(run_dir)}: no fusion stage to add the tuned variant to")
        stage["variants"] = {**(stage.get("variants") or DEFAULT_FUSION_CFG["variants"]), TUNED: spec}
        return now

    rundir.update_config_record(run_dir, change)
    write_pin(run_dir, TUNED, reason)
    return run_stage("fusion", run_dir, manifest.manifest_page_ids(run_dir), fusion_section(run_dir))


def run_tune(run_dir: Path, gt_dir: Path, opts: TuneOptions = TuneOptions()) -> dict:
    """Tune the fusion on the run's ground-truth pages; records under RUN/outputs/tuning/.

    Returns:
        {"verdict": one line, "adopted", "gain": {mean, low, high}, "pixel_change", "pages",
        "skipped", "folds", "tuned": the variant spec or None, "written": [paths]}

    Raises:
        InputError: no recommendation or fusion yet, fewer than two usable pages or issues.
    """
    import optuna

    run_dir = Path(run_dir)
    current = rundir.recommended_variant(run_dir)
    if current is None:
        raise InputError(f"tune: {run_dir} has no recommended variant; run fusion first")
    search = _search(run_dir, current)
    pages, skipped = load_pages(run_dir, gt_dir, parse_fusion_config(fusion_section(run_dir)), current)
    try:
        folds = fold_split({p.page_id: p.issue for p in pages}, opts.folds, opts.seed)
    except ValueError as exc:
        raise InputError(f"tune: {gt_dir}: {exc} (issues are read from the pages' paths)") from None
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    trial_rows, fold_rows, page_rows = _cross_validate(pages, folds, search, opts)
    gain = bootstrap_interval(np.array([r["gain"] for r in page_rows]), [r["issue"] for r in page_rows],
                              opts.seed, opts.bootstrap)
    pixel_change = float(np.mean([r["tuned_pixel_f1"] - r["current_pixel_f1"] for r in page_rows]))
    decision = decide(gain, pixel_change, len(pages))
    spec = None
    if decision.adopt:
        with track("tune on every page", opts.trials) as tracker:
            best = _study(pages, search, opts, opts.seed + len(folds), "all", trial_rows, tracker)
        spec = to_variant_spec(best, search.base) if best else None
    result = {"verdict": decision.reason if spec or not decision.adopt else
              "kept the current recommendation: no setting kept pixel F1 on all pages",
              "adopted": spec is not None, "current": current, "gain": vars(gain), "pixel_change": pixel_change,
              "pages": len(pages), "skipped": skipped, "folds": fold_rows, "tuned": spec,
              "search": {"methods": search.methods, "sources": search.sources, "trials": opts.trials,
                         "seed": opts.seed, "folds": len(folds)}}
    written = _write_records(run_dir, result, trial_rows, fold_rows, page_rows)
    if spec is not None:
        _adopt(run_dir, spec, decision.reason)
        written.append(rundir.fused_dir(run_dir, TUNED))
    write_evaluation_data(run_dir)   # the gallery shows the tuning beside the ground truth
    return {**result, "written": [str(p) for p in written]}


def _write_records(run_dir: Path, result: dict, trial_rows: list[dict], fold_rows: list[dict],
                   page_rows: list[dict]) -> list[Path]:
    out = rundir.tuning_dir(run_dir)
    paths = [out / "trials.tsv", out / "folds.tsv", out / "pages.tsv", out / "summary.json"]
    for path, rows in zip(paths, (trial_rows, fold_rows, page_rows)):
        atomic_write_text(path, tsv_text(rows, list(rows[0]) if rows else []))
    write_json(paths[3], result)
    return paths
