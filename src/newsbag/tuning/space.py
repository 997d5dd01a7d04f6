"""The search space of tuning, read from the fusion methods' declared options (`options.Option`).

A trial picks a method among the configured ones that declare options, each of that method's
options within its declared range or choices, which region sources take part, and (consensus
only: the one method that averages coordinates by ``weights``) each member's weight. A number
is searched within its declared range from a third to three times its value in the current
recommendation (the method's default for another method), on a log scale; nullable options,
lists and pairs keep the recommendation's value.
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from typing import Any

from ..fusion.options import METHODS, Variant
from ..options import Option

__all__ = ["Candidate", "suggest", "baseline_trial", "to_variant_spec"]

# Weights, where a method takes them: a member counts from a quarter to four times another.
WEIGHT_RANGE = (0.25, 4.0)
# A number is searched from a third to three times its value in the current recommendation.
SPREAD = 3.0


@dataclass(frozen=True)
class Candidate:
    """One fusion setting a trial tries."""

    method: str
    params: Any                      # the method's params dataclass
    members: tuple[str, ...]         # region sources taking part, sorted


def _tunable(opt: Option) -> bool:
    return not opt.nullable and (opt.kind in ("integer", "number", "boolean") or opt.kind == "string" and opt.choices)


def _tunable_options(method: str) -> list[tuple[str, Option]]:
    """(name, declaration) of each option of `method` a trial searches, in declared order."""
    return [(f.name, f.metadata["option"]) for f in fields(METHODS[method]) if _tunable(f.metadata["option"])]


def _takes_weights(method: str) -> bool:
    return "weights" in {f.name for f in fields(METHODS[method])}


def _bounds(opt: Option, value: float) -> tuple[float, float]:
    """The declared range, narrowed to a third to three times the starting `value` (the whole
    declared range of a [0, 1] share held thresholds like a gutter of 80 % of the page width,
    and random trials there were all far worse than the recommendation)."""
    low = opt.minimum if opt.minimum is not None else 0.0
    high = opt.maximum if opt.maximum is not None else float("inf")
    if value > 0:
        low, high = max(low, value / SPREAD), min(high, value * SPREAD)
    return low, (low + 1 if high == float("inf") else high)


def _suggest_option(trial, name: str, opt: Option, value: Any) -> Any:
    if opt.kind == "boolean":
        return trial.suggest_categorical(name, [False, True])
    if opt.kind == "string":
        return trial.suggest_categorical(name, list(opt.choices))
    low, high = _bounds(opt, value)
    if opt.kind == "integer":
        return trial.suggest_int(name, max(int(low), 0), max(int(high), int(low)))
    low += 1e-6 if opt.above and low == opt.minimum else 0.0
    return trial.suggest_float(name, low, high, log=low > 0)


def suggest(trial, base: Variant, methods: list[str], sources: list[str]) -> Candidate:
    """The candidate an Optuna `trial` proposes (define-by-run: a method's options are asked only
    when it is picked); names are "method", "<method>.<option>", "use:<source>", "weight:<source>"."""
    method = trial.suggest_categorical("method", methods)
    start = base.params if base.method == method else METHODS[method]()
    chosen = {name: _suggest_option(trial, f"{method}.{name}", opt, getattr(start, name))
              for name, opt in _tunable_options(method)}
    members = tuple(s for s in sources if trial.suggest_categorical(f"use:{s}", [True, False]))
    if _takes_weights(method):
        chosen["weights"] = tuple((s, trial.suggest_float(f"weight:{s}", *WEIGHT_RANGE, log=True)) for s in members)
    return Candidate(method, replace(start, **chosen), members)


def baseline_trial(base: Variant, methods: list[str], sources: list[str], members: list[str]) -> dict[str, Any]:
    """The trial parameters that give the current recommendation back (tried first), or {} when
    its method is not searched (best_single declares no option)."""
    if base.method not in methods:
        return {}
    out: dict[str, Any] = {"method": base.method}
    out.update({f"{base.method}.{name}": getattr(base.params, name) for name, _ in _tunable_options(base.method)})
    out.update({f"use:{s}": s in members for s in sources})
    weights = dict(getattr(base.params, "weights", ()) or ())
    if _takes_weights(base.method):
        out.update({f"weight:{s}": min(max(weights.get(s, 1.0), WEIGHT_RANGE[0]), WEIGHT_RANGE[1])
                    for s in members})
    return out


def to_variant_spec(c: Candidate, base: Variant) -> dict:
    """The config entry of the tuned variant (fusion.variants.<name>): exact member names as its
    sources, and the options that differ from the method's defaults; granularity as the configured
    recommendation had it (``"auto"``: the run's source leaderboard, as the trials used)."""
    defaults = METHODS[c.method]()
    params: dict[str, Any] = {}
    for f in fields(c.params):
        value = getattr(c.params, f.name)
        if f.name == "granularity":
            given = getattr(base.params, "granularity", ()) if base.method == c.method else ()
            params[f.name] = "auto" if given in ((), ("auto",)) else list(given)
        elif value != getattr(defaults, f.name):
            params[f.name] = dict(value) if f.name == "weights" else list(value) if isinstance(value, tuple) else value
    return {"sources": list(c.members), "method": c.method, "params": params}
