import numpy as np
import pytest
from nbtest import make_boxes

from newsbag.contract import Boxes
from newsbag.fusion.metrics import iou_f1, loo_agreement, page_metrics, pixel_prf, union_mask


def test_union_mask_counts_overlap_once():
    m = union_mask(np.array([[0, 0, 50, 100], [25, 0, 75, 100]], float), 100, 100, 100)
    assert m.sum() == 75 * 100


@pytest.mark.parametrize("pred, gt, expected", [
    ([[0, 0, 10, 10]], [[0, 0, 10, 10]], 1.0),                        # perfect
    ([[0, 0, 10, 10], [20, 0, 30, 10]], [[0, 0, 10, 10]], 2 * 1 / 3),  # one extra
    ([[0, 0, 30, 10]], [[0, 0, 10, 10], [20, 0, 30, 10]], 0.0),       # merged: IoU 1/3
    ([], [[0, 0, 10, 10]], 0.0),                                      # nothing predicted
])
def test_iou_f1(pred, gt, expected):
    assert iou_f1(np.array(pred, float).reshape(-1, 4), np.array(gt, float).reshape(-1, 4)) == pytest.approx(expected)


def test_pixel_prf():
    a = np.zeros((10, 10), bool)
    b = np.zeros((10, 10), bool)
    a[:, :5] = True
    b[:, :4] = True
    assert pixel_prf(a, b) == pytest.approx((40 / 50, 1.0, 2 * 40 / 90))


def test_page_metrics_line_coverage_and_cross_share():
    lines = np.array([[0, 0, 100, 10], [0, 20, 100, 30], [200, 0, 300, 10], [200, 20, 300, 30],
                      [500, 0, 600, 10]], float)
    regions = make_boxes([[0, 0, 300, 40], [500, 0, 560, 10]], source="a/x")
    m = page_metrics(regions, lines)
    # line 5 has only 60% inside the small box: still covered (>= 50%)
    assert m["line_coverage"] == 1.0
    assert m["cross_share"] == 0.5            # the first region spans a gutter
    assert m["single_line_share"] == 0.5
    assert m["lonely_line_share"] == 1 / 5   # line 5 is alone in its region
    assert m["score"] == pytest.approx(1.0 * 0.5 * (1 - 1 / 5 / 2) * 1.0)


def test_boxing_a_headline_costs_less_than_leaving_it_uncovered():
    # 20 body lines in one column block and a one-line headline above them.
    body = [[0, 40 + 15 * k, 300, 50 + 15 * k] for k in range(20)]
    lines = np.array([[0, 0, 300, 30]] + body, float)
    block = [[0, 38, 300, 40 + 15 * 20]]
    boxed = page_metrics(make_boxes([[0, 0, 300, 32]] + block, source="a/x"), lines)
    missed = page_metrics(make_boxes(block, source="a/x"), lines)
    # boxed: every line covered, 1 of 21 lines alone; missed: 20 of 21 lines covered
    assert boxed["score"] == pytest.approx(1 - 1 / 21 / 2)
    assert missed["score"] == pytest.approx(20 / 21)
    assert boxed["score"] > missed["score"]


def test_overlap_share_costs_stacked_regions():
    lines = np.array([[0, 0, 100, 10], [0, 20, 100, 30]], float)
    tiled = page_metrics(make_boxes([[0, 0, 100, 15], [0, 15, 100, 30]], source="a/x"), lines)
    stacked = page_metrics(make_boxes([[0, 0, 100, 30], [0, 15, 100, 30]], source="a/x"), lines)
    assert tiled["overlap_share"] == 0.0
    # half of the union lies under both boxes (raster 256 on a 1000 px page: exact at 15/30)
    assert stacked["overlap_share"] == pytest.approx(0.5, abs=0.05)
    # one of the two lines is alone in a region: (1 - 0.5 / 2), then the overlap factor
    assert stacked["score"] == pytest.approx(0.75 * (1 - stacked["overlap_share"]))


def test_loo_never_scores_a_source_against_its_own_family():
    # a/1 and a/2 are one family and agree; b is elsewhere. a/1's reference is b only.
    a1 = make_boxes([[0, 0, 100, 100]], source="a/1", family="a")
    a2 = make_boxes([[0, 0, 100, 100]], source="a/2", family="a")
    b = make_boxes([[500, 500, 600, 600]], source="b/1", family="b")
    with_twin = loo_agreement(Boxes.concat([a1, a2, b]))
    alone = loo_agreement(Boxes.concat([a1, b]))
    assert with_twin["a/1"]["loo_pixel_f1"] == alone["a/1"]["loo_pixel_f1"] == 0.0
    assert with_twin["a/1"]["loo_box_agreement"] == 0.0
    assert with_twin["b/1"]["loo_pixel_f1"] == 0.0


def test_loo_reference_is_half_of_the_other_families():
    a = make_boxes([[0, 0, 100, 100]], source="a/1", family="a")
    c = make_boxes([[0, 0, 100, 100]], source="c/1", family="c")
    b = make_boxes([[0, 0, 100, 200]], source="b/1", family="b")
    res = loo_agreement(Boxes.concat([a, c, b]))
    # others of a: {c, b}, vote ceil(2/2) = 1 -> reference is the union (0,0,100,200)
    assert res["a/1"]["loo_pixel_f1"] == pytest.approx(2 * 1 / (1 + 2), abs=0.02)
    # others of b: {a, c} -> reference (0,0,100,100), b covers twice that
    assert res["b/1"]["loo_pixel_f1"] == pytest.approx(2 * 1 / (2 + 1), abs=0.02)
    # box agreement: a matches c on IoU; b contains a (IoA 1) -> all agree
    assert res["a/1"]["loo_box_agreement"] == res["b/1"]["loo_box_agreement"] == 1.0


def test_loo_without_other_family_is_nan():
    res = loo_agreement(make_boxes([[0, 0, 10, 10]], source="a/x"))
    assert np.isnan(res["a/x"]["loo_pixel_f1"])


def test_text_line_pairs_are_the_query_pairs_of_each_sources_text(tmp_path):
    """Each source's (text box, line) pairs taken from the pool's own pairs are the pairs a
    query finds (the lines against themselves included), and give the same metrics."""
    from synthetic_run import TORCH_SOURCES, write_synthetic_run

    from newsbag.contract import Boxes
    from newsbag.fusion.geometry import cross_pairs, self_pairs
    from newsbag.fusion.metrics import _page_metrics, _textlike, text_line_pairs
    from newsbag.page_reader import read_source_boxes

    run = write_synthetic_run(tmp_path, TORCH_SOURCES, ["p"])
    pool = Boxes.concat([read_source_boxes(f, "p", f"{f.parts[-3]}/{f.parts[-2]}")[0]
                         for f in sorted(run.glob("outputs/sources/*/*/p.json"))])
    line_mask = pool.data["source"] == "text_lines/lines"
    lines = pool.xyxy[line_mask]
    names = sorted(set(pool.data["source"].tolist()))
    got = text_line_pairs(pool, self_pairs(pool.xyxy), line_mask, {s: s == "text_lines/lines" for s in names})
    for s in names:
        own = pool[pool.data["source"] == s]
        text = own.xyxy if s == "text_lines/lines" else own.xyxy[_textlike(own)]
        want = cross_pairs(text, lines)
        assert sorted(zip(got[s].i.tolist(), got[s].j.tolist(), got[s].inter.tolist())) == \
            sorted(zip(want.i.tolist(), want.j.tolist(), want.inter.tolist())), s
        if s != "text_lines/lines":   # (the line source is measured relabelled as text by the stage)
            assert _page_metrics(own, lines, None, got[s]) == pytest.approx(_page_metrics(own, lines, None, None),
                                                                             nan_ok=True, rel=0, abs=0)
