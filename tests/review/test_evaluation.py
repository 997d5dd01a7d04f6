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


def test_the_last_tuning_goes_to_the_gallery_beside_the_ground_truth(review_run):  # noqa: F811
    review_kit.write_evaluation(review_run, MEASURES, SCORES, GT)
    (review_run / "review").mkdir()
    assert _read(write_evaluation_data(review_run))["tuning"] is None      # tune has not run
    folds = [{"fold": 0, "train_pages": 1, "test_pages": 1, "tuned_iou_f1": 0.7, "current_iou_f1": 0.6},
             {"fold": 1, "train_pages": 1, "test_pages": 1, "tuned_iou_f1": 0.5, "current_iou_f1": 0.5}]
    gain = {"mean": 0.05, "low": 0.0, "high": 0.1}
    verdict = "kept the current recommendation: on 2 pages the held-out gain +0.050 (95% CI +0.000..+0.100) ..."
    (review_run / "outputs" / "tuning").mkdir(parents=True)
    (review_run / "outputs" / "tuning" / "summary.json").write_text(json.dumps(
        {"verdict": verdict, "gain": gain, "pages": 2, "adopted": False, "folds": folds, "tuned": None}))
    tuning = _read(write_evaluation_data(review_run))["tuning"]
    assert tuning == {"verdict": verdict, "gain": gain, "pages": 2, "adopted": False,
                      "folds": [{k: f[k] for k in ("fold", "test_pages", "tuned_iou_f1", "current_iou_f1")}
                                for f in folds],
                      "line": f"newsbag tune: {verdict}. Held-out folds (text IoU-F1, tuned vs current): "
                              "fold 0, 1 pages: 0.700 vs 0.600; fold 1, 1 pages: 0.500 vs 0.500."}
