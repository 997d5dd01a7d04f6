"""Status, `run --dry-run` and the Slurm planner pass an upstream stage's staleness down to the stages
that read its outputs, page by page, and the real run redoes exactly what they say."""

import json
import os
import shutil

import pytest

from newsbag import manifest, revisions, rundir
from newsbag.config import load_config
from newsbag.slurm.plan import pending_stages
from nbtest import EXAMPLE_PAGE, run_cli, write_fake_config

REVIEW = {"name": "review", "kind": "review", "top_n": 1}
EXPORT = {"name": "export", "kind": "export", "formats": ["page-xml"], "variants": ["U", "P"]}


def _fusion(vote: int) -> dict:
    return {"name": "fusion", "kind": "fusion", "recommended": "P", "variants": {
        "U": {"sources": ["*"], "method": "consensus", "params": {"vote": vote}},
        "P": {"sources": ["fake/v"], "method": "best_single"}}}


def _mtimes(folder):
    return {p.relative_to(folder).as_posix(): p.stat().st_mtime_ns for p in sorted(folder.rglob("*.xml"))}


@pytest.mark.parametrize("change", ["option", "revision"])
def test_a_stale_fused_variant_makes_its_readers_stale_in_status_dry_run_and_slurm_alike(tmp_path, capsys,
                                                                                         monkeypatch, change):
    scans = tmp_path / "scans"
    scans.mkdir()
    for name in ("a.png", "b.png"):
        shutil.copy(EXAMPLE_PAGE, scans / name)
    run = tmp_path / "run"
    cfg = write_fake_config(tmp_path / "c.json", {"v": {}, "w": {}}, extra_stages=[_fusion(1), REVIEW, EXPORT])
    assert run_cli(capsys, "run", "--input-dir", scans, "--run-dir", run, "--config", cfg)[0] == 0
    if change == "option":   # the union's option changed: the record is the config a plain run takes
        cfg = write_fake_config(tmp_path / "c.json", {"v": {}, "w": {}}, extra_stages=[_fusion(2), REVIEW, EXPORT])
        assert run_cli(capsys, "run", "--run-dir", run, "--config", cfg, "--stages", "fake")[0] == 0
    else:                    # an upgrade whose consensus code makes other boxes
        now = revisions.REVISIONS["fusion/consensus"]
        monkeypatch.setitem(revisions.REVISIONS, "fusion/consensus", revisions.Revision(now.number + 1, now.entries))
    pages = 2

    code, out, err = run_cli(capsys, "status", "--run-dir", run, "--json")
    builtin = json.loads(out)["builtin"]
    status = {f"{kind}/{o['name']}": o["done"] for kind, rows in builtin.items() for o in rows}
    assert status == {"fusion/U": 0, "fusion/P": pages, "review/boards": 0,
                      "export/fusion/U": 0, "export/fusion/P": pages}
    (boards,) = builtin["review"]
    assert boards["reasons"] == {"its input fusion/U is redone first": pages}

    code, out, err = run_cli(capsys, "run", "--run-dir", run, "--dry-run", "--json")
    dry = {row["source"]: row["done"] for row in json.loads(out)["plan"] if row["family"] == "(builtin)"}
    assert dry == {"fusion/P": pages, "fusion/U": 0, "review/boards": 0, "export/fusion/U": 0, "export/fusion/P": pages}

    config = load_config(rundir.config_record(run))
    assert pending_stages(config, [], run) == ["fusion", "review", "export"]

    exports = rundir.exports_dir(run) / "page-xml" / "fusion"
    before = _mtimes(exports)
    info = {p: os.stat(rundir.review_page_dir(run, p) / "info.json").st_mtime_ns for p in manifest.manifest_page_ids(run)}
    code, out, err = run_cli(capsys, "run", "--run-dir", run, "--json")
    assert code == 0, err
    after = _mtimes(exports)
    assert {k for k in before if after[k] != before[k]} == {k for k in before if k.startswith("U/")}
    assert all(os.stat(rundir.review_page_dir(run, p) / "info.json").st_mtime_ns != t for p, t in info.items())
    code, out, err = run_cli(capsys, "status", "--run-dir", run, "--json")
    assert all(o["done"] == pages for rows in json.loads(out)["builtin"].values() for o in rows)
    assert pending_stages(config, [], run) == []
