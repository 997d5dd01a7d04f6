"""`newsbag recommend`: a pin the run owns, which fusion's summary, status and exports follow."""

import json

from fusion.synthetic_run import LOCAL_SOURCES, write_synthetic_run
from nbtest import run_cli

from newsbag import rundir
from newsbag.page_reader import read_page
from newsbag.status import collect_status

PAGES = ["p1", "p2"]


def _fused_run(tmp_path, capsys):
    run = write_synthetic_run(tmp_path / "run", LOCAL_SOURCES, PAGES, seed=3)
    code, _, err = run_cli(capsys, "fuse", "--run-dir", run)
    assert code == 0, err
    return run


def _summary(run):
    return json.loads((run / "outputs/fusion/summary.json").read_text())


def test_a_pinned_variant_is_recommended_exported_and_kept_by_a_rerun_of_fusion(tmp_path, capsys):
    run = _fused_run(tmp_path, capsys)
    assert _summary(run)["recommended_variant"] == "paragraphs"   # the config's pin before
    code, out, err = run_cli(capsys, "recommend", "--run-dir", run, "union")
    assert code == 0, err
    assert out.strip() == "recommended: union (by user)"
    summary = _summary(run)
    assert (summary["recommended_variant"], summary["recommended_by"]) == ("union", "user")
    marks = {r["name"]: r["recommended"] for r in summary["variant_leaderboard"]}
    assert marks["union"] == "pinned" and marks["paragraphs"] == ""
    assert collect_status(run)["recommended_variant"] == "union"

    code, _, err = run_cli(capsys, "export", "--run-dir", run, "--format", "coco")
    assert code == 0, err
    coco = json.loads((run / "exports/coco/fusion/union.json").read_text())
    want = sum(len(read_page(run / f"outputs/fusion/union/{p}.json", p)["regions"]) for p in PAGES)
    assert len(coco["annotations"]) == want
    assert not (run / "exports/coco/fusion/paragraphs.json").exists()

    code, _, err = run_cli(capsys, "fuse", "--run-dir", run, "--force")
    assert code == 0, err
    assert (_summary(run)["recommended_variant"], _summary(run)["recommended_by"]) == ("union", "user")
    assert "recommended: union (pinned by the user" in err


def test_recommend_refuses_a_variant_the_run_has_not_fused(tmp_path, capsys):
    run = _fused_run(tmp_path, capsys)
    code, _, err = run_cli(capsys, "recommend", "--run-dir", run, "unoin")
    assert code != 0
    assert "no fused variant 'unoin'" in err and "union" in err
    assert not rundir.pin_path(run).exists()
    assert _summary(run)["recommended_variant"] == "paragraphs"


def test_a_pin_whose_variant_did_not_run_falls_back_to_the_config_saying_so():
    from newsbag.fusion.pin import Pin, choose_recommended
    from newsbag.fusion.options import parse_fusion_config

    cfg = parse_fusion_config({})
    rows = [{"name": "vote", "score": 0.9}, {"name": "paragraphs", "score": 0.8}]
    active = {"vote": [], "paragraphs": []}
    assert choose_recommended(cfg, active, rows, Pin("vote", "user")) == ("vote", "user")
    assert choose_recommended(cfg, active, rows, Pin("tuned", "tuned on 9 pages: x")) == (
        "paragraphs", "config (pinned 'tuned' (tuned on 9 pages) was skipped)")
    assert choose_recommended(cfg, active, rows, None) == ("paragraphs", "config")
    no_pin = parse_fusion_config({"recommended": None})
    assert choose_recommended(no_pin, active, rows, None) == ("vote", "score")
