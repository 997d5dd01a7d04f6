"""A run's own exports read back by `evaluate` as ground truth score the exported layer at text
IoU F1 1.0: PAGE-XML, ALTO and COCO (issue 44, "Done when")."""

from __future__ import annotations

import pytest

from nbtest import run_cli, write_fake_config, write_image
from newsbag.evaluate import run_evaluate

FUSION = {"name": "fusion", "kind": "fusion", "recommended": "C", "variants": {
    "C": {"sources": ["*"], "method": "consensus", "params": {"vote": 1}}}}
EXPORT = {"name": "export", "kind": "export", "formats": ["page-xml", "alto", "coco"]}


@pytest.fixture(scope="module")
def finished(tmp_path_factory):
    """A finished fake run over three pages (one name in two folders), with every export."""
    from newsbag.cli import main

    tmp = tmp_path_factory.mktemp("roundtrip")
    for rel in ("issue1/p1.png", "issue2/p1.png", "issue2/p2.png"):
        write_image(tmp / "pages" / rel, size=(400, 300))
    cfg = write_fake_config(tmp / "c.json", {"v": {}}, extra_stages=[FUSION, EXPORT])
    run = tmp / "run"
    with pytest.raises(SystemExit) as exc:
        main(["run", "--input-dir", str(tmp / "pages"), "--recursive", "--run-dir", str(run), "--config", str(cfg)])
    assert exc.value.code == 0
    return run


@pytest.mark.parametrize("gt", ["exports/page-xml/fusion/C", "exports/alto/fusion/C", "exports/coco/fusion/C.json"])
def test_a_run_s_export_read_back_as_ground_truth_scores_its_layer_at_1(finished, gt):
    res = run_evaluate(finished, finished / gt)
    assert res["pages"] == 3 and res["bad_gt"] == {} and res["unmatched_gt"] == [] and res["unscored"] == []
    (row,) = [r for r in res["variants"] if r["name"] == "C" and r["class"] == "text"]
    assert (row["iou_f1"], row["pixel_f1"], row["n_pages"]) == (1.0, 1.0, 3)


def test_evaluate_takes_a_coco_file_and_its_help_names_the_formats(finished, capsys):
    code, out, err = run_cli(capsys, "evaluate", "--run-dir", finished, "--gt", finished / "exports/coco/fusion/C.json")
    assert code == 0, err
    assert out.splitlines()[0] == "3 of 3 run page(s) matched ground truth and are scored"
    code, out, _ = run_cli(capsys, "evaluate", "--help")
    assert code == 0
    for name in ("PAGE-XML", "ALTO", "Transkribus", "COCO JSON file", "nzz format"):
        assert name in " ".join(out.split())


def test_exports_moved_away_from_the_images_still_find_their_pages(finished, tmp_path):
    """A copy of the PAGE-XML elsewhere: the named image is not there, its path's tail decides
    (issue1/p1.png vs issue2/p1.png)."""
    import shutil

    copy = tmp_path / "a" / "b" / "c" / "d" / "e" / "gt"
    shutil.copytree(finished / "exports/page-xml/fusion/C", copy)
    res = run_evaluate(finished, copy)
    assert res["pages"] == 3 and res["bad_gt"] == {}
    (row,) = [r for r in res["variants"] if r["name"] == "C" and r["class"] == "text"]
    assert row["iou_f1"] == 1.0
