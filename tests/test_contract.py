"""The contract repairs lying boxes at one place (page_reader.read_page) for every reader."""

import json
import math

import numpy as np
import pytest

from newsbag.contract import MAX_REGIONS
from newsbag.io import dumps_strict, write_json
from newsbag.page_reader import read_page
from newsbag.page_repair import repair_regions, validate_source_page


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
    ([50, 10, 50, 20], None, "degenerate_box"),                    # x0 == x1 -> dropped
    ([10, 30, 40, 30.5], None, "degenerate_box"),                  # half a pixel high -> dropped
    ([100, 10, 100, 20], None, "degenerate_box"),                  # on the right page edge -> dropped
    ([-5, 10, 0.5, 20], None, "degenerate_box"),                   # a sliver once clipped -> dropped
    ([10, 10, 11, 11], [10, 10, 11, 11], None),                    # one pixel: kept
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


@pytest.mark.parametrize("bad,message", [
    ({"bbox_xyxy": [1, 2, 3], "label": "text"}, r"regions\[7\].bbox_xyxy must be 4 numbers"),     # 3 numbers
    ({"bbox_xyxy": [1, True, 3, 4], "label": "text"}, r"regions\[7\].bbox_xyxy must be 4 numbers"),  # a bool
    ({"bbox_xyxy": [1, "2", 3, 4], "label": "text"}, r"regions\[7\].bbox_xyxy must be 4 numbers"),   # a string
    ({"bbox_xyxy": None, "label": "text"}, r"regions\[7\].bbox_xyxy must be 4 numbers"),             # no box
    ({"bbox_xyxy": [1, 2, 3, 4], "label": 5}, r"regions\[7\].label must be a string"),               # label
    ("text", r"regions\[7\].bbox_xyxy must be 4 numbers"),                                            # not an object
])
def test_validation_names_the_first_bad_region_among_many_good_ones(bad, message):
    page = page_with([[1, 1, 2, 2]] * 12)
    page["regions"][7] = bad
    with pytest.raises(ValueError, match=message):
        validate_source_page(page)


def test_a_page_with_more_regions_than_any_layout_is_refused_naming_the_count():
    """200,000 boxes in one 22 MB source page took fusion to 24 GB and the kernel's OOM kill
    (every page of the call lost); now that source is refused on read, as a page that is not JSON is."""
    page = page_with([[1, 1, 2, 2]] * (MAX_REGIONS + 1))
    with pytest.raises(ValueError, match=rf"^{MAX_REGIONS + 1} regions, over the {MAX_REGIONS} a page may hold"):
        validate_source_page(page)
    validate_source_page(page_with([[1, 1, 2, 2]] * MAX_REGIONS))


def test_a_page_file_over_the_size_limit_is_refused_before_it_is_read(tmp_path, monkeypatch):
    """A 2 GB source page was read whole, then parsed (tens of GB): the size is checked first."""
    path = tmp_path / "p.json"
    path.write_text(json.dumps(page_with([[1, 1, 2, 2]] * 50)))
    monkeypatch.setattr("newsbag.contract.MAX_PAGE_BYTES", 1000)
    monkeypatch.setattr("newsbag.page_reader.read_json", lambda *a, **k: pytest.fail("read a page over the limit"))
    with pytest.raises(ValueError, match=rf"^{path}: {path.stat().st_size / 1000:.1f} KB, over the 1.0 KB a page file may hold"):
        read_page(path, "p")


def test_every_reader_refuses_a_page_whose_repaired_boxes_overlap_in_too_many_pairs(tmp_path, monkeypatch):
    """The runner-output check, review, export and evaluate read pages through `read_page`:
    a page of boxes piled on one another (30,000: 450 million pairs) is refused there as in
    fusion, counted on the repaired boxes (one box off the page is clipped onto the pile)."""
    monkeypatch.setattr("newsbag.contract.MAX_OVERLAPPING_PAIRS", 10)
    path = tmp_path / "p.json"
    write_json(path, page_with([[10, 10, 20, 20]] * 5 + [[-50, 10, 20, 20]]))   # 6 piled once clipped: 15 pairs
    with pytest.raises(ValueError, match=rf"^{path}: over 10 pairs of overlapping boxes \(boxes piled on one another"):
        read_page(path, "p")
    write_json(path, page_with([[10, 10, 20, 20]] * 5 + [[30, 10, 40, 20]]))     # 10 pairs: at the bound
    assert len(read_page(path, "p")["regions"]) == 6


def test_nulls_ints_and_floats_all_pass_and_read_the_same():
    from newsbag.contract import boxes_from_page

    page = page_with([[1, 2.5, 3, 4], [0, 0, 10, 10]], scores=[None, 0.25])
    page["regions"][1]["order"] = 3
    page["regions"][1]["class"] = "no-such-class"
    validate_source_page(page)
    boxes = boxes_from_page(page)
    assert boxes.xyxy.tolist() == [[1, 2.5, 3, 4], [0, 0, 10, 10]]
    assert np.isnan(boxes.score[0]) and boxes.score[1] == np.float32(0.25)
    assert boxes.data["order"].tolist() == [-1, 3] and boxes.label_names.tolist() == ["text", "unknown"]


@pytest.mark.parametrize("fast", [True, False], ids=["orjson", "stdlib"])
def test_compact_json_is_strict_and_reads_back_the_same_values(tmp_path, monkeypatch, fast):
    import newsbag.io as nio

    if not fast:
        monkeypatch.setattr(nio, "orjson", None)
    obj = {"a": math.nan, "b": [1.0, math.inf, 1e-05, 2 ** 70], "c": {1: np.float64(0.5)}, "s": "Zürich\u2028",
           "t": (1, 2), "n": None}
    write_json(tmp_path / "x.json", obj, compact=True)
    text = (tmp_path / "x.json").read_text(encoding="utf-8")
    assert " " not in text.replace("Zürich", "") and text.endswith("\n")
    want = {"a": None, "b": [1.0, None, 1e-05, 2 ** 70], "c": {"1": 0.5}, "s": "Zürich\u2028", "t": [1, 2], "n": None}
    assert _strict(text) == want and nio.read_json(tmp_path / "x.json") == want
    (tmp_path / "y.json").write_text('{"x": NaN, "y": [Infinity], "z": 123456789012345678901234567890}')
    got = nio.read_json(tmp_path / "y.json")      # a foreign writer's tokens: read as before
    assert math.isnan(got["x"]) and got["y"] == [math.inf] and got["z"] == 123456789012345678901234567890
    (tmp_path / "z.json").write_text('{"x": ')
    with pytest.raises(ValueError):
        nio.read_json(tmp_path / "z.json")


def test_repaired_boxes_are_the_boxes_of_the_repaired_page(tmp_path, caplog):
    from newsbag.contract import boxes_from_page
    from newsbag.page_reader import read_source_boxes
    from newsbag.page_repair import repaired_boxes

    boxes = [[10, 10, 20, 20], [math.nan, 0, 5, 5], [None, 0, 5, 5], [30, 25, 12, 2], [-5, -5, 10, 1e9],
             [500, 500, 600, 600], [1.5, 2.5, 3.5, 4.5]]
    page = page_with(boxes, scores=[0.5, 0.1, 0.2, math.inf, None, 0.3, True])
    page["regions"][6]["order"] = 4
    page["regions"][0]["text"] = "Zürich"
    page["source"]["family"] = "fam"
    want = boxes_from_page(repair_regions(page)[0], "s/v")
    got, counts = repaired_boxes(page, "s/v", {"family": "fam"})
    assert counts == repair_regions(page)[1] and counts["non_finite_score"] == 2
    assert np.array_equal(got.xyxy, want.xyxy) and np.array_equal(got.score, want.score, equal_nan=True)
    assert np.array_equal(got.label, want.label) and got.meta == want.meta
    for key, col in want.data.items():
        assert got.data[key].tolist() == col.tolist(), key
    assert got.data["family"].tolist() == ["fam"] * len(want)
    path = tmp_path / "p.json"
    path.write_text(json.dumps(page))
    read, header = read_source_boxes(path, "p", "s/v")
    assert np.array_equal(read.xyxy, want.xyxy) and "regions" not in header
    assert header["warnings"] == repair_regions(page)[0]["warnings"]
    assert "page p" in caplog.text and "repaired boxes: clipped_box 1" in caplog.text
    clean = page_with([[1, 1, 2, 2]])
    assert repaired_boxes(clean, "s/v")[1] == {} and len(repaired_boxes(page_with([]), "s/v")[0]) == 0


def test_boxes_indexing_by_take_keeps_every_column_aligned_and_refuses_a_mask_of_another_length():
    from newsbag.contract import Boxes, PageMeta

    rng = np.random.default_rng(3)
    n = 7
    boxes = Boxes(xyxy=rng.random((n, 4)), score=rng.random(n), label=rng.integers(0, 5, n),
                  meta=PageMeta(page_id="p", width=10, height=10, source="s", image_path="p.png"),
                  data={"text": np.array([f"t{i}" for i in range(n)], object), "order": np.arange(n)})
    mask = rng.random(n) > 0.5
    for index in (mask, np.flatnonzero(mask)[::-1], [-1, 0]):
        got = boxes[index]
        want = np.asarray(index) if np.asarray(index).dtype == bool else np.asarray(index, np.intp)
        assert np.array_equal(got.xyxy, boxes.xyxy[want]) and np.array_equal(got.score, boxes.score[want])
        assert np.array_equal(got.label, boxes.label[want])
        assert got.data["text"].tolist() == boxes.data["text"][want].tolist()
        assert np.array_equal(got.data["order"], boxes.data["order"][want])
    with pytest.raises(IndexError):
        boxes[np.ones(n - 1, bool)]


@pytest.mark.parametrize("column, names, codes", [
    ([], [], []),                                              # empty (0,4)
    (["a/x"] * 3, ["a/x"], [0, 0, 0]),                         # one source
    (["b/y", "b/y", "a/x", "a/x", "b/y"], ["a/x", "b/y"], [1, 1, 0, 0, 1]),   # runs; a source comes back
])
def test_column_codes_are_sorted_names_and_indices_into_them(column, names, codes):
    from nbtest import make_boxes

    from newsbag.contract import column_codes

    boxes = make_boxes([[0, 0, 1, 1]] * len(column), source=list(column))
    got_names, got_codes = column_codes(boxes, "source")
    assert got_names.tolist() == names
    assert got_codes.tolist() == codes


@pytest.mark.parametrize("extra, message", [
    ({"article": np.array([0])}, "cannot concat boxes with different data columns: ['article'] not in every part"),
    ({"article": np.array([0]), "zone": np.array(["a"], object)},
     "cannot concat boxes with different data columns: ['article', 'zone'] not in every part"),
])
def test_concat_refuses_parts_with_different_data_columns(extra, message):
    from nbtest import make_boxes

    from newsbag.contract import Boxes

    plain = make_boxes([[0, 0, 1, 1]])
    more = Boxes(plain.xyxy, plain.score, plain.label, plain.meta, {**plain.data, **extra})
    for parts in ([plain, more], [more, plain]):
        with pytest.raises(ValueError) as exc:
            Boxes.concat(parts)
        assert str(exc.value) == message


def test_concat_keeps_every_column_of_parts_that_share_them():
    from nbtest import make_boxes

    from newsbag.contract import Boxes

    a, b = make_boxes([[0, 0, 1, 1]], source="a/x"), make_boxes([[2, 2, 3, 3], [4, 4, 5, 5]], source="b/y")
    both = Boxes.concat([a, b])
    assert sorted(both.data) == sorted(a.data)
    assert both.data["source"].tolist() == ["a/x", "b/y", "b/y"]
    assert both.xyxy.tolist() == [[0, 0, 1, 1], [2, 2, 3, 3], [4, 4, 5, 5]]
