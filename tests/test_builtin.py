"""Builtin stages are entries of one registry: config.py knows no stage module by name."""

import json
import subprocess
import sys
import textwrap

import pytest

from newsbag import builtin, stages
from newsbag.config import parse_config
from newsbag.errors import ConfigError

from nbtest import run_cli, write_fake_config


def test_loading_the_default_config_imports_no_stage_nor_array_or_image_library():
    """What `newsbag run` does before any stage starts: each builtin stage's options come from its
    light options module; fusion, review, export and transcription code (and numpy, shapely,
    PIL) load only when a stage runs."""
    code = ("import sys, newsbag.config; newsbag.config.load_config(None); "
            "print(' '.join(sorted(m for m in sys.modules if m.split('.')[0] in ('newsbag', 'numpy', 'shapely', 'PIL'))))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    loaded = set(out.split())
    options_only = {"newsbag.fusion", "newsbag.fusion.options", "newsbag.review", "newsbag.review.options",
                    "newsbag.export", "newsbag.export.options", "newsbag.transcription", "newsbag.transcription.options"}
    stage_code = {m for m in loaded if m.startswith(("newsbag.fusion", "newsbag.review", "newsbag.export",
                                                     "newsbag.transcription"))} - options_only
    assert stage_code == set()
    assert {m for m in loaded if not m.startswith("newsbag")} == set()
    assert {"newsbag.builtin", "newsbag.review.options"} <= loaded   # the registry and the options it checks


def test_every_builtin_stage_renders_its_declared_options_as_a_markdown_table():
    """What the docs show is made from the declarations the config validates by."""
    for kind in builtin.kinds():
        table = builtin.options_markdown(kind)
        assert table.count("| option | default | value | what it does |") >= 1, kind
    review = builtin.options_markdown("review")
    assert "| `max_board_width` | `2400` | a whole number >= 960 (px) | widest a board is drawn |" in review
    fusion = builtin.options_markdown("fusion")
    assert "**paragraphs params**" in fusion
    assert "| `nest_max_h` | `4.0` | a number >= 0 (text-line heights) | highest such a nesting block is |" in fusion


def test_registry_lists_fusion_and_review():
    assert {"fusion", "review"} <= set(builtin.kinds())
    with pytest.raises(ValueError, match="unknown builtin stage kind 'nope'"):
        builtin.get("nope")


@pytest.fixture
def echo_kind(tmp_path, monkeypatch):
    """A new builtin stage: one module plus a line in the config's registry and one in the stage table. It writes one word file per page
    and says which pages have theirs."""
    pkg = tmp_path / "extra_stage.py"
    pkg.write_text(textwrap.dedent('''
        from pathlib import Path

        from newsbag.stage_protocol import Outputs

        def parse(options):
            unknown = set(options) - {"word", "description"}
            if unknown:
                raise ValueError(f"echo stage: unknown key(s) {', '.join(sorted(unknown))}")
            return options

        def run(run_dir, page_ids, options, *, force=False, workers=1, progress=None):
            for pid in page_ids:
                out = Path(run_dir) / "outputs" / "echo" / f"{pid}.txt"
                out.parent.mkdir(parents=True, exist_ok=True)
                out.write_text(options.get("word", ""))
                progress and progress(pid, "ok")
            return {"ok": len(page_ids), "skipped": 0, "failed": 0, "failures": [], "word": options.get("word")}

        def status(run_dir, records, options):
            word = options.get("word", "")
            said = [r.page_id for r in records if (Path(run_dir) / "outputs" / "echo" / f"{r.page_id}.txt").is_file()]
            same = [p for p in said if (Path(run_dir) / "outputs" / "echo" / f"{p}.txt").read_text() == word]
            return [Outputs("words", done=len(same), stale=len(said) - len(same), failed=0,
                            pending=len(records) - len(said), reasons={"another word": len(said) - len(same)}
                            if len(said) > len(same) else {})]
    '''))
    monkeypatch.syspath_prepend(str(tmp_path))
    import extra_stage

    monkeypatch.setitem(builtin.REGISTRY, "echo", builtin.BuiltinKind(extra_stage.parse))
    monkeypatch.setitem(stages.KINDS, "echo", stages.Kind(lambda: (extra_stage.status, extra_stage.run)))
    return "echo"


def test_a_new_builtin_stage_is_one_module_plus_two_lines(echo_kind, tmp_path, page_dir, capsys):
    """It runs, `newsbag status` (text and --json) counts its outputs, `run --dry-run` plans them
    and the Slurm resubmit plan has it while it has work, with no edit anywhere else."""
    from newsbag.config import load_config
    from newsbag.slurm.plan import pending_stages

    cfg = write_fake_config(tmp_path / "c.json", {"v": {}},
                            extra_stages=[{"name": "say", "kind": "echo", "word": "hi"}])
    run = tmp_path / "run"
    code, _, err = run_cli(capsys, "run", "--input-dir", page_dir, "--recursive", "--run-dir", run, "--config", cfg)
    assert code == 0, err
    report = json.loads((run / "reports/run_all.json").read_text())
    assert report["builtin"]["say"]["ok"] == 5
    with pytest.raises(ConfigError, match="echo stage: unknown key"):
        parse_config(json.loads(cfg.read_text()) | {"stages": [{"name": "say", "kind": "echo", "wrd": 1}]})
    assert pending_stages(load_config(cfg), [], run) == []

    first = sorted((run / "outputs/echo").glob("*.txt"))
    first[0].unlink()
    first[1].write_text("ho")
    code, out, _ = run_cli(capsys, "status", "--run-dir", run, "--json")
    assert json.loads(out)["builtin"]["echo"] == [{"name": "words", "done": 3, "stale": 1, "failed": 0, "pending": 1,
                                                   "reasons": {"another word": 1}, "note": "", "whole": True}]
    code, out, _ = run_cli(capsys, "status", "--run-dir", run)
    assert "  echo/words                           done      3  failed     0  stale     1  pending      1" in out
    assert "      stale: another word (1 page)" in out
    code, out, _ = run_cli(capsys, "run", "--run-dir", run, "--dry-run", "--json")
    assert [(r["source"], r["done"], r["todo"]) for r in json.loads(out)["plan"] if r["stage"] == "say"] == [
        ("echo/words", 3, 2)]
    assert pending_stages(load_config(cfg), [], run) == ["say"]


def test_unknown_kind_names_the_registered_ones():
    with pytest.raises(ConfigError, match="kind must be one of model, fusion, review"):
        parse_config({"stages": [{"name": "x", "kind": "exportt"}]})
