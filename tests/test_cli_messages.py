"""What a call says at its end and on a mistake: the run summary, the one-line no-op rerun, --json on
stdout only, one error shape with "did you mean", single images as input, and the help's order."""

import json
import logging

import pytest

from nbtest import run_cli, write_fake_config, write_image

FUSION = {"name": "fusion", "kind": "fusion", "recommended": "C", "variants": {
    "S": {"sources": ["fake/*"], "method": "best_single"},
    "C": {"sources": ["*"], "method": "consensus", "params": {"vote": 1}}}}
REVIEW = {"name": "review", "kind": "review", "top_n": 3}
EXPORT = {"name": "export", "kind": "export"}


def _finished(tmp_path, page_dir, capsys, *extra):
    cfg = write_fake_config(tmp_path / "c.json", {"v": {}, "w": {}}, extra_stages=[FUSION, REVIEW, EXPORT])
    run = tmp_path / "run"
    code, out, err = run_cli(capsys, "run", "--input-dir", page_dir, "--recursive", "--run-dir", run,
                             "--config", cfg, *extra)
    assert code == 0, err
    return run, out, err


def test_run_ends_with_a_summary_of_pages_stages_recommendation_and_where_to_look(tmp_path, page_dir, capsys):
    run, out, err = _finished(tmp_path, page_dir, capsys)
    assert out == ""                                          # nothing on stdout unasked
    assert "5 page(s): 5 ok, 0 failed, 0 skipped in " in err
    for stage in ("fake/v", "fake/w", "fusion", "review", "export"):
        assert f"{stage} " in err.split(" in ", 1)[1].splitlines()[0]   # elapsed per stage on the first line
    assert "recommended: C (pinned by the config)" in err
    assert "best source: fake/v" in err
    assert f"look at: {run / 'review' / 'index.html'}; exports in {run / 'exports'}" in err


def test_run_json_is_one_object_on_stdout_with_the_same_facts(tmp_path, page_dir, capsys):
    run, out, err = _finished(tmp_path, page_dir, capsys, "--json")
    summary = json.loads(out)
    assert (summary["command"], summary["pages"], summary["ok"], summary["failed"], summary["skipped"]) == (
        "run", 5, 5, 0, 0)
    assert list(summary["stage_seconds"]) == ["fake/v", "fake/w", "fusion", "review", "export"]
    assert summary["recommended"] == {"variant": "C", "by": "config", "score": None}
    assert summary["best_source"]["name"] == "fake/v"
    assert summary["look_at"] == {"gallery": str(run / "review" / "index.html"), "exports": str(run / "exports")}
    assert [s["source"] for s in summary["sources"]] == ["fake/v", "fake/w"] and not summary["nothing_to_do"]


def test_a_rerun_with_nothing_to_do_says_so_in_one_line(tmp_path, page_dir, capsys, caplog):
    run, _, _ = _finished(tmp_path, page_dir, capsys)
    caplog.clear()
    with caplog.at_level(logging.INFO):
        code, out, err = run_cli(capsys, "run", "--run-dir", run)
    assert code == 0 and out == ""
    assert err.splitlines() == ["nothing to do: 5 pages current",
                                f"look at: {run / 'review' / 'index.html'}; exports in {run / 'exports'}"]
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.INFO] == []


def test_a_no_op_rerun_keeps_the_report_of_the_call_that_did_the_work(tmp_path, page_dir, capsys):
    run, _, _ = _finished(tmp_path, page_dir, capsys)
    report = run / "reports" / "run_all.json"
    before = report.read_bytes()
    assert run_cli(capsys, "run", "--run-dir", run)[0] == 0
    assert report.read_bytes() == before
    # a call that redoes one source keeps the other's entry (what ran it, where) and records what it redid
    code, out, err = run_cli(capsys, "run", "--run-dir", run, "--config",
                             write_fake_config(tmp_path / "c2.json", {"v": {}, "w": {"tag": "new"}},
                                               extra_stages=[FUSION, REVIEW, EXPORT]), "--json")
    assert code == 0, err
    assert {s["source"]: s["counts"]["ok"] for s in json.loads(out)["sources"]} == {"fake/v": 0, "fake/w": 5}
    kept = json.loads(report.read_text())
    assert {s["source"]: (s["counts"]["ok"], s["device_used"]) for s in kept["sources"]} == {
        "fake/v": (5, "cpu"), "fake/w": (5, "cpu")}
    assert kept["kept"] == ["fake/v"]


def test_builtin_commands_print_a_summary_and_json_only_when_asked(tmp_path, page_dir, capsys):
    run, _, _ = _finished(tmp_path, page_dir, capsys)
    code, out, err = run_cli(capsys, "fuse", "--run-dir", run, "--force")
    assert code == 0 and out == "", err
    assert "5 page(s): 5 ok, 0 failed, 0 skipped in " in err and "recommended: C (pinned by the config)" in err
    code, out, err = run_cli(capsys, "export", "--run-dir", run, "--json")
    assert code == 0, err
    summary = json.loads(out)
    assert (summary["command"], summary["nothing_to_do"], summary["skipped"]) == ("export", True, 5)


@pytest.mark.parametrize("args,message", [
    (["export", "--variant", "c"], "unknown variant 'c'; did you mean 'C'? (this run has: C, S)"),
    (["export", "--format", "page-xlm"], "unknown format 'page-xlm'; did you mean 'page-xml'?"),
    (["run", "--stages", "fusoin"], "unknown stage(s) fusoin; did you mean 'fusion'?"),
    (["fsue"], "no command 'fsue'; did you mean 'fuse'?"),
])
def test_unknown_names_exit_2_with_did_you_mean(tmp_path, page_dir, capsys, args, message):
    run, _, _ = _finished(tmp_path, page_dir, capsys)
    before = sorted(p.relative_to(run) for p in run.rglob("*"))
    code, out, err = run_cli(capsys, *args[:1], *(["--run-dir", run] if args[0] != "fsue" else []), *args[1:])
    assert (code, out) == (2, "")
    assert err.count("\n") == 1 and err.startswith("newsbag: error: ") and message in err, err
    assert sorted(p.relative_to(run) for p in run.rglob("*")) == before


@pytest.mark.parametrize("args,message", [
    (["run", "--run-dir", "R", "--input-dir", "/nonexistent"],
     "Invalid value for '--input-dir': Directory '/nonexistent' does not exist; try 'newsbag run --help'"),
    (["run", "--bogus"], "No such option '--bogus'; try 'newsbag run --help'"),
    (["status"], "Missing option '--run-dir'; try 'newsbag status --help'"),
])
def test_click_usage_errors_have_the_one_error_shape(capsys, args, message):
    code, out, err = run_cli(capsys, *args)
    assert (code, out, err) == (2, "", f"newsbag: error: {message}\n")


def test_a_single_image_is_an_input_with_the_id_its_folder_gives_it(tmp_path, capsys):
    from newsbag.inputs import page_id_for
    from newsbag.manifest import read_pages

    page = write_image(tmp_path / "scans" / "p1.png")
    write_image(tmp_path / "scans" / "p2.png")
    cfg = write_fake_config(tmp_path / "c.json", {"v": {}})
    run = tmp_path / "run"
    code, out, err = run_cli(capsys, "pages", page, "--run-dir", run, "--json")
    assert code == 0, err
    assert json.loads(out) == {"command": "pages", "pages": 1, "manifest": str(run / "manifests" / "pages.jsonl"),
                               "rejected": 0}
    code, _, err = run_cli(capsys, "run", page, "--run-dir", run, "--config", cfg)
    assert code == 0, err
    assert [p.page_id for p in read_pages(run)] == [page_id_for(page, tmp_path / "scans")]
    assert (run / "outputs/sources/fake/v" / f"{page_id_for(page, tmp_path / 'scans')}.json").is_file()
    # the folder later: the same page keeps its id (nothing redone), the other joins
    code, _, err = run_cli(capsys, "run", "--input", tmp_path / "scans", "--run-dir", run)
    assert code == 0, err
    assert len(read_pages(run)) == 2 and "2 page(s): 1 ok, 0 failed, 1 skipped" in err


def test_help_lists_commands_in_the_order_a_user_needs_them_with_an_example(capsys):
    code, out, _ = run_cli(capsys, "--help")
    assert code == 0
    listed = [line.split()[0] for line in out.split("Commands:", 1)[1].splitlines() if line.startswith("  ")]
    assert listed == ["run", "status", "review", "fuse", "export", "transcribe", "evaluate", "suggest", "tune",
                      "recommend", "pages", "doctor"]
    assert "newsbag run --input-dir" in out and "slurm" not in out
    code, out, _ = run_cli(capsys, "slurm", "--help")   # hidden, still there for the sbatch scripts
    assert code == 0 and "check-env" in out


def test_run_help_groups_its_options(capsys):
    code, out, _ = run_cli(capsys, "run", "--help")
    assert code == 0
    sections = [line.rstrip(":") for line in out.splitlines() if line and not line.startswith(" ")
                and line.endswith(":")]
    assert sections == ["Input", "Run", "Selection", "Output"]
    assert out.index("--input-dir") < out.index("--stages") < out.index("--json")


def test_doctor_says_which_member_it_checks(tmp_path, capsys, caplog):
    cfg = write_fake_config(tmp_path / "c.json", {"v": {}, "w": {}}, python="/nonexistent/env/bin/python")
    with caplog.at_level(logging.INFO):
        assert run_cli(capsys, "doctor", "--config", cfg, "--no-page")[0] == 3
    assert [r.getMessage() for r in caplog.records if r.name == "newsbag.doctor"] == [
        "doctor: checking fake/v (1 of 2)", "doctor: checking fake/w (2 of 2)"]


def test_evaluate_says_how_far_it_is(tmp_path, caplog):
    from newsbag.evaluate import run_evaluate

    run, gt = tmp_path / "run", tmp_path / "gt"
    (run / "manifests").mkdir(parents=True)
    (run / "manifests/pages.jsonl").write_text(json.dumps(
        {"page_id": "a-1f2e3d", "path": "images/a.png", "width": 100, "height": 100}) + "\n")
    (gt / "annotations").mkdir(parents=True)
    (gt / "annotations/a.json").write_text(json.dumps({"page_id": "a", "image": "images/a.png", "width": 100,
                                                       "height": 100, "regions": [{"bbox_xyxy": [10, 10, 90, 90],
                                                                                   "label": "text"}]}))
    for folder in ("outputs/sources/x/y", "outputs/fusion/C"):
        (run / folder).mkdir(parents=True)
        (run / folder / "a-1f2e3d.json").write_text(json.dumps({
            "page_id": "a-1f2e3d", "image": {"path": "images/a.png", "width": 100, "height": 100}, "source": {},
            "regions": [{"bbox_xyxy": [10, 10, 90, 90], "label": "t", "class": "text"}]}))
    with caplog.at_level(logging.INFO):
        assert run_evaluate(run, gt)["pages"] == 1
    assert [r.getMessage().split(" failed")[0] for r in caplog.records if r.name == "newsbag.progress"] == [
        "evaluate: done 2/2"]


def test_a_mistyped_source_in_the_config_gets_did_you_mean(tmp_path, page_dir, capsys):
    fusion = {"name": "fusion", "kind": "fusion", "variants": {"S": {"sources": ["fake/vv"], "method": "best_single"}}}
    cfg = write_fake_config(tmp_path / "c.json", {"v": {}}, extra_stages=[fusion])
    code, out, err = run_cli(capsys, "run", "--input-dir", page_dir, "--run-dir", tmp_path / "run", "--config", cfg)
    assert (code, out, err.count("\n")) == (2, "", 1)
    assert "'fake/vv' matches no source; did you mean 'fake/v'? (this config makes: fake/v)" in err


@pytest.mark.parametrize("args", [[], ["slurm"]])
def test_a_group_named_alone_shows_its_help_not_an_error(capsys, args):
    code, out, err = run_cli(capsys, *args)
    assert (code, out) == (2, "")
    assert err.startswith(f"Usage: newsbag {' '.join(args)}".rstrip() + " [OPTIONS] COMMAND")
    assert "newsbag: error" not in err
