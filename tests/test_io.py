import json

import pytest

from newsbag.io import dumps_compact, dumps_strict


@pytest.mark.parametrize("obj", [
    {"a": [1, 2.5, None], "b": {"c": "é"}},          # string keys: orjson's fast path
    {1: "x", "y": {2.5: [float("nan")]}},              # other keys: written as strings, as the stdlib does
    {"big": 2 ** 70},                                  # past 64 bits: the stdlib
])
def test_dumps_compact_is_the_strict_json_without_spaces(obj):
    assert json.loads(dumps_compact(obj)) == json.loads(dumps_strict(obj, separators=(",", ":")))
