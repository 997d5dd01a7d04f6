"""Status, `run --dry-run`, the Slurm planner and the run read one plan (`planner.plan_run`): an upstream
stage's staleness passes down to the stages that read its outputs, page by page, all of them count
the same pages, and the real run redoes exactly those."""

import json
import shutil

import pytest

from newsbag import manifest, revisions, rundir
from newsbag.config import load_config
from newsbag.planner import plan_run
from newsbag.slurm.plan import pending_stages
from nbtest import EXAMPLE_PAGE, run_cli, write_fake_config

REVIEW = {"name": "review", "kind": "review", "top_n": 1}
EXPORT = {"name": "export", "kind": "export", "formats": ["page-xml"], "variants": ["U", "P"]}
# each builtin output the test follows, by the planner's key, and the stage it belongs to
OUTPUTS = {"fusion:U": "fusion", "fusion:P": "fusion", "review:boards": "review",
           "export:fusion/U": "export", "export:fusion/P": "export"}


def _fusion(vote: int) -> dict:
    return {"name": "fusion", "kind": "fusion", "recommended": "P", "variants": {
        "U": {"sources": ["*"], "method": "consensus", "params": {"vote": vote}},
        "P": {"sources": ["fake/v"], "method": "best_single"}}}


def _finished(tmp_path, capsys):
    scans = tmp_path / "scans"
    scans.mkdir()
    for name in ("a.png", "b.png", "c.png"):
        shutil.copy(EXAMPLE_PAGE, scans / name)
    run = tmp_path / "run"
    cfg = write_fake_config(tmp_path / "c.json", {"v": {}, "w": {}}, extra_stages=[_fusion(1), REVIEW, EXPORT])
    assert run_cli(capsys, "run", "--input-dir", scans, "--run-dir", run, "--config", cfg)[0] == 0
    return run, cfg


def _change(change, tmp_path, capsys, monkeypatch, run, ids) -> tuple[set[str], set[str], set[str], str]:
    """Make the change; (the pages the union and its readers redo, those P and its export redo, the
    pages a source computes, why status says the union's pages are stale)."""
    if change == "option":   # the union's option changed: the record is the config a plain run takes
        cfg = write_fake_config(tmp_path / "c.json", {"v": {}, "w": {}}, extra_stages=[_fusion(2), REVIEW, EXPORT])
        assert run_cli(capsys, "run", "--run-dir", run, "--config", cfg, "--stages", "fake")[0] == 0
        return set(ids), set(), set(), "its options changed"
    if change == "revision":   # an upgrade whose consensus code makes other boxes
        now = revisions.REVISIONS["fusion/consensus"]
        monkeypatch.setitem(revisions.REVISIONS, "fusion/consensus", revisions.Revision(now.number + 1, now.entries))
        return set(ids), set(), set(), f"made by fusion/consensus code revision {now.number}, now {now.number + 1}"
    # one page of source fake/w lost: the run computes it, then that page of every fused variant (each
    # is fingerprinted by every source fusion reads), its board (which shows every source) and exports
    (rundir.source_dir(run, "fake", "w") / f"{ids[1]}.json").unlink()
    return {ids[1]}, {ids[1]}, {ids[1]}, "its input fake/w is gone"


def _mtimes(run, ids) -> dict[str, dict[str, int]]:
    """Output key -> page -> the mtime of the file the output keeps for the page."""
    exports = rundir.exports_dir(run) / "page-xml" / "fusion"
    out = {f"export:fusion/{v}": {p: (exports / v / f"{p}.xml").stat().st_mtime_ns for p in ids} for v in ("U", "P")}
    out["review:boards"] = {p: (rundir.review_page_dir(run, p) / "info.json").stat().st_mtime_ns for p in ids}
    return out


@pytest.mark.parametrize("change", ["option", "revision", "source page"])
def test_status_dry_run_slurm_and_the_run_count_the_same_pages_to_redo(tmp_path, capsys, monkeypatch, change):
    run, _ = _finished(tmp_path, capsys)
    ids = manifest.manifest_page_ids(run)
    union, best, computed, why = _change(change, tmp_path, capsys, monkeypatch, run, ids)
    expected = {"fusion:U": union, "fusion:P": best, "review:boards": union,
                "export:fusion/U": union, "export:fusion/P": best}

    config = load_config(rundir.config_record(run))
    plan = plan_run(config, run)
    redo = {key: set(pages) for s in plan.stages for key, pages in s.redo.items()}
    assert {key: redo[key] for key in OUTPUTS} == expected
    assert redo["source:fake/w"] == computed and redo["source:fake/v"] == set()

    code, out, err = run_cli(capsys, "status", "--run-dir", run, "--json")
    info = json.loads(out)
    status = {f"{kind}:{o['name']}": o["done"] for kind, rows in info["builtin"].items() for o in rows}
    assert status == {key: len(ids) - len(pages) for key, pages in expected.items()}
    assert {s["source"]: s["done"] for s in info["sources"]} == {"fake/v": len(ids), "fake/w": len(ids) - len(computed)}
    # each stale output says why: the union by what changed, its readers by the union redone first
    union_status = next(o for o in info["builtin"]["fusion"] if o["name"] == "U")
    assert union_status["reasons"] == {why: len(union)}
    if not computed:
        (boards,) = info["builtin"]["review"]
        assert boards["reasons"] == {"its input fusion/U is redone first": len(union)}

    code, out, err = run_cli(capsys, "run", "--run-dir", run, "--dry-run", "--json")
    dry = {row["source"]: row["done"] for row in json.loads(out)["plan"]}
    assert dry == {"fake/v": len(ids), "fake/w": len(ids) - len(computed),
                   **{key.replace(":", "/", 1): n for key, n in status.items()}}

    stages = ["fake"] * bool(computed) + ["fusion", "review", "export"]
    assert pending_stages(config, [], run) == stages

    before = _mtimes(run, ids)
    code, out, err = run_cli(capsys, "run", "--run-dir", run, "--json")
    assert code == 0, err
    after = _mtimes(run, ids)
    redone = {key: {p for p in ids if after[key][p] != before[key][p]} for key in before}
    summary = json.loads(out)
    if computed:   # the runner made the page as it was, which its readers may find by content: at most the plan
        assert all(redone[key] <= expected[key] for key in before) and summary["builtin"]["fusion"]["ok"] <= len(union)
    else:
        assert redone == {key: expected[key] for key in before}
        assert summary["builtin"]["fusion"]["ok"] == len(union)
    assert {s["source"]: s["counts"]["ok"] for s in summary["sources"]} == {"fake/v": 0, "fake/w": len(computed)}
    code, out, err = run_cli(capsys, "status", "--run-dir", run, "--json")
    assert all(o["done"] == len(ids) for rows in json.loads(out)["builtin"].values() for o in rows)
    assert pending_stages(config, [], run) == []


def test_a_submit_of_some_stages_counts_their_work_by_those_stages_alone(tmp_path, capsys):
    """Resubmitting the review alone after the union's option changed redoes no fused page first:
    its boards are current as the review alone finds them, and it has nothing to do."""
    run, _ = _finished(tmp_path, capsys)
    cfg = write_fake_config(tmp_path / "c.json", {"v": {}, "w": {}}, extra_stages=[_fusion(2), REVIEW, EXPORT])
    assert run_cli(capsys, "run", "--run-dir", run, "--config", cfg, "--stages", "fake")[0] == 0
    config = load_config(rundir.config_record(run))
    assert pending_stages(config, [], run) == ["fusion", "review", "export"]
    assert pending_stages(config, ["review"], run) == []
    assert pending_stages(config, ["fusion", "review"], run) == ["fusion", "review"]


def test_a_run_with_nothing_to_export_skips_the_export_and_says_what_it_redoes(tmp_path, capsys, caplog,
                                                                               monkeypatch):
    import logging

    run, cfg = _finished(tmp_path, capsys)
    ids = manifest.manifest_page_ids(run)
    exports = rundir.exports_dir(run)
    calls = []
    from newsbag import stages

    real = stages.KINDS["export"]
    monkeypatch.setitem(stages.KINDS, "export", stages.Kind(lambda: (
        real.status, lambda *a, **k: calls.append(a[1]) or real.run(*a, **k))))
    monkeypatch.setattr(logging.getLogger(), "_newsbag_configured", True, raising=False)  # keep caplog's handler
    caplog.clear()
    with caplog.at_level("INFO"):
        assert run_cli(capsys, "run", "--run-dir", run)[0] == 0
    assert calls == [] and not [m for m in caplog.messages if "to redo" in m or "to compute" in m]
    (rundir.source_dir(run, "fake", "w") / f"{ids[0]}.json").unlink()
    (exports / "page-xml" / "fusion" / "P" / f"{ids[2]}.xml").unlink()
    caplog.clear()
    with caplog.at_level("INFO"):
        assert run_cli(capsys, "run", "--run-dir", run)[0] == 0
    assert calls == [ids]
    assert f"fake/w: 1 of {len(ids)} page(s) to compute" in caplog.messages
    # planned once fusion ran: the runner made the page as it was, and fusion the same fused pages,
    # so the page of P whose file went is all there is to export
    assert f"export: 1 of {len(ids)} page(s) to redo" in caplog.messages


def test_every_stage_of_a_config_shows_the_planner_one_face(tmp_path):
    from newsbag.stage_protocol import Stage
    from newsbag.stages import Builtin, ModelSources, stage_of

    config = load_config(write_fake_config(tmp_path / "c.json", {"v": {}}, extra_stages=[_fusion(1), REVIEW, EXPORT]))
    steps = [stage_of(s) for s in config.stages]
    assert all(isinstance(step, Stage) for step in steps)
    assert [(type(step), step.name, step.kind) for step in steps] == [
        (ModelSources, "fake", "model"), (Builtin, "fusion", "fusion"), (Builtin, "review", "review"),
        (Builtin, "export", "export")]


def test_a_plan_lists_each_source_s_failure_records_once(tmp_path, capsys, monkeypatch):
    """A source's plan counts its failed pages from the listing its page plan (`source_pages`) read."""
    from newsbag.io import write_json

    run, cfg = _finished(tmp_path, capsys)
    ids = [r.page_id for r in manifest.read_pages(run)]
    folder = rundir.source_dir(run, "fake", "v")
    (folder / f"{ids[0]}.json").unlink()
    write_json(rundir.failure_path(folder, ids[0]), {"page_id": ids[0], "error": "boom", "error_class": "RuntimeError"})
    listed, real = [], rundir.page_files
    monkeypatch.setattr(rundir, "page_files", lambda f: listed.append(f) or real(f))
    config = load_config(cfg)
    (model,) = plan_run(config, run, stages=[config.stage("fake")]).stages
    assert [(o.name, o.failed, o.pending) for o in model.outputs] == [("fake/v", 1, 0), ("fake/w", 0, 0)]
    assert listed == [rundir.source_dir(run, "fake", v) / rundir.FAILED_DIR for v in ("v", "w")]


def test_a_dry_run_row_names_the_source_where_it_runs_and_its_pages(tmp_path, capsys, monkeypatch):
    """`run --dry-run`'s rows: a model source with its family, env and device; a builtin stage's
    outputs on the cpu; a builtin stage that made nothing yet in one row of its kind."""
    from newsbag import stages
    from newsbag.pipeline import plan

    run, cfg = _finished(tmp_path, capsys)
    ids = [r.page_id for r in manifest.read_pages(run)]
    (rundir.source_dir(run, "fake", "w") / f"{ids[0]}.json").unlink()
    monkeypatch.setitem(stages.KINDS, "review", stages.Kind(lambda: (lambda *a: [], None), planned=False))
    config = load_config(cfg)
    fake = config.stage("fake")
    rows = plan(config, [fake, config.stage("review")], ids, run)
    n = len(ids)
    assert rows == [
        {"stage": "fake", "source": f"fake/{v}", "family": fake.family, "env": fake.env.python, "device": fake.device,
         "pages": n, "done": n - todo, "todo": todo} for v, todo in (("v", 0), ("w", 1))] + [
        {"stage": "review", "source": "review/review", "family": "(builtin)", "env": "", "device": "cpu",
         "pages": n, "done": 0, "todo": n}]
    assert [list(r) for r in rows] == [["stage", "source", "family", "env", "device", "pages", "done", "todo"]] * 3
