"""Config loading: every malformed entry is one ConfigError naming the file and the key, never a traceback."""

import json

import pytest

from newsbag.config import load_config, parse_config, to_jsonable
from newsbag.errors import ConfigError
from newsbag.jsontext import MAX_DEPTH

from nbtest import FAKE_RUNNERS


def _config(top=None, stage=None, env=None) -> dict:
    """A valid one-stage fake config with `top`, `stage` and `env` entries put over its defaults."""
    return {"runners_dir": str(FAKE_RUNNERS),
            "envs": {"e": {"python": "", **(env or {})}},
            "stages": [{"name": "fake", "env": "e", "variants": {"v": {}}, **(stage or {})}],
            **(top or {})}


@pytest.mark.parametrize("raw,message", [
    (_config(top={"vars": ["BASE"]}), "vars must be an object"),                              # a list, not names
    (_config(top={"vars": {"BASE": {"x": 1}}}), "vars must be an object of strings or numbers, got {'BASE': {'x': 1}}"),                 # nested value
    (_config(top={"envs": ["e"]}), "envs must be an object"),                                 # a list of env names
    (_config(env={"env": ["HF_HOME=/x"]}), "envs.e: env must be an object, got ['HF_HOME=/x']"),                   # shell-style list
    (_config(env={"python": 3}), "envs.e: python must be a string, got 3"),                           # a version, not a path
    (_config(top={"allow_cpu_fallback": "false"}), "allow_cpu_fallback must be true or false"),  # quoted bool
    (_config(stage={"allow_cpu_fallback": "no"}), "stage 'fake': allow_cpu_fallback must be true or false"),
    (_config(stage={"timeout_s": "1h"}), "stage 'fake': timeout_s must be a number > 0 (s), got '1h'"),     # a duration string
    (_config(stage={"page_timeout_s": 0}), "stage 'fake': page_timeout_s must be a number > 0 (s), got 0"),  # would never wait
    (_config(stage={"max_restarts": "3"}), "stage 'fake': max_restarts must be a whole number >= 0"),
    (_config(stage={"max_restarts": 1.5}), "stage 'fake': max_restarts must be a whole number >= 0"),
    (_config(top={"runners_dir": 5}), "runners_dir must be a string"),                        # not a path
    (_config(stage={"kind": ["fusion"]}), "stage 'fake': kind must be a string"),              # a list of kinds
    (_config(stage={"family": ["fake"]}), "stage 'fake': family must be a string"),
    (_config(stage={"env": ["e"]}), "stage 'fake': env must be a string"),
    (_config(stage={"family": "tesserct"}), "stage 'fake': no runner for family 'tesserct'"),  # a typo'd family
    (_config(top={"stages": []}), "stages must be a list of objects (at least 1), got []"),
    ({"envs": {}}, "stages is missing: it must be a list of objects (at least 1)"),
    (_config(stage={"name": 3}), "stages[0]: name must be a string, got 3"),
    ({"stages": [{"variants": {"v": {}}}]}, "stages[0]: name is missing: it must be a string"),
    (_config(stage={"variants": {}}), "stage 'fake': variants must be an object (at least 1), got {}"),
])
def test_a_malformed_entry_is_one_config_error_naming_the_key(raw, message):
    with pytest.raises(ConfigError) as exc:
        parse_config(raw, "c.json")
    assert str(exc.value).startswith("c.json: ") and message in str(exc.value)
    assert "\n" not in str(exc.value)


@pytest.mark.parametrize("stage,where", [
    ({"name": ".."}, "stage name '..'"),            # outputs/sources/.. : written beside sources/, never fused
    ({"name": "a/b"}, "stage name 'a/b'"),          # two folders deep: discovery sees source "a/b", not a/b/v
    ({"name": ""}, "stage name ''"),                # outputs/sources/v: the variant taken for a stage
    ({"name": "_x"}, "stage name '_x'"),            # discovery skips _folders: ran, never fused
    ({"name": "a,b"}, "stage name 'a,b'"),          # --stages a,b can never select it
    ({"variants": {"..": {}}}, "variant name '..'"),
    ({"variants": {"_shared": {}}}, "variant name '_shared'"),  # the stage's shared model-pass folder
])
def test_a_stage_or_variant_name_that_is_no_plain_folder_is_refused(stage, where):
    """Names are output folders that discovery must find again: a name it skips or splits lost
    the stage's pages from fusion (the run went on and failed every fused page)."""
    with pytest.raises(ConfigError) as exc:
        parse_config(_config(stage=stage), "c.json")
    assert str(exc.value).startswith("c.json: ") and where in str(exc.value)
    assert "letters, digits" in str(exc.value)


def test_a_builtin_stage_name_follows_the_same_rule():
    raw = _config()
    raw["stages"].append({"name": "fu/sion", "kind": "fusion"})
    with pytest.raises(ConfigError, match=r"c.json: stage name 'fu/sion'"):
        parse_config(raw, "c.json")


@pytest.mark.parametrize("raw,where", [
    (_config(env={"python": "$NB_UNSET/bin/python"}), "envs.e.python"),           # the env root of a login shell
    (_config(env={"env": {"HF_HOME": "${NB_UNSET}/hf"}}), "envs.e.env.HF_HOME"),   # braced form
    (_config(stage={"variants": {"v": {"tag": "$NB_UNSET"}}}), "stages[0].variants.v.tag"),  # a runner parameter
    (_config(top={"vars": {"BASE": "/scratch/$NB_UNSET"}}, env={"python": "$BASE/bin/python"}),
     "envs.e.python"),                                                            # through a vars default
])
def test_a_variable_that_is_not_set_is_refused_naming_the_key(raw, where, monkeypatch):
    """An unset $VAR used to stay in the value as written: the run went on and failed later with
    an interpreter or weights path like /proj/$NB_UNSET/bin/python, never naming the variable."""
    monkeypatch.delenv("NB_UNSET", raising=False)
    monkeypatch.delenv("BASE", raising=False)
    with pytest.raises(ConfigError) as exc:
        parse_config(raw, "c.json")
    assert str(exc.value).startswith(f"c.json: {where}: $NB_UNSET is not set")
    assert "vars" in str(exc.value) and "\n" not in str(exc.value)


def test_a_dollar_in_a_description_is_prose(monkeypatch):
    monkeypatch.delenv("NB_UNSET", raising=False)
    config = parse_config(_config(top={"description": "costs $5 on $NB_UNSET"},
                                  stage={"description": "see $NB_UNSET"}), "c.json")
    assert config.resolved["description"] == "costs $5 on $NB_UNSET"


def _with_fusion(section: dict, model_stages: bool = True) -> dict:
    raw = _config()
    raw["stages"] = [*(raw["stages"] if model_stages else []), {"name": "fusion", "kind": "fusion", **section}]
    return raw


@pytest.mark.parametrize("section,message", [
    ({"variants": {"u": {"sources": ["fake/v", "fake/w"], "method": "consensus"}}},
     "fusion.variants.u.sources: 'fake/w' matches no source"),                    # a typo'd variant name
    ({"variants": {"u": {"sources": ["fkae/*"], "method": "consensus"}}},
     "fusion.variants.u.sources: 'fkae/*' matches no source"),                    # a typo'd stage in a glob
    ({"variants": {"u": {"sources": ["*"], "method": "paragraphs", "params": {"granularity": ["fake/w"]}}}},
     "fusion.variants.u.params.granularity: 'fake/w' matches no source"),
    ({"line_source": "fake/w"}, "fusion.line_source: 'fake/w' matches no source"),  # fused without line evidence
    ({"exclude_from_variants": ["fake/w"]}, "fusion.exclude_from_variants: 'fake/w' matches no source"),
])
def test_a_fusion_source_no_stage_of_the_config_makes_is_refused(section, message):
    """Such a variant was skipped at every fusion (exit 0, a pinned recommended variant silently
    replaced, one entry in summary.json and no log line); the run went on with the default."""
    with pytest.raises(ConfigError) as exc:
        parse_config(_with_fusion(section), "c.json")
    assert str(exc.value).startswith("c.json: stage 'fusion': " + message)
    assert "(this config makes: fake/v)" in str(exc.value)


@pytest.mark.parametrize("options,message", [
    ({"lines_source": "fake/w"}, "transcription.lines_source: 'fake/w' matches no source"),  # read whole regions
    ({"block_text_sources": ["fake/v", "fake/w"]}, "transcription.block_text_sources: 'fake/w' matches no source"),
])
def test_a_transcription_source_no_stage_of_the_config_makes_is_refused(options, message):
    raw = _config()
    raw["stages"].append({"name": "tr", "kind": "transcription", **options})
    with pytest.raises(ConfigError) as exc:
        parse_config(raw, "c.json")
    assert str(exc.value) == f"c.json: stage 'tr': {message}; did you mean 'fake/v'? (this config makes: fake/v)"


@pytest.mark.parametrize("section,model_stages", [
    ({}, True),                                 # the shipped operator variants (Dell, MinerU...) are defaults
    ({"variants": {"u": {"sources": ["other/*"], "method": "consensus"}}}, False),  # re-fusing an earlier run
    ({"variants": {"u": {"sources": ["fake/*"], "method": "paragraphs", "params": {"granularity": "auto"}}},
      "line_source": "fake/v"}, True),
])
def test_fusion_sources_a_config_cannot_check_are_kept(section, model_stages):
    parse_config(_with_fusion(section, model_stages), "c.json")


def test_the_well_formed_entries_are_kept():
    config = parse_config(_config(top={"vars": {"BASE": "/b", "N": 2}, "allow_cpu_fallback": False},
                                  stage={"timeout_s": 10, "page_timeout_s": 0.5, "max_restarts": 0},
                                  env={"python": "$BASE/bin/python", "env": {"K": 1}}))
    (stage,) = config.stages
    assert (stage.timeout_s, stage.page_timeout_s, stage.max_restarts, stage.allow_cpu_fallback) == (10, 0.5, 0, False)
    assert stage.env.python == "/b/bin/python" and dict(stage.env.env) == {"K": "1"}


def _paths(config) -> dict:
    """Every path-valued entry of a loaded config: interpreters, model paths, transcription's."""
    dell, transcription = config.stage("dell"), config.stage("transcription").options
    return {"runners_dir": str(config.runners_dir), "python": dell.env.python,
            **{v: p["model_path"] for v, p in dell.variants.items()},
            "t_python": transcription["python"], "t_model": transcription["recognizer"]["model_path"]}


def test_relative_paths_resolve_against_the_config_folder(tmp_path, monkeypatch):
    """`--config ../proj/pipeline.json` from another folder: a path still relative after `$VAR`
    and `~` expansion is the config's neighbour; absolute, `~` and `$VAR` paths, a bare command
    name and "" (the default) keep their meaning, in the config and in its resolved copy."""
    from newsbag.resources import runners_dir

    proj, elsewhere, home = tmp_path / "proj", tmp_path / "elsewhere", tmp_path / "home"
    proj.mkdir()
    elsewhere.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("WEIGHTS", "/w")
    raw = {"vars": {"MODELS": "models"}, "runners_dir": str(runners_dir()),
           "envs": {"e": {"python": "envs/e/bin/python"}},
           "stages": [{"name": "dell", "env": "e", "variants": {
                          "rel": {"model_path": "$MODELS/dell.onnx"}, "abs": {"model_path": "$WEIGHTS/dell.onnx"},
                          "home": {"model_path": "~/dell.onnx"}, "default": {}}},
                      {"name": "transcription", "kind": "transcription", "python": "python3",
                       "recognizer": {"model_path": "rec.onnx"}}]}
    (proj / "pipeline.json").write_text(json.dumps(raw))
    monkeypatch.chdir(elsewhere)
    config = load_config("../proj/pipeline.json")
    expected = {"runners_dir": str(runners_dir()), "python": str(proj / "envs/e/bin/python"),
                "rel": str(proj / "models/dell.onnx"), "abs": "/w/dell.onnx", "home": str(home / "dell.onnx"),
                "default": "", "t_python": "python3", "t_model": str(proj / "rec.onnx")}
    assert _paths(config) == expected
    # the run dir's config.resolved.json (`newsbag fuse --run-dir`, Slurm jobs) means the same paths
    run = tmp_path / "run"
    run.mkdir()
    (run / "config.resolved.json").write_text(json.dumps(to_jsonable(config.resolved)))
    assert _paths(load_config(run / "config.resolved.json")) == expected
    # a config with no file (a dict) has no folder: its relative paths stay as written
    assert parse_config(raw).stage("dell").variants["rel"]["model_path"] == "models/dell.onnx"


_REVIEW = {"name": "boards", "kind": "review", "top_n": 3, "default": False}
_FUSION = {"name": "fusion", "kind": "fusion", "line_source": None}


@pytest.mark.parametrize("recorded,ran,expected_stages", [
    # the run's review entry: the options it ran with, under the recorded name, place and default
    ([_FUSION, _REVIEW], {"name": "review", "kind": "review", "top_n": 5},
     [_FUSION, {"name": "boards", "kind": "review", "default": False, "top_n": 5}]),
    # a config without a review stage ran review with the defaults
    ([_FUSION, _REVIEW], None, [_FUSION, {"name": "boards", "kind": "review", "default": False}]),
    # a run whose config had no review stage gets one, last
    ([_FUSION], {"name": "review", "kind": "review", "top_n": 5},
     [_FUSION, {"name": "review", "kind": "review", "top_n": 5}]),
])
def test_a_builtin_command_records_only_its_own_stage(recorded, ran, expected_stages):
    from newsbag.config import record_builtin_run

    config = parse_config({**_config(), "stages": [*_config()["stages"], *([ran] if ran else [])]})
    before = {**_config(), "stages": [_config()["stages"][0], *recorded]}
    after = record_builtin_run(before, config, "review")
    assert after == {**before, "stages": [_config()["stages"][0], *expected_stages]}
    assert parse_config(after).builtin("review").options == {k: v for k, v in (ran or {}).items()
                                                               if k not in ("name", "kind")}


def test_a_builtin_command_on_a_run_with_no_record_records_its_config_whole():
    from newsbag.config import record_builtin_run, to_jsonable

    config = parse_config({**_config(), "stages": [*_config()["stages"], _REVIEW]})
    assert record_builtin_run(None, config, "review") == to_jsonable(config.resolved)


def test_a_symlinked_config_resolves_against_the_folder_of_the_file_it_names(tmp_path):
    """A config reached through a link (a file link into a run folder, or a linked folder such
    as ~/scratch -> /scratch/u) means the files beside the real config, always spelled the same:
    the paths are fingerprinted into every source page, so another spelling would redo them all."""
    from newsbag.resources import runners_dir

    proj, mine = tmp_path / "proj", tmp_path / "mine"
    proj.mkdir()
    mine.mkdir()
    raw = {"runners_dir": str(runners_dir()), "envs": {"e": {"python": "envs/e/bin/python"}},
           "stages": [{"name": "dell", "env": "e", "variants": {"rel": {"model_path": "models/dell.onnx"}}}]}
    (proj / "pipeline.json").write_text(json.dumps(raw))
    (mine / "pipeline.json").symlink_to(proj / "pipeline.json")
    (tmp_path / "via").symlink_to(proj, target_is_directory=True)
    real = proj.resolve()
    for path in (proj / "pipeline.json", mine / "pipeline.json", tmp_path / "via" / "pipeline.json"):
        config = load_config(path)
        assert (config.stage("dell").env.python, config.stage("dell").variants["rel"]["model_path"]) == (
            str(real / "envs/e/bin/python"), str(real / "models/dell.onnx")), path


@pytest.mark.parametrize("raw,message", [
    (_config(top={"version": 2}), "version 2 is not one this newsbag reads (it reads version 1)"),  # a newer config
    (_config(top={"version": "1"}), "version '1' is not one this newsbag reads"),                   # quoted
    (_config(stage={"timeout_s": float("inf")}), "stage 'fake': timeout_s must be a number > 0 (s), got inf"),  # Infinity
    (_config(stage={"page_timeout_s": float("inf")}), "stage 'fake': page_timeout_s must be a number > 0 (s), got inf"),
])
def test_an_unknown_version_or_an_endless_limit_is_refused_in_one_line(raw, message):
    """`version` was read by nothing (a config written for another newsbag ran as this one's), and
    JSON's Infinity passed as a timeout: a hung page then holds its job to the Slurm time limit."""
    with pytest.raises(ConfigError) as exc:
        parse_config(raw, "c.json")
    assert str(exc.value).startswith("c.json: ") and message in str(exc.value)
    assert "\n" not in str(exc.value)


def test_a_config_without_a_version_is_read_as_the_current_one():
    assert parse_config(_config(), "c.json").stages[0].name == "fake"
    assert parse_config(_config(top={"version": 1}), "c.json").stages[0].name == "fake"


@pytest.mark.parametrize("export,fusion,message", [
    ({"variants": ["U", "P4x"]}, {"variants": {"U": {"sources": ["fake/v"], "method": "consensus"}}},
     "export.variants: 'P4x' is no fused variant (this config fuses: U)"),          # a typo: nothing exported
    ({"variants": ["U"]}, {"variants": {"U": {"sources": ["fake/v"], "method": "consensus"}}}, None),
    ({"variants": ["all"]}, {"variants": {"U": {"sources": ["fake/v"], "method": "consensus"}}}, None),
    ({"variants": ["Q"]}, None, None),                 # no fusion stage here: the run's earlier one made the variants
])
def test_an_export_variant_the_configs_fusion_does_not_make_is_refused(export, fusion, message):
    """Export skipped a typo'd variant with a warning and exit 0, found only by the missing files."""
    raw = _config()
    if fusion is not None:
        raw["stages"].append({"name": "fusion", "kind": "fusion", **fusion})
    raw["stages"].append({"name": "export", "kind": "export", **export})
    if message is None:
        parse_config(raw, "c.json")
        return
    with pytest.raises(ConfigError) as exc:
        parse_config(raw, "c.json")
    assert str(exc.value) == f"c.json: stage 'export': {message}"


# --- what a hand-written or damaged config file holds -------------------------------------------

_NOT_UTF8 = '{"stages": [],\n "vars": {"X": "\xff"}}'
_VALID = '{"runners_dir": %s, "envs": {"e": {"python": ""}},\n "stages": [{"name": "fake", "env": "e", "variants": %s}]}'


@pytest.mark.parametrize("text,message", [
    # the last "v" won without a word: the variant the user read first never ran
    (_VALID % (json.dumps(str(FAKE_RUNNERS)), '{"v": {}, "w": {}, "v": {"mode": "slow"}}'),
     "key 'v' is given twice in stages[0].variants (JSON keeps only the last)"),
    ('{"version": 1, "stages": [], "version": 1}', "key 'version' is given twice in the top-level object "
                                                   "(JSON keeps only the last)"),
    ('{"a": [{"b": {"c": 1, "c": 2}}]}', "key 'c' is given twice in a[0].b (JSON keeps only the last)"),
    ("[" * 100_000 + "]" * 100_000, "invalid JSON (nested too deep)"),              # RecursionError, exit 1
    ('{"a":' * 100_000 + "1" + "}" * 100_000, "invalid JSON (nested too deep)"),
    # parsed, but $VAR expansion and the record's writer recursed past Python's limit: a traceback
    ('{"a":' * 500 + "1" + "}" * 500, f"invalid JSON (nested too deep: over {MAX_DEPTH} levels)"),
    (_NOT_UTF8, f"invalid JSON at line 2 column {_NOT_UTF8.splitlines()[1].index(chr(0xff)) + 1}: "
                "not UTF-8 text (byte 0xff)"),                                   # a Latin-1 editor's save
])
def test_a_config_file_json_cannot_say_plainly_is_one_config_error(tmp_path, text, message):
    path = tmp_path / "c.json"
    path.write_bytes(text.encode("latin-1") if "\xff" in text else text.encode())
    with pytest.raises(ConfigError) as exc:
        load_config(path)
    assert str(exc.value) == f"config {path}: {message}"


def test_a_bad_config_file_is_exit_2_in_one_line_on_every_command(tmp_path, capsys):
    from nbtest import run_cli, write_image

    write_image(tmp_path / "in" / "p.png")
    bad = tmp_path / "c.json"
    bad.write_text("[" * 100_000 + "]" * 100_000)
    code, out, err = run_cli(capsys, "run", tmp_path / "in", "--run-dir", tmp_path / "run", "--config", bad)
    assert (code, out, err) == (2, "", f"newsbag: error: config {bad}: invalid JSON (nested too deep)\n")
    assert run_cli(capsys, "pages", tmp_path / "in", "--run-dir", tmp_path / "run")[0] == 0
    record = tmp_path / "run" / "config.resolved.json"
    record.write_bytes(b'{"stages": [],\n"x": "\xff"}')   # the run's own record, damaged
    column = len(b'"x": "') + 1
    code, out, err = run_cli(capsys, "status", "--run-dir", tmp_path / "run")
    assert (code, out, err) == (
        2, "", f"newsbag: error: config {record}: invalid JSON at line 2 column {column}: not UTF-8 text (byte 0xff)\n")


@pytest.mark.parametrize("second,clash", [
    ({}, None),                                      # both make the default recipes: the first of them
    ({"variants": {"U": {"sources": ["fake/v"], "method": "consensus"}}}, "U"),
])
def test_two_fusion_stages_that_make_one_variant_are_refused(second, clash):
    """Each rewrote the other's variant: fusion was redone on every rerun and status called it stale for ever."""
    from newsbag.builtin import fused_variant_names

    raw = _config()
    first = {"variants": {"U": {"sources": ["fake/v"], "method": "best_single"}}} if clash == "U" else {}
    clash = clash or fused_variant_names({})[0]
    raw["stages"] += [{"name": "fusion", "kind": "fusion", **first}, {"name": "fusion2", "kind": "fusion", **second}]
    with pytest.raises(ConfigError) as exc:
        parse_config(raw, "c.json")
    assert str(exc.value) == (f"c.json: stages 'fusion' and 'fusion2' both make fused variant {clash!r} "
                              f"(outputs/fusion/{clash}); give one of them other variant names")


def test_two_fusion_stages_that_make_other_variants_are_kept():
    raw = _config()
    raw["stages"] += [{"name": "fusion", "kind": "fusion",
                       "variants": {"U": {"sources": ["fake/v"], "method": "best_single"}}},
                      {"name": "fusion2", "kind": "fusion",
                       "variants": {"W": {"sources": ["fake/v"], "method": "consensus"}}}]
    assert parse_config(raw, "c.json").stage_names == ("fake", "fusion", "fusion2")
