"""The contract repairs lying boxes at one place (io.read_page) for every reader."""

import json
import math

import pytest

from newsbag.contract import repair_regions, validate_source_page
from newsbag.io import dumps_strict, read_page, write_json


def page_with(boxes, width=100, height=50, scores=None):
    scores = scores or [0.5] * len(boxes)
    return {"page_id": "p", "image": {"path": "p.png", "width": width, "height": height},
            "source": {"stage": "s", "variant": "v"},
            "regions": [{"bbox_xyxy": b, "label": "text", "class": "text", "score": s} for b, s in zip(boxes, scores)]}


@pytest.mark.parametrize("box,expected,warning", [
    ([10, 10, 20, 20], [10, 10, 20, 20], None),                    # honest box: untouched
    ([math.nan, 0, 5, 5], None, "non_finite_box"),                 # NaN -> dropped
    ([0, 0, math.inf, 5], None, "non_finite_box"),                 # inf -> dropped
    ([0, -math.inf, 5, 5], None, "non_finite_box"),                # -inf -> dropped
    ([None, 0, 5, 5], None, "non_finite_box"),                     # null coordinate -> dropped
    ([30, 25, 12, 2], [12, 2, 30, 25], "inverted_box"),            # inverted corners -> swapped
    ([-5, -5, 10, 1e9], [0, 0, 10, 50], "clipped_box"),            # reaches off the page -> clipped
    ([500, 500, 600, 600], None, "outside_page_box"),              # wholly off the page -> dropped
    ([-20, 10, -1, 20], None, "outside_page_box"),                 # left of the page -> dropped
])
def test_repair_table(box, expected, warning):
    page = page_with([box])
    before = json.dumps(page)
    repaired, counts = repair_regions(page)
    assert json.dumps(page) == before  # the input is not changed
    if expected is None:
        assert repaired["regions"] == []
    else:
        assert repaired["regions"][0]["bbox_xyxy"] == expected
    if warning is None:
        assert counts == {} and repaired is page
    else:
        assert counts[warning] == 1 and repaired["warnings"][warning] == 1


def test_inverted_and_clipped_counts_add_to_existing_warnings():
    page = page_with([[30, 25, 12, 2], [-5, 0, 10, 10], [1, 1, 2, 2]], scores=[0.1, math.nan, 0.3])
    page["warnings"] = {"clipped_box": 2, "unknown_label:x": 1}
    repaired, counts = repair_regions(page)
    assert counts == {"inverted_box": 1, "clipped_box": 1, "non_finite_score": 1}
    assert repaired["warnings"] == {"clipped_box": 3, "unknown_label:x": 1, "inverted_box": 1, "non_finite_score": 1}
    assert [r["score"] for r in repaired["regions"]] == [0.1, None, 0.3]


def test_empty_page_is_unchanged():
    page = page_with([])
    assert repair_regions(page) == (page, {})


@pytest.mark.parametrize("bad,message", [
    ({"width": math.nan}, "image.width must be a positive number"),
    ({"height": 0}, "image.height must be a positive number"),
    ({"width": "wide"}, "image.width must be a positive number"),
])
def test_page_size_must_be_real(bad, message):
    page = page_with([[1, 1, 2, 2]])
    page["image"].update(bad)
    with pytest.raises(ValueError, match=message):
        validate_source_page(page)


def test_read_page_repairs_for_every_reader(tmp_path, caplog):
    path = tmp_path / "p.json"
    # A foreign runner's file: bare NaN / Infinity tokens, which json.load accepts.
    path.write_text(json.dumps(page_with([[math.nan, 0, 1, 1], [0, 0, math.inf, 1], [9, 9, 1, 1], [1, 1, 5, 5]])))
    page = read_page(path, "p")
    assert [r["bbox_xyxy"] for r in page["regions"]] == [[1, 1, 9, 9], [1, 1, 5, 5]]
    assert page["warnings"] == {"non_finite_box": 2, "inverted_box": 1}
    assert "repaired boxes: inverted_box 1, non_finite_box 2" in caplog.text and "page p" in caplog.text


def _strict(text):
    def refuse(token):
        raise ValueError(f"non-strict JSON token {token}")
    return json.loads(text, parse_constant=refuse)


def test_json_is_written_strictly(tmp_path):
    obj = {"a": math.nan, "b": [1.0, math.inf, -math.inf], "c": {"d": 0.5}}
    assert _strict(dumps_strict(obj)) == {"a": None, "b": [1.0, None, None], "c": {"d": 0.5}}
    write_json(tmp_path / "x.json", obj)
    assert _strict((tmp_path / "x.json").read_text())["b"] == [1.0, None, None]
