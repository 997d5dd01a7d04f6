"""The search space: read from the declared options, within their ranges, and the current recommendation first."""

from dataclasses import fields

import optuna
import pytest

from newsbag.fusion.options import METHODS, parse_fusion_config
from newsbag.tuning.space import SPREAD, WEIGHT_RANGE, baseline_trial, suggest, to_variant_spec

SOURCES = ["a/x", "b/y", "c/z"]


def _variant(name):
    return next(v for v in parse_fusion_config({}).variants if v.name == name)


@pytest.mark.parametrize("name", ["paragraphs", "vote", "union"])
def test_the_baseline_trial_gives_the_recommendation_back(name):
    base = _variant(name)
    params = baseline_trial(base, ["consensus", "paragraphs"], SOURCES, SOURCES[:2])
    c = suggest(optuna.trial.FixedTrial(params), base, ["consensus", "paragraphs"], SOURCES)
    assert (c.method, c.members) == (base.method, tuple(SOURCES[:2]))
    for f in fields(c.params):
        if f.name != "weights":
            assert getattr(c.params, f.name) == getattr(base.params, f.name), f.name
    if base.method == "consensus":
        assert c.params.weights == (("a/x", 1.0), ("b/y", 1.0))   # consensus averages by weight; 1 = as today


def test_best_single_declares_nothing_so_no_baseline_trial():
    assert baseline_trial(_variant("best_single"), ["consensus", "paragraphs"], SOURCES, SOURCES) == {}


def test_trials_stay_in_the_declared_ranges_and_near_the_recommendation():
    base = _variant("paragraphs")
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=0))
    seen = []
    for _ in range(40):
        trial = study.ask()
        seen.append(suggest(trial, base, ["consensus", "paragraphs"], SOURCES))
        study.tell(trial, 0.0)
    assert {c.method for c in seen} == {"consensus", "paragraphs"}
    for c in seen:
        start = base.params if c.method == base.method else METHODS[c.method]()
        for f in fields(c.params):
            opt, value, was = f.metadata["option"], getattr(c.params, f.name), getattr(start, f.name)
            if opt.kind in ("number", "integer") and not opt.nullable and was:
                assert opt.minimum is None or value >= opt.minimum, f.name
                assert opt.maximum is None or value <= opt.maximum, f.name
                slack = 1 if opt.kind == "integer" else 1e-9
                assert was / SPREAD - slack <= value <= was * SPREAD + slack, f.name
            if opt.choices:
                assert value in opt.choices
        if c.method == "consensus":   # weights only where the method averages by them
            assert [s for s, _ in c.params.weights] == list(c.members)
            assert all(WEIGHT_RANGE[0] <= w <= WEIGHT_RANGE[1] for _, w in c.params.weights)
        else:
            assert "weights" not in {f.name for f in fields(c.params)}


def test_the_tuned_spec_is_a_config_entry_the_config_accepts():
    base = _variant("paragraphs")
    c = suggest(optuna.trial.FixedTrial({**baseline_trial(base, ["paragraphs"], SOURCES, SOURCES),
                                         "paragraphs.join_gap": 0.5}), base, ["paragraphs"], SOURCES)
    spec = to_variant_spec(c, base)
    assert spec == {"sources": SOURCES, "method": "paragraphs", "params": {"granularity": "auto", "join_gap": 0.5}}
    again = next(v for v in parse_fusion_config({"variants": {"tuned": spec}}).variants)
    assert again.params == c.params.__class__(**{**vars(c.params), "granularity": ("auto",)})
