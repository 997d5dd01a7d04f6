"""What `status` counts as done is what the next run skips: outputs cut short, page order, stages not configured."""

import json
import os
import shutil

import pytest

from newsbag import manifest, rundir
from nbtest import EXAMPLE_PAGE, run_cli, write_fake_config

FUSION = {"name": "fusion", "kind": "fusion", "recommended": "C", "variants": {
    "C": {"sources": ["*"], "method": "consensus", "params": {"vote": 1}}}}
REVIEW = {"name": "review", "kind": "review", "top_n": 1}
EXPORT = {"name": "export", "kind": "export", "formats": ["page-xml", "alto", "coco"]}


def _scans(tmp_path, names=("a.png", "b.png")):
    scans = tmp_path / "scans"
    scans.mkdir()
    for name in names:
        shutil.copy(EXAMPLE_PAGE, scans / name)
    return scans


def _run(tmp_path, capsys, stages, names=("a.png", "b.png")):
    cfg = write_fake_config(tmp_path / "c.json", {"v": {}}, extra_stages=stages)
    run = tmp_path / "run"
    code, _, err = run_cli(capsys, "run", "--input-dir", _scans(tmp_path, names), "--run-dir", run, "--config", cfg)
    assert code == 0, err
    return run


def _status(capsys, run) -> dict:
    code, out, err = run_cli(capsys, "status", "--run-dir", run, "--json")
    assert code == 0, err
    return json.loads(out)


def _outputs(info: dict, kind: str, name: str) -> dict:
    return next(o for o in info["builtin"][kind] if o["name"] == name)


def _first_page(run) -> str:
    return manifest.manifest_page_ids(run)[0]


# Each output a run skips by what its first bytes (or its record) say, and where it lies.
_CUT = {
    "page-xml": lambda run: rundir.exports_dir(run) / "page-xml" / "fusion" / "C" / f"{_first_page(run)}.xml",
    "alto": lambda run: rundir.exports_dir(run) / "alto" / "fusion" / "C" / f"{_first_page(run)}.xml",
    "coco": lambda run: rundir.exports_dir(run) / "coco" / "fusion" / "C.json",
    "data.js": lambda run: rundir.review_page_dir(run, _first_page(run)) / "data.js",
    "thumb.jpg": lambda run: rundir.review_page_dir(run, _first_page(run)) / "thumb.jpg",
    "scan": lambda run: next(rundir.review_page_dir(run, _first_page(run)).glob("scan.*")),
}


@pytest.mark.parametrize("output", list(_CUT))
def test_an_output_cut_to_half_its_size_is_not_done_and_the_next_run_redoes_it(tmp_path, capsys, output):
    # An interrupted `cp` or `rsync --inplace` leaves the head of a file, fingerprint and all.
    run = _run(tmp_path, capsys, [FUSION, REVIEW, EXPORT])
    path = _CUT[output](run)
    whole = path.read_bytes()
    path.write_bytes(whole[: len(whole) // 2])
    info = _status(capsys, run)
    if output in ("data.js", "thumb.jpg", "scan"):
        boards = _outputs(info, "review", "boards")
        assert (boards["done"], boards["stale"]) == (1, 1)
    else:
        layer = _outputs(info, "export", "fusion/C")
        if output == "coco":
            assert (layer["whole"], layer["note"]) == (False, "COCO file out of date")
        else:
            assert (layer["done"], layer["stale"]) == (1, 1)
    code, _, err = run_cli(capsys, "run", "--run-dir", run)
    assert code == 0, err
    assert path.read_bytes() == whole
    info = _status(capsys, run)
    assert _outputs(info, "review", "boards")["done"] == 2
    layer = _outputs(info, "export", "fusion/C")
    assert (layer["done"], layer["stale"], layer["whole"]) == (2, 0, True)


def test_the_coco_file_is_current_right_after_export_whatever_the_page_ids_sort_as(tmp_path, capsys):
    # "p 1.png" becomes p_1-…, which sorts after p-2-…: the manifest order is not the id order.
    run = _run(tmp_path, capsys, [FUSION, {"name": "export", "kind": "export", "formats": ["page-xml", "coco"]}],
               names=("p 1.png", "p-2.png"))
    ids = manifest.manifest_page_ids(run)
    assert ids != sorted(ids)
    layer = _outputs(_status(capsys, run), "export", "fusion/C")
    assert (layer["done"], layer["whole"], layer["note"]) == (2, True, "")
    code, out, err = run_cli(capsys, "status", "--run-dir", run)
    assert "COCO file out of date" not in out
    code, _, err = run_cli(capsys, "run", "--run-dir", run)
    assert err.startswith("nothing to do: 2 pages current")


def test_status_leaves_out_the_stages_the_run_s_config_has_not(tmp_path, capsys):
    run = _run(tmp_path, capsys, [FUSION, EXPORT])
    info = _status(capsys, run)
    assert info["builtin"]["review"] == [] and info["builtin"]["transcription"] == []
    code, out, err = run_cli(capsys, "status", "--run-dir", run)
    assert "review/" not in out
    assert "  export/fusion/C" in out and "  fusion/C" in out
    # a review run on its own joins the record, and status then counts its boards
    assert run_cli(capsys, "review", "--run-dir", run)[0] == 0
    assert _outputs(_status(capsys, run), "review", "boards")["done"] == 2
    assert os.path.isfile(rundir.gallery_path(run))


def test_status_reads_the_run_s_config_record_once_for_its_stages(tmp_path, capsys, monkeypatch):
    """The recorded stages give the builtin options and the expected sources from one read."""
    from newsbag import status

    run = _run(tmp_path, capsys, [FUSION])
    read, real = [], status.read_config_json
    monkeypatch.setattr(status, "read_config_json", lambda path: read.append(path) or real(path))
    info = status.collect_status(run)
    assert read == [rundir.config_record(run)]
    assert [s["source"] for s in info["sources"]] == ["fake/v"]
    assert [(o["name"], o["done"]) for o in info["builtin"]["fusion"]] == [("C", len(manifest.read_pages(run)))]
