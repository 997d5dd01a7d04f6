"""A runner's tool.json parameters load into options (`tool_spec.parameter_options`) and are
checked by the one parser every level of the config goes through."""

import json
from dataclasses import fields

import pytest

from newsbag.errors import ConfigError
from newsbag.options import markdown_table
from newsbag.tool_spec import load_tool_spec, parameter_options, validate_params

_SPEC = {"labels": {"text": "text"}, "parameters": {
    "mode": {"type": "string", "default": "fast", "enum": ["fast", "best"], "description": "how"},
    "tokens": {"type": "integer", "default": 64, "minimum": 16, "maximum": 256},
    "ratio": {"type": "number", "default": 60},
    "mean": {"type": "array", "default": []},
    "extra": {"type": "object", "default": {}},
    "weights": {"type": "string", "default": "", "path": True},
    "threads": {"type": "integer", "default": 0, "fingerprint": False},
    "hint": {"description": "no type: a string, no default: null"},
}}


def _write(tmp_path, spec: dict):
    (tmp_path / "toy.py").write_text("")
    (tmp_path / "toy.tool.json").write_text(json.dumps(spec))
    return tmp_path


def test_every_declared_parameter_is_an_option_with_its_type_range_and_choices():
    declared = {f.name: f.metadata["option"] for f in fields(parameter_options(_SPEC))}
    assert list(declared) == list(_SPEC["parameters"])
    assert declared["mode"].describe() == "one of fast, best"
    assert declared["tokens"].describe() == "a whole number in [16, 256]"
    assert declared["hint"].describe() == "a string, or null"
    assert "a path, relative to the config file" in declared["weights"].doc
    assert "changing it redoes nothing" in declared["threads"].doc
    assert "| `mode` | `\"fast\"` | one of fast, best | how |" in markdown_table(parameter_options(_SPEC))


def test_values_reach_the_runner_as_written_and_defaults_fill_the_rest():
    """Page fingerprints hold the parameters: 60 written as a whole number must stay 60, not 60.0."""
    got = validate_params("v", {"ratio": 60, "mean": [1, 2.5], "tokens": 16}, _SPEC)
    assert got == {**{n: d.get("default") for n, d in _SPEC["parameters"].items()},
                   "ratio": 60, "mean": [1, 2.5], "tokens": 16}
    assert type(got["ratio"]) is int and list(got) == list(_SPEC["parameters"])


@pytest.mark.parametrize("params, message", [
    ({"mdoe": "best"}, "c.json: stage 'toy' variant 'v': unknown key 'mdoe'; did you mean 'mode'? (known: "),
    ({"mode": "slow"}, "c.json: stage 'toy' variant 'v': mode must be one of fast, best, got 'slow'"),
    ({"tokens": 8}, "c.json: stage 'toy' variant 'v': tokens must be a whole number in [16, 256], got 8"),
    ({"tokens": True}, "tokens must be a whole number in [16, 256], got True"),     # JSON true is no count
    ({"ratio": "60"}, "ratio must be a number, got '60'"),
    ({"mean": "1,2"}, "mean must be a list, got '1,2'"),
    ({"weights": None}, "weights must be a string, got None"),                      # null only where the default is
])
def test_a_bad_parameter_is_one_line_in_the_shape_of_every_level(params, message):
    with pytest.raises(ConfigError) as exc:
        validate_params("c.json: stage 'toy' variant 'v'", params, _SPEC)
    assert message in str(exc.value) and "\n" not in str(exc.value)


@pytest.mark.parametrize("parameter, message", [
    ({"type": "float", "default": 1.0}, "parameter 'p': type must be one of string, number, integer, boolean, "
                                        "object, array, got 'float'"),
    ({"type": "integer", "default": 1, "enum": [1, 2]}, "parameter 'p': an enum must list strings of a \"string\" parameter"),
    ({"type": "string", "default": "x", "enum": ["a", "b"]}, "parameter 'p' default must be one of a, b, got 'x'"),
    ({"type": "integer", "default": 2, "minimum": 16}, "parameter 'p' default must be a whole number >= 16, got 2"),
])
def test_a_declaration_the_options_cannot_hold_is_refused_at_load_naming_the_file(tmp_path, parameter, message):
    root = _write(tmp_path, {"labels": {"text": "text"}, "parameters": {"p": parameter}})
    with pytest.raises(ConfigError) as exc:
        load_tool_spec("toy", root)
    assert str(exc.value) == f"{root / 'toy.tool.json'}: {message}"


def test_a_parameter_name_that_is_no_identifier_is_refused_at_load(tmp_path):
    root = _write(tmp_path, {"labels": {"text": "text"}, "parameters": {"class": {"type": "string", "default": ""}}})
    with pytest.raises(ConfigError, match=r"toy.tool.json: parameters: .*'class'"):
        load_tool_spec("toy", root)
