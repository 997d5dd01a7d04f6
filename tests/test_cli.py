"""CLI surface: help for every command, and usage errors with their exit codes and messages."""

import json
import os
import shlex
import signal
import subprocess
import sys

import pytest

from newsbag.cli import cli

from newsbag.inputs import page_id_for

from nbtest import FAKE_RUNNERS, run_cli, write_fake_config, write_image


@pytest.mark.parametrize("command", sorted(cli.commands))
def test_every_command_has_help(capsys, command):
    code, out, _ = run_cli(capsys, command, "--help")
    assert code == 0 and "Usage: newsbag " + command in out


def test_transcribe_help_says_its_workers_option_is_not_for_processes(capsys):
    code, out, _ = run_cli(capsys, "transcribe", "--help")
    assert code == 0 and "one recogniser process" in " ".join(out.split())


def test_top_level_help_lists_commands(capsys):
    code, out, _ = run_cli(capsys, "--help")
    assert code == 0
    for command in ("run", "status", "fuse", "review", "evaluate", "pages"):
        assert command in out


@pytest.mark.parametrize("args,code,message", [
    (["run", "--run-dir", "{run}", "--stages", "nosuch"], 2, "unknown stage(s) nosuch"),          # bad stage
    (["run", "--run-dir", "{run}", "--shard", "3/3"], 2, "need 0 <= K < N"),                     # bad shard
    (["run", "--run-dir", "{run}", "--shard", "x"], 2, "is not K/N"),                            # shard syntax
    (["run", "--run-dir", "{run}", "--input-dir", "{tmp}/missing"], 2, "does not exist"),         # missing dir
    (["run", "--run-dir", "{run}", "--config", "{tmp}/bad.json"], 2, "invalid JSON at line 1"),    # broken config
    (["run", "--run-dir", "{run}", "--config", "{tmp}/unknown_key.json"], 2, "unknown key 'colour'"),  # typo
    (["run", "--run-dir", "{run}", "--config", "{tmp}/bad_param.json"], 2, "unknown key 'moed'; did you mean 'mode'?"),  # param typo
    (["run", "--run-dir", "{run}"], 2, "no pages: give --input-dir or --manifest"),               # nothing to do
    (["pages", "--run-dir", "{run}"], 2, "give --input-dir or --manifest"),
    (["status", "--run-dir", "{tmp}/nope"], 2, "is not a run directory"),
    (["status", "--run-dir", "{tmp}/empty"], 2, "is not a run directory"),                  # e.g. runs/ for runs/demo
    (["run", "--run-dir", "{run}", "--input-dir", "{tmp}/empty"], 2, "no page images"),          # empty folder
    (["run", "--run-dir", "{run}", "--input-dir", "{tmp}/pages", "--pages", "p1,nosuch"], 2,     # id typo
     "--pages: unknown page id(s) nosuch"),
    (["run", "--run-dir", "{run}", "--input-dir", "{tmp}/pages", "--pages", "nosuch", "--dry-run"], 2,
     "--pages: unknown page id(s) nosuch"),
    # --workers did nothing for transcription (one recogniser process reads every page): refused, saying why
    (["transcribe", "--run-dir", "{run}", "--workers", "4"], 2,
     "Invalid value for --workers: 4: transcription reads the pages in one recogniser process"),
])
def test_usage_errors(tmp_path, capsys, args, code, message):
    (tmp_path / "empty").mkdir()
    write_image(tmp_path / "pages" / "p1.png")
    args = [a.replace("p1,", page_id_for(tmp_path / "pages" / "p1.png", tmp_path / "pages") + ",") for a in args]
    (tmp_path / "bad.json").write_text("{oops")
    (tmp_path / "unknown_key.json").write_text(json.dumps({"colour": 1, "stages": []}))
    write_fake_config(tmp_path / "bad_param.json", {"v": {"moed": "ok"}})
    run = tmp_path / "run"
    args = [a.format(run=run, tmp=tmp_path) for a in args]
    got, out, err = run_cli(capsys, *args)
    assert got == code
    assert message in err
    assert not run.exists()  # refused before anything is written


def _mistyped(level: str, config: dict) -> dict:
    """`config` with one key mistyped at `level`."""
    fusion = {"name": "fusion", "kind": "fusion",
              "variants": {"u": {"sources": ["*"], "method": "consensus", "params": {"vote": 1}}}}
    review = {"name": "review", "kind": "review", "top_n": 3}
    config["stages"] += [fusion, review]
    if level == "pipeline":
        config["devise"] = config.pop("device")
    elif level == "env entry":
        config["envs"]["fake"]["pyhton"] = config["envs"]["fake"].pop("python")
    elif level == "model stage":
        config["stages"][0]["page_timeout"] = config["stages"][0].pop("page_timeout_s")
    elif level == "runner parameter":
        config["stages"][0]["variants"]["v"]["moed"] = "ok"
    elif level == "fusion section":
        fusion["variantz"] = fusion.pop("variants")
    elif level == "fusion variant":
        fusion["variants"]["u"]["metod"] = fusion["variants"]["u"].pop("method")
    elif level == "variant option":
        fusion["variants"]["u"]["params"] = {"vot": 1}
    else:
        review["top_m"] = review.pop("top_n")
    return config


@pytest.mark.parametrize("level, typo, meant", [
    ("pipeline", "devise", "device"),
    ("env entry", "pyhton", "python"),
    ("model stage", "page_timeout", "page_timeout_s"),
    ("runner parameter", "moed", "mode"),
    ("fusion section", "variantz", "variants"),
    ("fusion variant", "metod", "method"),
    ("variant option", "vot", "vote"),
    ("builtin stage option", "top_m", "top_n"),
])
def test_a_mistyped_key_at_every_level_gets_one_message(tmp_path, capsys, level, typo, meant):
    config = json.loads(write_fake_config(tmp_path / "c.json", {"v": {}}).read_text())
    (tmp_path / "c.json").write_text(json.dumps(_mistyped(level, config)))
    write_image(tmp_path / "pages" / "p1.png")
    code, _, err = run_cli(capsys, "run", "--run-dir", tmp_path / "run", "--input-dir", tmp_path / "pages",
                           "--config", tmp_path / "c.json")
    assert code == 2
    assert f"unknown key {typo!r}; did you mean {meant!r}? (known: " in err
    assert len(err.strip().splitlines()) == 1


@pytest.mark.parametrize("level, key, value, must", [
    ("pipeline", "device", "gpux", "one of auto, gpu, cpu"),
    ("env entry", "python", 3, "a string"),
    ("model stage", "max_restarts", -1, "a whole number >= 0"),
    ("runner parameter", "batch_size", "2", "a whole number"),
    ("fusion section", "line_source", 3, "a string '<stage>/<variant>', or null"),
    ("fusion variant", "method", "vote", "one of consensus, best_single, paragraphs"),
    ("variant option", "vote", 0, "a whole number >= 1"),
    ("builtin stage option", "top_n", "5", "a whole number"),
])
def test_a_bad_value_at_every_level_is_one_line_naming_the_file_the_key_and_what_it_must_be(
        tmp_path, capsys, level, key, value, must):
    config = json.loads(write_fake_config(tmp_path / "c.json", {"v": {}}).read_text())
    config = _mistyped("pipeline", config)
    config["device"] = config.pop("devise")
    fusion, review = config["stages"][1:]
    entry = {"pipeline": config, "env entry": config["envs"]["fake"], "model stage": config["stages"][0],
             "runner parameter": config["stages"][0]["variants"]["v"], "fusion section": fusion,
             "fusion variant": fusion["variants"]["u"], "variant option": fusion["variants"]["u"]["params"],
             "builtin stage option": review}[level]
    entry[key] = value
    (tmp_path / "c.json").write_text(json.dumps(config))
    code, _, err = run_cli(capsys, "run", "--run-dir", tmp_path / "run", "--input-dir", tmp_path,
                           "--config", tmp_path / "c.json")
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert str(tmp_path / "c.json") in err and f"{key} must be {must}" in err and f"got {value!r}" in err


def test_dry_run_prints_plan_and_writes_nothing(tmp_path, page_dir, capsys):
    cfg = write_fake_config(tmp_path / "c.json", {"a": {}, "b": {"mode": "raise"}})
    code, out, _ = run_cli(capsys, "run", "--input-dir", page_dir, "--recursive", "--run-dir", tmp_path / "run",
                           "--config", cfg, "--dry-run", "--json")
    assert code == 0
    plan = json.loads(out)
    assert plan["pages"] == 5 and [r["source"] for r in plan["plan"]] == ["fake/a", "fake/b"]
    assert all(r["todo"] == 5 for r in plan["plan"])
    assert not (tmp_path / "run").exists()


def test_dry_run_plans_only_the_pages_named(tmp_path, page_dir, capsys):
    cfg = write_fake_config(tmp_path / "c.json", {"a": {}})
    wanted = page_id_for(page_dir / "issue2" / "p3.png", page_dir)
    code, out, err = run_cli(capsys, "run", "--input-dir", page_dir, "--recursive", "--run-dir", tmp_path / "run",
                             "--config", cfg, "--pages", wanted, "--dry-run", "--json")
    assert code == 0, err
    plan = json.loads(out)
    assert plan["plan"][0]["pages"] == plan["plan"][0]["todo"] == 1  # what `run --pages` would compute, not all 5


def test_dry_run_refuses_what_the_run_refuses_when_there_is_no_page(tmp_path, capsys):
    """A plan of nothing is not a plan: an empty input folder, or no inputs and no manifest,
    is the run's one line and exit 2 under --dry-run too (it printed "0 page(s)", exit 0)."""
    cfg = write_fake_config(tmp_path / "c.json", {"a": {}})
    (tmp_path / "empty").mkdir()
    for args, message in (((("--input-dir", tmp_path / "empty")), "no page images"),
                          ((), "no pages: give --input-dir or --manifest")):
        code, _, err = run_cli(capsys, "run", *args, "--run-dir", tmp_path / "run", "--config", cfg, "--dry-run")
        assert (code, err.count("\n")) == (2, 1) and message in err, err
    assert not (tmp_path / "run").exists()


def test_status_text_lists_sources_and_errors(tmp_path, page_dir, capsys):
    cfg = write_fake_config(tmp_path / "c.json", {"v": {"mode": "raise", "on": ["issue2__p3"]}})
    assert run_cli(capsys, "run", "--input-dir", page_dir, "--recursive", "--run-dir", tmp_path / "run", "--config", cfg)[0] == 4
    code, out, _ = run_cli(capsys, "status", "--run-dir", tmp_path / "run")
    assert code == 0
    assert "fake/v" in out and "done      4" in out and "failed     1" in out
    assert "ValueError: bad page" in out


def test_doctor_reports_a_missing_env_and_exits_3(tmp_path, capsys):
    cfg = write_fake_config(tmp_path / "c.json", {"v": {}}, python="/nonexistent/env/bin/python")
    code, out, err = run_cli(capsys, "doctor", "--config", cfg, "--no-page")
    assert code == 3
    assert "fake/v" in out and "NO" in out and "/nonexistent/env/bin/python does not exist" in out
    assert "1 member(s) not ready: fake/v" in err


def test_doctor_runs_a_page_through_the_embedded_bag(capsys):
    code, out, err = run_cli(capsys, "doctor", "--json")
    assert code == 0, err
    rows = json.loads(out)
    assert {f"{r['stage']}/{r['variant']}" for r in rows} >= {"tesseract/blocks", "paddle_layout/cdla", "text_lines/lines"}
    assert all(r["ready"] and r["page_ok"] and r["device"] == "cpu" for r in rows)


@pytest.mark.parametrize("stage,message", [
    ({"name": "fusion", "kind": "fusion", "variants": {"X": {"sources": ["*"], "method": "vote"}}}, "fusion"),  # bad method
    ({"name": "review", "kind": "review", "top_m": 3}, "unknown key 'top_m'; did you mean 'top_n'?"),                                  # typo
])
def test_builtin_stage_options_are_checked_before_running(tmp_path, page_dir, capsys, stage, message):
    cfg = write_fake_config(tmp_path / "c.json", {"v": {}}, extra_stages=[stage])
    code, _, err = run_cli(capsys, "run", "--input-dir", page_dir, "--run-dir", tmp_path / "run", "--config", cfg)
    assert code == 2 and message in err and f"stage {stage['name']!r}" in err
    assert not (tmp_path / "run").exists()


def test_fuse_and_review_rerun_on_an_existing_run(tmp_path, page_dir, capsys):
    cfg = write_fake_config(tmp_path / "c.json", {"a": {}, "b": {}})
    run = tmp_path / "run"
    assert run_cli(capsys, "run", "--input-dir", page_dir, "--recursive", "--run-dir", run, "--config", cfg)[0] == 0
    code, out, err = run_cli(capsys, "fuse", "--run-dir", run)  # config comes from config.resolved.json
    assert code == 0, err
    summary = json.loads((run / "outputs/fusion/summary.json").read_text())
    assert summary["sources"] == ["fake/a", "fake/b"]
    code, out, err = run_cli(capsys, "review", "--run-dir", run)
    assert code == 0, err
    assert len(list((run / "review/pages").glob("*/data.js"))) == 5


def test_relative_config_paths_resolve_against_the_config_folder(tmp_path, page_dir, capsys, monkeypatch):
    """`run --config ../proj/pipeline.json` from another folder: the config's runners_dir and env
    interpreter are its neighbours, not names under the cwd (where they do not exist)."""
    proj, elsewhere, run = tmp_path / "proj", tmp_path / "elsewhere", tmp_path / "run"
    (proj / "bin").mkdir(parents=True)
    elsewhere.mkdir()
    (proj / "runners").symlink_to(FAKE_RUNNERS)
    python = proj / "bin" / "python"
    python.write_text(f"#!/bin/sh\nexec {shlex.quote(sys.executable)} \"$@\"\n")
    python.chmod(0o755)
    (proj / "pipeline.json").write_text(json.dumps({
        "runners_dir": "runners", "envs": {"fake": {"python": "bin/python"}},
        "stages": [{"name": "fake", "family": "fake", "env": "fake", "variants": {"v": {}}}]}))
    monkeypatch.chdir(elsewhere)
    code, _, err = run_cli(capsys, "run", "--input-dir", page_dir, "--recursive", "--run-dir", run,
                           "--config", "../proj/pipeline.json")
    assert code == 0, err
    resolved = json.loads((run / "config.resolved.json").read_text())
    assert resolved["runners_dir"] == str(proj / "runners")
    assert resolved["envs"]["fake"]["python"] == str(python)
    assert len(list((run / "outputs/sources/fake/v").glob("issue*.json"))) == 5


def test_pages_naming_an_unreadable_input_reports_the_input_not_a_typo(tmp_path, capsys):
    """`--pages` that names an input whose image cannot be read: the page is rejected with its one
    line, like any bad input, and the rest of the selection runs; it is not an "unknown page id"."""
    good, bad = tmp_path / "in" / "good.png", tmp_path / "in" / "bad.png"
    write_image(good)
    bad.write_text("not an image")
    ids = [page_id_for(p, tmp_path / "in") for p in (good, bad)]
    cfg = write_fake_config(tmp_path / "c.json", {"v": {}})
    run = tmp_path / "run"
    code, _, err = run_cli(capsys, "run", "--input-dir", tmp_path / "in", "--run-dir", run, "--config", cfg,
                           "--pages", ",".join(ids))
    assert "unknown page id" not in err
    assert "bad.png" in err and code == 4
    assert (run / "outputs" / "sources" / "fake" / "v" / f"{ids[0]}.json").is_file()


@pytest.mark.parametrize("sig,code", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])  # Ctrl-C, scancel
def test_a_signal_landing_in_a_lazy_import_still_exits_with_its_code(tmp_path, sig, code):
    """A signal that lands while a lazily imported module builds a dataclass (``dataclasses``
    compiles its methods with a string ``exec``) is caught and reported like any other; under
    ``python -m`` CPython then still killed the process by SIGINT (exit -2), as a loaded full
    run of test_interrupt_stops_the_runner_and_exits_130 showed (fusion/geometry.py's import)."""
    (tmp_path / "nb_lazy.py").write_text(
        "import signal, sys\n"
        "from newsbag import cli\n"
        "@cli.cli.command('lazy')\n"
        "def lazy():\n"
        f"    exec('import signal; signal.raise_signal({int(sig)})', {{}})\n"
        "cli.main(['lazy'])\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), *sys.path])}
    done = subprocess.run([sys.executable, "-m", "nb_lazy"], capture_output=True, text=True, env=env, timeout=60,
                          preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    assert (done.returncode, done.stderr.strip().splitlines()[-1]) == (code, "newsbag: interrupted")
