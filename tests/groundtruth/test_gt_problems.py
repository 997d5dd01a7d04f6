"""A ground-truth file evaluation cannot use is named in one line and left out; the rest is scored
(issue 46: ground truth of another aspect ratio was stretched silently, 0.84 -> 0.32; one with
200,000 regions allocated 37 GiB)."""

from __future__ import annotations

import json
import logging

import pytest

from newsbag import contract
from newsbag.evaluate import run_evaluate

BOX = [10, 10, 90, 90]


def _run(tmp_path, names=("good", "bad")):
    """A run of 100 x 100 pages in/<name>.png, each with one source box `BOX`, and an nzz
    annotation of each (`BOX`, text); returns (run, gt)."""
    run, gt = tmp_path / "run", tmp_path / "gt"
    (run / "manifests").mkdir(parents=True)
    (run / "manifests/pages.jsonl").write_text("".join(
        json.dumps({"page_id": n, "path": f"in/{n}.png", "width": 100, "height": 100}) + "\n" for n in names))
    (run / "outputs/sources/x/y").mkdir(parents=True)
    (gt / "annotations").mkdir(parents=True)
    for n in names:
        (run / f"outputs/sources/x/y/{n}.json").write_text(json.dumps(
            {"page_id": n, "image": {"path": f"in/{n}.png", "width": 100, "height": 100}, "source": {},
             "regions": [{"bbox_xyxy": BOX, "label": "t", "class": "text"}]}))
        _annotate(gt, n)
    return run, gt


def _annotate(gt, name, width=100, height=100, regions=None):
    regions = [{"bbox_xyxy": BOX, "label": "text"}] if regions is None else regions
    (gt / f"annotations/{name}.json").write_text(json.dumps(
        {"page_id": name, "image": f"images/{name}.png", "width": width, "height": height, "regions": regions}))


def _scored_without_bad(run, gt, caplog, reason):
    with caplog.at_level(logging.WARNING):
        res = run_evaluate(run, gt)
    assert res["pages"] == 1 and res["sources"][0]["iou_f1"] == 1.0
    assert list(res["bad_gt"]) == ["bad.json"] and res["bad_gt"]["bad.json"].startswith(reason)
    said = [r.getMessage() for r in caplog.records if "bad.json" in r.getMessage()]
    assert said == [f"evaluate: ground truth {gt / 'annotations/bad.json'}: {res['bad_gt']['bad.json']}; skipped"]
    return res


def test_ground_truth_of_another_aspect_ratio_is_left_out_and_named(tmp_path, caplog):
    run, gt = _run(tmp_path)
    _annotate(gt, "bad", width=100, height=150)   # drawn on a crop or another scan of the page
    off = 100 * abs((100 / 150) / (100 / 100) - 1)
    res = _scored_without_bad(run, gt, caplog, f"drawn on a 100x150 image, whose aspect ratio differs from the "
                                               f"scan's 100x100 by {off:.1f} % (over 1 %)")
    assert res["unscored"] == ["bad"]


@pytest.mark.parametrize("width, height", [
    (200, 200),      # drawn on the scan at twice its size: scaled, as before
    (100, 100.9),    # 0.9 % off: rounding of a scaled copy, within the tolerance
])
def test_ground_truth_at_the_same_aspect_ratio_is_scaled_and_scored(tmp_path, width, height):
    run, gt = _run(tmp_path, names=("good",))
    s = width / 100
    _annotate(gt, "good", width, height, [{"bbox_xyxy": [v * s for v in BOX], "label": "text"}])
    res = run_evaluate(run, gt)
    assert res["pages"] == 1 and not res["bad_gt"] and res["sources"][0]["iou_f1"] == 1.0


def test_ground_truth_with_more_regions_than_the_fusion_allows_is_left_out(tmp_path, caplog, monkeypatch):
    monkeypatch.setattr(contract, "MAX_REGIONS", 10)
    run, gt = _run(tmp_path)
    _annotate(gt, "bad", regions=[{"bbox_xyxy": [k, 0, k + 1, 1], "label": "text"} for k in range(11)])
    _scored_without_bad(run, gt, caplog, "11 regions, over the 10 a page may hold (the fusion's limit)")


def test_ground_truth_with_more_overlapping_pairs_than_the_fusion_allows_is_left_out(tmp_path, caplog, monkeypatch):
    monkeypatch.setattr(contract, "MAX_OVERLAPPING_PAIRS", 5)
    run, gt = _run(tmp_path)
    _annotate(gt, "bad", regions=[{"bbox_xyxy": BOX, "label": "text"}] * 5)   # 5 * 4 / 2 = 10 pairs
    _scored_without_bad(run, gt, caplog, "over 5 pairs of overlapping regions (the fusion's limit)")


def test_a_ground_truth_file_larger_than_a_page_file_may_be_is_not_read(tmp_path, caplog, monkeypatch):
    run, gt = _run(tmp_path)
    monkeypatch.setattr(contract, "MAX_PAGE_BYTES", 300)
    _annotate(gt, "bad", regions=[{"bbox_xyxy": [k, 0, k + 1, 1], "label": "text"} for k in range(20)])
    size = (gt / "annotations/bad.json").stat().st_size
    _scored_without_bad(run, gt, caplog, f"{size:,} bytes, over the 300 a page file may hold")


def test_a_ground_truth_file_of_200000_regions_is_skipped_before_any_raster(tmp_path, caplog):
    """The reproduction of issue 46: a traceback after allocating 37 GiB, partial output left."""
    run, gt = _run(tmp_path)
    n = 2 * contract.MAX_REGIONS
    _annotate(gt, "bad", regions=[{"bbox_xyxy": [k % 99, 0, k % 99 + 1, 1], "label": "text"} for k in range(n)])
    _scored_without_bad(run, gt, caplog, f"{n:,} regions, over the {contract.MAX_REGIONS:,} a page may hold")


def test_the_nzz_page_xml_scores_as_the_nzz_json(tmp_path):
    """../shared/eval/nzz/page (the Transkribus export) and the nzz JSON converted from it give
    one leaderboard: a prediction that merges each two consecutive text regions, on 8 of the pages
    (those with graphics among them; a page costs ~0.4 s to score here)."""
    from nbtest import shared_path, write_manifest
    from newsbag.groundtruth import read_ground_truth

    nzz = shared_path("eval", "nzz")
    run = tmp_path / "run"
    pages = sorted(read_ground_truth(nzz)[0], key=lambda p: (-(p.coarse == "image").sum(), p.name))[:8]
    write_manifest(run, [{"page_id": p.page_id, "path": str(nzz / "annotations" / p.image), "width": p.width,
                          "height": p.height, "sha256": ""} for p in pages])
    (run / "outputs/sources/x/y").mkdir(parents=True)
    for p in pages:
        text = p.xyxy[p.coarse == "text"]
        merged = [[*a[:2].tolist(), *b[2:].tolist()] if len(a) else [] for a, b in zip(text[0::2], text[1::2])]
        (run / f"outputs/sources/x/y/{p.page_id}.json").write_text(json.dumps(
            {"page_id": p.page_id, "image": {"path": p.image, "width": p.width, "height": p.height}, "source": {},
             "regions": [{"bbox_xyxy": sorted_box(b), "label": "t", "class": "text"} for b in merged]}))
    by_json, by_xml = run_evaluate(run, nzz), run_evaluate(run, nzz / "page")
    assert by_json["pages"] == by_xml["pages"] == 8 and not by_xml["bad_gt"]
    assert len(by_json["unmatched_gt"]) == len(by_xml["unmatched_gt"]) == 24
    for a, b in zip(by_json["sources"], by_xml["sources"]):
        assert (a["class"], a["n_pages"], a["n_gt"], a["iou_f1"]) == (b["class"], b["n_pages"], b["n_gt"], b["iou_f1"])
        assert a["pixel_f1"] == pytest.approx(b["pixel_f1"], abs=1e-3)   # the JSON's boxes end a pixel short at the edge


def sorted_box(b):
    return [min(b[0], b[2]), min(b[1], b[3]), max(b[0], b[2]), max(b[1], b[3])]
