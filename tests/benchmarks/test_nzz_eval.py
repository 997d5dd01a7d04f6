"""benchmarks/nzz_eval.py's in-memory evaluation on a constructed two-column page: it runs
against today's fusion (it once unpacked fuse_all's results wrongly and printed nothing)."""


import pytest

from nbtest import REPO, make_boxes
from newsbag.fusion.options import DEFAULT_FUSION_CFG
from newsbag.groundtruth import gt_page


@pytest.fixture
def nzz_eval(monkeypatch):
    monkeypatch.syspath_prepend(str(REPO / "benchmarks"))
    import nzz_eval
    return nzz_eval


def _page():
    cols = [[50, 100, 450, 400], [550, 100, 950, 400]]
    lines = [[x0, y, x1, y + 12] for x0, _, x1, _ in cols for y in range(100, 400, 15)]
    pages = {"text_lines/blocks": make_boxes([[50, 100, 950, 400]], source="text_lines/blocks", score=0.99),
             "text_lines/lines": make_boxes(lines, label="text_line", source="text_lines/lines", score=0.99),
             "tesseract/paragraphs": make_boxes(cols, source="tesseract/paragraphs")}
    ann = gt_page("p.json", "p.png", 1000, 1000, [{"bbox_xyxy": c, "label": "text", "raw": "text"} for c in cols])
    return pages, {"page_id": "p"}, ann


def test_evaluate_scores_members_and_variants_against_ground_truth(nzz_eval):
    loaded = {"p": _page()}
    per_page = nzz_eval.evaluate(loaded, DEFAULT_FUSION_CFG, order=["text_lines/blocks", "tesseract/paragraphs"])
    gt = per_page["p"]["gt"]
    # the member merges both columns: one cross-column box, no GT region matched one-to-one
    assert gt["text_lines/blocks"]["xcol"] == 1.0 and gt["text_lines/blocks"]["iou_f1"] == 0.0
    # paragraphs cuts it at the gutter: both columns found
    assert gt["paragraphs"]["iou_f1"] == pytest.approx(1.0) and gt["paragraphs"]["b1x"] == 1.0
    rows = nzz_eval.table(per_page, ["p"])
    assert nzz_eval.meets(rows["paragraphs"], nzz_eval.bars(rows, ["text_lines/blocks"])) == dict.fromkeys(
        ("pixel_f1", "b1x", "iou_f1"), True)
    only_variants = nzz_eval.evaluate(loaded, DEFAULT_FUSION_CFG, ["text_lines/blocks"], sources=False)
    assert "text_lines/blocks" not in only_variants["p"]["gt"] and "paragraphs" in only_variants["p"]["gt"]


def test_split_halves_alternate_sorted_ids(nzz_eval):
    assert nzz_eval.split_halves(["d", "a", "c", "b"]) == (["a", "c"], ["b", "d"])


def test_tune_reports_both_protocols_and_keeps_the_shipped_rules_in_the_thresholds_one(nzz_eval, monkeypatch):
    loaded = {"p": _page()}
    descended, real = [], nzz_eval.descend
    monkeypatch.setattr(nzz_eval, "descend", lambda score, start, lists: descended.append(lists) or real(score, start, lists))
    tuned = nzz_eval.tune(loaded, DEFAULT_FUSION_CFG, "paragraphs", ["p"], ["text_lines/blocks"],
                          order=["text_lines/blocks", "tesseract/paragraphs"], every=True)
    assert set(tuned) == set(nzz_eval.PROTOCOL_MARK)
    every, every_row = tuned["every threshold"]
    assert set(every) == {*nzz_eval.GRID["paragraphs"], *nzz_eval.RULES["paragraphs"], *nzz_eval.FIXED["paragraphs"]}
    assert every_row["iou_f1"] >= tuned["thresholds"][1]["iou_f1"]   # descent starts there and only moves up
    # the rules are held out by the descent too, not only the thresholds
    assert set(descended[0]) == set(every) and descended[0]["nest_share"] == nzz_eval.RULES["paragraphs"]["nest_share"]
    thresholds, row = tuned["thresholds"]
    assert set(thresholds) == set(nzz_eval.GRID["paragraphs"]) | set(nzz_eval.RULES["paragraphs"])
    assert (thresholds["nest_share"], thresholds["lines_match"]) == (0.8, 0.25)   # as the recipe ships them
    assert row["iou_f1"] == pytest.approx(1.0)
    rules, _ = tuned["rules too"]
    assert rules["nest_share"] in (0.0, 0.8) and rules["lines_match"] in (0.0, 0.25)


def test_descent_moves_one_threshold_at_a_time_to_a_better_point_and_stops(nzz_eval):
    seen = []

    def score(point):   # best at a=2, b=0; IoU-like second key
        seen.append(dict(point))
        return (0.0, -abs(point["a"] - 2) - abs(point["b"])), {"iou_f1": 0.0}
    start = (score({"a": 0, "b": 1})[0], {"a": 0, "b": 1}, {})
    key, point, _ = nzz_eval.descend(score, start, {"a": [0, 1, 2], "b": [0, 1]})
    assert point == {"a": 2, "b": 0} and key == (0.0, 0)
    # one threshold moved at a time, each point scored once, and a second pass that changes nothing ends it
    assert seen == [{"a": 0, "b": 1}, {"a": 1, "b": 1}, {"a": 2, "b": 1}, {"a": 2, "b": 0}, {"a": 0, "b": 0},
                    {"a": 1, "b": 0}]


def test_source_order_ranks_the_sources_by_the_no_ground_truth_score(nzz_eval):
    """The "auto" order nzz_eval fuses with when no order is given (it once called the
    leaderboard with a signature fusion no longer had, and the script died before any table)."""
    from newsbag.fusion.options import parse_fusion_config

    order = nzz_eval.source_order({"p": _page()}, parse_fusion_config(DEFAULT_FUSION_CFG))
    # tesseract boxes each column (no cross-column region); the block crosses the gutter
    assert order == ["tesseract/paragraphs", "text_lines/blocks"]
