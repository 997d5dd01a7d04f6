"""evaluation.js: what `newsbag evaluate` wrote, as the gallery reads it (its plot, ranking and GT layer)."""

from __future__ import annotations

import json
import re

import review_kit
from review_kit import review_run  # noqa: F401  (fixture)

from newsbag.review.evaluation import write_evaluation_data
from newsbag.review.stage import run_review

IDS = ["p1", "p2", "p3"]
MEASURES = {"p1": {"v1": 0.8, "a/x": 0.5, "b/y": None}, "p2": {"v1": 0.4, "a/x": 0.6, "b/y": 0.1}}
SCORES = {"p1": {"v1": 0.9, "a/x": 0.7}, "p2": {"v1": 0.5, "a/x": 0.75, "b/y": 0.2}}
GT = {"p1": [[20, 20, 220, 300, "text"], [240, 20, 460, 300, "graphic"]], "p2": [[0, 0, 10, 10, "separator"]]}


def _read(path):
    return json.loads(re.fullmatch(r"newsbagEvaluation\((.*)\);\n", path.read_text(), re.S).group(1))


def test_evaluate_s_files_become_the_gallery_s_evaluation_js_without_a_redraw(review_run):  # noqa: F811
    """After `newsbag evaluate` the gallery showed nothing of it until every board was redrawn;
    evaluation.js is the one file evaluate (and review) rewrite, read by header name."""
    run_review(review_run, IDS, {"top_n": 2})
    out = review_run / "review" / "evaluation.js"
    assert not out.exists()                                   # no evaluation yet: no file
    review_kit.write_evaluation(review_run, MEASURES, SCORES, GT)
    index = (review_run / "review" / "index.html").read_bytes()
    assert write_evaluation_data(review_run) == out
    data = _read(out)
    assert data["measure"] == "iou_f1"
    assert data["pages"] == MEASURES
    assert data["kinds"] == {"v1": "variant", "a/x": "source", "b/y": "source"}
    assert data["scores"] == SCORES
    assert data["gt"]["p1"] == {"width": 2 * review_kit.W, "height": 2 * review_kit.H,
                                "regions": [[20.0, 20.0, 220.0, 300.0, "text", "text"],
                                            [240.0, 20.0, 460.0, 300.0, "graphic", "graphic"]]}
    assert (review_run / "review" / "index.html").read_bytes() == index   # nothing else rewritten

    (review_run / "outputs" / "evaluation" / "per_page.tsv").unlink()     # an evaluation removed
    assert write_evaluation_data(review_run) is None and not out.exists()


def test_no_review_folder_no_evaluation_js(review_run):  # noqa: F811
    review_kit.write_evaluation(review_run, MEASURES, SCORES, GT)
    assert write_evaluation_data(review_run) is None
    assert not (review_run / "review").exists()
