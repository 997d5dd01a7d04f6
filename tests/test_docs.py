"""The README and the manual: short, runnable from a clone, reference text rather than project history."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
README = REPO / "README.md"
DOCS = REPO / "docs"
EXAMPLE_PAGE = REPO / "examples" / "port_gibson_reveille_1921-03-03_p1.png"

# A hex word standing alone: not part of a page id (`p1-3fa9c2d1`), a colour (`#1f77b4`) or a path.
_HEX_WORD = re.compile(r"(?<![\w#./-])[0-9a-f]{7,40}(?![\w/-])")
_HISTORY = [
    (re.compile(r"\bsessions?\b", re.IGNORECASE), "names a session"),
    (re.compile(r"\bused to\b", re.IGNORECASE), "says 'used to'"),
    (re.compile(r"(?<![\w.$~])/(?:work|home|root|tmp)/"), "names a path of a developer's machine"),
]


def _commits() -> list[str]:
    """Every commit of this repository (empty outside a git checkout)."""
    try:
        out = subprocess.run(["git", "-C", str(REPO), "rev-list", "--all"], capture_output=True, text=True,
                             check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return []
    return out.split()


def history_mentions(text: str, commits: list[str]) -> list[str]:
    """One finding per line of `text` that reads as project history or a machine's paths."""
    findings = []
    for number, line in enumerate(text.splitlines(), 1):
        for pattern, what in _HISTORY:
            if pattern.search(line):
                findings.append(f"line {number} {what}: {line.strip()}")
        for word in re.findall(r"\b[0-9a-f]{7,40}\b", line):
            if any(c.startswith(word) for c in commits):
                findings.append(f"line {number} names commit {word}: {line.strip()}")
        for word in _HEX_WORD.findall(line):
            if re.search(r"[0-9]", word) and re.search(r"[a-f]", word):
                findings.append(f"line {number} holds what looks like a commit hash {word}: {line.strip()}")
    return sorted(set(findings))


def _reference_texts() -> list[Path]:
    return [README, *sorted(DOCS.rglob("*.md"))]


@pytest.mark.parametrize("text, expected", [
    ("Measured in session 12 on the VM.", "names a session"),
    ("The Sessions table.", "names a session"),
    ("It used to cost 77 s.", "says 'used to'"),
    ("copy it to /work/main/runs first", "names a path of a developer's machine"),
    ("pip download -d /tmp/wheels x", "names a path of a developer's machine"),
    ("since 6ab0638 the page is read once", "looks like a commit hash 6ab0638"),
    ("fresh clone at aa091ab", "looks like a commit hash aa091ab"),
])
def test_history_is_found(text, expected):
    findings = history_mentions(text, commits=[])
    assert len(findings) == 1 and expected in findings[0], findings


@pytest.mark.parametrize("text", [
    "page id `issue1__p1-3fa9c2d1` keeps the folders",   # a page id's hash suffix
    "colours like #1f77b4 and the word decade",          # a colour, a hex-looking word without digits
    "an onnxruntime InferenceSession runs once",         # a class name, not a session of the project
    "set NEWSBAG_STAGE_DIR to /state/partition1/$USER",  # a cluster path, not a developer's machine
    "ids are the first 52 bits of sha256(page id): 1234567",
])
def test_reference_text_passes(text):
    assert history_mentions(text, commits=[]) == []


def test_a_commit_of_this_repository_is_found_by_its_short_hash():
    commits = _commits()
    if not commits:
        pytest.skip("not a git checkout: no commits to compare with")
    short = commits[-1][:7]
    assert history_mentions(f"the first commit {short}", commits) != []


@pytest.mark.parametrize("path", _reference_texts(), ids=lambda p: str(p.relative_to(REPO)))
def test_readme_and_manual_are_reference_text(path):
    findings = history_mentions(path.read_text(encoding="utf-8"), _commits())
    assert findings == [], f"{path.relative_to(REPO)}: " + "; ".join(findings)


def test_readme_is_read_in_five_minutes():
    lines = README.read_text(encoding="utf-8").splitlines()
    assert len(lines) <= 200, f"README.md has {len(lines)} lines; the manual in docs/ takes the rest"


def _readme_commands() -> list[str]:
    return [line for line in README.read_text(encoding="utf-8").splitlines() if line.startswith("python3 -m venv")]


def test_the_readme_first_commands_are_the_quick_start_and_the_tests():
    """.ci/run runs these two lines as the README writes them: the quick start, then the tests."""
    commands = _readme_commands()
    assert len(commands) >= 2, commands
    quick_start, tests = commands[:2]
    assert quick_start.endswith("newsbag run --input-dir examples --run-dir runs/demo"), quick_start
    assert '".[embedded]"' in quick_start
    assert tests == 'python3 -m venv .venv && .venv/bin/pip install -e ".[embedded,test]" && .venv/bin/pytest -q'
    assert "runs/demo/review/index.html" in README.read_text(encoding="utf-8")


def test_ci_runs_the_quick_start_from_the_readme_and_ends_with_its_test_command():
    ci = (REPO / ".ci" / "run").read_text(encoding="utf-8")
    assert "grep -m1 '^python3 -m venv' README.md" in ci          # the quick start, read from the README
    assert "git clone" in ci and "runs/demo/review/index.html" in ci
    assert "mkdocs build --strict" in ci
    last = ci.rstrip().splitlines()[-1]
    tests = _readme_commands()[1].replace("pip install -e", "pip install -q -e")
    assert last.startswith(tests), last                             # CI reads this command's pytest summary


def test_the_quick_start_page_ships_with_its_source_and_licence():
    assert EXAMPLE_PAGE.stat().st_size > 100_000
    notes = (REPO / "examples" / "README.md").read_text(encoding="utf-8")
    assert "Chronicling America" in notes and "public domain" in notes


def test_readme_links_point_at_files_that_exist():
    text = README.read_text(encoding="utf-8")
    targets = {t.split("#")[0] for t in re.findall(r"\]\(([^)\s]+)\)", text) if "://" not in t}
    missing = sorted(t for t in targets if not (REPO / t).exists())
    assert missing == []


def _hooks():
    sys.path.insert(0, str(DOCS))
    try:
        import hooks
    finally:
        sys.path.remove(str(DOCS))
    return hooks


def test_runner_option_tables_are_generated_from_every_tool_json():
    import json

    table = _hooks().render_markers("intro\n<!-- newsbag:runner-options -->\nafter")
    assert table.startswith("intro\n") and table.endswith("\nafter")
    for path in sorted((REPO / "runners").glob("*.tool.json")):
        tool = json.loads(path.read_text(encoding="utf-8"))
        assert f"### `{tool['family']}`" in table
        for name in tool["parameters"]:
            assert f"| `{name}` |" in table, (path.name, name)


def test_a_description_with_a_pipe_keeps_its_row(tmp_path):
    import json

    (tmp_path / "pipe.py").write_text("")
    (tmp_path / "pipe.tool.json").write_text(json.dumps({"labels": {"text": "text"}, "parameters": {
        "mode": {"type": "string", "default": "a|b", "description": "x | y"}}}))
    rows = _hooks().runner_options_markdown(tmp_path).splitlines()
    assert "| `mode` | `\"a\\|b\"` | a string | x \\| y |" in rows


def _declared(*names: str) -> list:
    """The options dataclasses `names` ("module:Class") name."""
    import importlib

    return [getattr(importlib.import_module(m), c) for m, c in (n.split(":") for n in names)]


@pytest.mark.parametrize("marker, declarations", [
    ("config-fields", ("newsbag.config_fields:PipelineFields", "newsbag.config_fields:EnvFields")),
    ("model-stage-fields", ("newsbag.config_fields:ModelStageFields",)),
    ("fusion-section", ("newsbag.fusion.options:FusionSection", "newsbag.fusion.options:VariantFields")),
])
def test_every_level_of_the_config_has_a_table_generated_from_its_declaration(marker, declarations):
    """The manual's tables of the config's own keys were typed by hand and drifted from the loader."""
    from dataclasses import fields

    table = _hooks().render_markers(f"intro\n<!-- newsbag:{marker} -->\nafter")
    assert table.startswith("intro\n") and table.endswith("\nafter")
    for declared in _declared(*declarations):
        for f in fields(declared):
            assert f"| `{f.name}` | " in table and f.metadata["option"].describe() in table, (declared, f.name)


def test_an_unknown_generated_table_is_refused():
    with pytest.raises(ValueError, match="unknown generated table 'nope'"):
        _hooks().render_markers("<!-- newsbag:nope -->")


def test_code_cites_design_sections_that_exist():
    headings = set(re.findall(r"^## (.+)$", (DOCS / "design.md").read_text(encoding="utf-8"), re.MULTILINE))
    cited = set()
    code = [*(REPO / "src").rglob("*.py"), *(REPO / "runners").glob("*.py"), *(REPO / "benchmarks").glob("*.py"),
            *(REPO / "torch").rglob("*.sh")]
    for path in code:
        text = path.read_text(encoding="utf-8")
        assert not re.search(r"DESIGN(\.md)? ?(§|section)", text), \
            f"{path.relative_to(REPO)} cites a design document that is not in the repository"
        cited |= set(re.findall(r"docs/design\.md, ([A-Z][A-Za-z -]*[a-z])", text))
    assert cited and cited <= headings, sorted(cited - headings)


def test_the_manual_asks_for_every_generated_table():
    pages = "\n".join(p.read_text(encoding="utf-8") for p in DOCS.rglob("*.md"))
    for name in _hooks().GENERATORS:
        assert f"<!-- newsbag:{name} -->" in pages, name
