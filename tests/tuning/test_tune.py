"""`newsbag tune` end to end on a synthetic run: records written, and the adoption rule both ways."""

import csv
import json

import pytest
from fusion.synthetic_run import LOCAL_SOURCES, write_synthetic_run
from nbtest import run_cli

from newsbag import rundir
from newsbag.page_reader import read_page

# One page per issue (a date in each page id), so folds hold out whole issues.
PAGES = [f"1921-03-0{k}" for k in range(1, 7)]
TRIALS, FOLDS = 8, 3


def _fused_run(tmp_path, capsys):
    run = write_synthetic_run(tmp_path / "run", LOCAL_SOURCES, PAGES, seed=5)
    code, _, err = run_cli(capsys, "fuse", "--run-dir", run)
    assert code == 0, err
    return run


def _gt_from(run, variant, tmp_path):
    """Ground truth in the nzz format made from `variant`'s own text regions."""
    gt = tmp_path / f"gt-{variant}"
    (gt / "annotations").mkdir(parents=True)
    for pid in PAGES:
        page = read_page(run / f"outputs/fusion/{variant}/{pid}.json", pid)
        regions = [{"bbox_xyxy": r["bbox_xyxy"], "label": "text"} for r in page["regions"]
                   if r["class"] in ("text", "title", "headline")]
        ann = {"page_id": pid, "image": f"{pid}.png", "width": page["image"]["width"],
               "height": page["image"]["height"], "regions": regions}
        (gt / "annotations" / f"{pid}.json").write_text(json.dumps(ann))
    return gt


def _tsv(path):
    with open(path, newline="") as fh:
        return list(csv.DictReader(fh, delimiter="\t"))


def _tune(capsys, run, gt):
    return run_cli(capsys, "tune", "--run-dir", run, "--gt", gt, "--trials", TRIALS, "--folds", FOLDS, "--seed", 1)


def test_tune_keeps_the_recommendation_when_it_already_matches_the_ground_truth(tmp_path, capsys):
    run = _fused_run(tmp_path, capsys)
    code, out, err = _tune(capsys, run, _gt_from(run, "paragraphs", tmp_path))
    assert code == 0, err
    assert out.splitlines()[0].startswith("kept the current recommendation: on 6 pages the held-out gain ")
    tuning = run / "outputs/tuning"
    assert len(_tsv(tuning / "trials.tsv")) == TRIALS * FOLDS            # no final study
    folds = _tsv(tuning / "folds.tsv")
    assert len(folds) == FOLDS and sum(int(f["test_pages"]) for f in folds) == len(PAGES)
    pages = _tsv(tuning / "pages.tsv")
    assert sorted(p["page_id"] for p in pages) == PAGES
    assert all(float(p["current_iou_f1"]) == pytest.approx(1.0) for p in pages)   # GT is its own output
    summary = json.loads((tuning / "summary.json").read_text())
    assert summary["adopted"] is False and summary["tuned"] is None
    assert not rundir.pin_path(run).exists()
    assert not (run / "outputs/fusion/tuned").exists()
    assert rundir.recommended_variant(run) == "paragraphs"
    before = {p.name: p.read_bytes() for p in tuning.iterdir()}
    assert _tune(capsys, run, tmp_path / "gt-paragraphs")[0] == 0                # seeded: the same trials again
    assert {p.name: p.read_bytes() for p in tuning.iterdir()} == before


@pytest.mark.parametrize("gt_format", ["nzz", "page-xml"])
def test_tune_adopts_a_fusion_that_gains_on_held_out_pages_and_pins_it(tmp_path, capsys, gt_format):
    """Ground truth: union's own layout, as nzz JSON or as the run's PAGE-XML export (what a
    correction tool gives back); the current recommendation, paragraphs, is not union."""
    run = _fused_run(tmp_path, capsys)
    if gt_format == "nzz":
        gt = _gt_from(run, "union", tmp_path)
    else:
        assert run_cli(capsys, "export", "--run-dir", run, "--format", "page-xml", "--variant", "union")[0] == 0
        gt = run / "exports/page-xml/fusion/union"
    code, out, err = _tune(capsys, run, gt)
    assert code == 0, err
    summary = json.loads((run / "outputs/tuning/summary.json").read_text())
    assert summary["adopted"] is True and summary["gain"]["low"] > 0
    line = out.splitlines()[0]
    assert line.startswith("tuned on 6 pages: held-out gain +")
    assert len(_tsv(run / "outputs/tuning/trials.tsv")) == TRIALS * (FOLDS + 1)   # folds, then all pages
    config = json.loads(rundir.config_record(run).read_text())
    fusion = next(s for s in config["stages"] if s.get("kind") == "fusion")
    assert fusion["variants"]["tuned"] == summary["tuned"]
    assert "paragraphs" in fusion["variants"]                      # the other variants stay
    assert sorted(p.stem for p in (run / "outputs/fusion/tuned").glob("*.json")) == PAGES
    fused = json.loads((run / "outputs/fusion/summary.json").read_text())
    assert (fused["recommended_variant"], fused["recommended_by"]) == ("tuned", line)
    code, _, err = run_cli(capsys, "fuse", "--run-dir", run, "--force")   # a rerun keeps the pin
    assert code == 0, err
    assert rundir.recommended_variant(run) == "tuned"


def test_pages_of_one_issue_cannot_be_held_out_and_tune_says_so_in_one_line(tmp_path, capsys):
    run = write_synthetic_run(tmp_path / "run", LOCAL_SOURCES, ["a1", "a2"], seed=5)   # both in ../images
    assert run_cli(capsys, "fuse", "--run-dir", run)[0] == 0
    gt = tmp_path / "gt"
    (gt / "annotations").mkdir(parents=True)
    for pid in ("a1", "a2"):
        (gt / "annotations" / f"{pid}.json").write_text(json.dumps(
            {"page_id": pid, "image": f"{pid}.png", "width": 2400, "height": 3400,
             "regions": [{"bbox_xyxy": [100, 100, 900, 900], "label": "text"}]}))
    code, out, err = run_cli(capsys, "tune", "--run-dir", run, "--gt", gt, "--trials", 2)
    assert code == 2
    assert err.strip().splitlines()[-1] == (f"newsbag: error: tune: {gt}: cross-validation needs pages of at least 2 "
                                            "issues, got 1 (issues are read from the pages' paths)")
    assert not (run / "outputs/tuning").exists()
