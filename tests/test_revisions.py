"""The guard of code revisions: a stage's code changes only together with its revision.

tests/data/stage_revisions.json stores, per entry of `newsbag.revisions` and per runner family
(``revision`` in its tool.json), the number and a hash of its code files: an entry's modules and
every package module they import (`revisions.code_files`). When the code's hash changed and the
number did not, the test fails naming the entry: bump it (the change makes other outputs:
finished runs redo them), or, when the output cannot change (a comment, a speed-up the pinned
outputs confirm), record the new hash of that entry alone:

    python tests/test_revisions.py --record KEY [KEY ...]     (--record --all: every entry)
"""

from __future__ import annotations

import ast
import hashlib
import json
import shutil
import sys
from pathlib import Path

import pytest

from newsbag import revisions
from newsbag.codegraph import import_closure
from newsbag.resources import runners_dir

SRC = Path(revisions.__file__).parent
RUNNERS = runners_dir()
STORED = Path(__file__).parent / "data" / "stage_revisions.json"
RECORD = "python tests/test_revisions.py --record"


def _code_hash(files: list[Path], root: Path) -> str:
    digest = hashlib.sha256()
    for path in sorted(files, key=lambda p: p.relative_to(root).as_posix()):
        digest.update(path.relative_to(root).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()[:16]


def _module_files(key: str, src: Path) -> list[Path]:
    """The code files of `revisions` entry `key` in the package tree at `src`."""
    closure = import_closure(revisions.REVISIONS[key].entries, src)
    return [src / m for m in closure if m not in revisions.INFRASTRUCTURE]


def _helper_closure(script: Path, runners: Path) -> list[Path]:
    """The ``_*.py`` helpers beside `script` that it imports, and those they import in turn
    (`_loop` imports `_report`, ...): a family's code is all of them."""
    seen: dict[str, Path] = {}
    todo = [script]
    while todo:
        tree = ast.parse(todo.pop().read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module] if isinstance(node, ast.ImportFrom) and node.module and not node.level
                     else [])
            for name in names:
                path = runners / f"{name}.py"
                if name.startswith("_") and name not in seen and path.is_file():
                    seen[name] = path
                    todo.append(path)
    return sorted(seen.values())


def _entries(src: Path = SRC, runners: Path = RUNNERS) -> dict[str, tuple[int, list[Path], Path, str]]:
    """key -> (revision now, its code files, the folder they are named from, where the revision is):
    every `revisions` entry, and each runner family (its script and the ``_*.py`` helpers it
    imports, directly or through other helpers; ``revision`` in its tool.json)."""
    out = {key: (r.number, _module_files(key, src), src, "src/newsbag/revisions.py")
           for key, r in revisions.REVISIONS.items()}
    for spec in sorted(runners.glob("*.tool.json")):
        family = spec.name[:-len(".tool.json")]
        script = runners / f"{family}.py"
        out[f"runner/{family}"] = (json.loads(spec.read_text()).get("revision", 0),
                                   [script, *_helper_closure(script, runners)], runners.parent,
                                   f"runners/{spec.name}")
    return out


def _now(src: Path = SRC, runners: Path = RUNNERS) -> dict[str, dict]:
    return {key: {"revision": number, "code": _code_hash(code, root)}
            for key, (number, code, root, _) in sorted(_entries(src, runners).items())}


def _problem(key: str, stored: dict | None, now: dict) -> str | None:
    """What is wrong with entry `key` whose code and revision are `now` against the `stored` record; None: nothing."""
    if stored is None:
        return f"{key}: no stored code hash; run {RECORD}"
    if now["revision"] < stored["revision"]:
        return f"{key}: its revision went back from {stored['revision']} to {now['revision']}; revisions only grow"
    if now["revision"] != stored["revision"]:
        return f"{key}: revision {now['revision']} is new; run {RECORD} to record the code hash it stands for"
    if now["code"] != stored["code"]:
        _, code, root, where = _entries()[key]
        files = ", ".join(p.relative_to(root).as_posix() for p in code)
        return (f"the code of {key} ({files}) changed: bump {key} revision in {where}, or if the output cannot "
                f"change, run {RECORD} {key} to record the new hash")
    return None


@pytest.mark.parametrize("key", sorted(_entries()))
def test_a_stage_whose_code_changed_has_a_new_revision(key):
    problem = _problem(key, json.loads(STORED.read_text()).get(key), _now()[key])
    assert problem is None, problem


def test_the_guard_names_the_entry_to_bump_and_the_command_to_record():
    """One edit to the consensus code, with and without its revision bumped."""
    stored = {"revision": 3, "code": "a"}
    assert _problem("fusion/consensus", stored, {"revision": 3, "code": "a"}) is None
    problem = _problem("fusion/consensus", stored, {"revision": 3, "code": "b"})
    assert problem.startswith("the code of fusion/consensus (articles.py, contract.py, fusion/fuse.py, ")
    assert problem.endswith(") changed: bump fusion/consensus revision in src/newsbag/revisions.py, or if the "
                            "output cannot change, run python tests/test_revisions.py --record fusion/consensus "
                            "to record the new hash")
    assert "record the code hash" in _problem("fusion/consensus", stored, {"revision": 4, "code": "b"})
    assert "went back" in _problem("fusion/consensus", stored, {"revision": 2, "code": "a"})


def test_every_code_file_named_exists():
    missing = [p for _, code, _, _ in _entries().values() for p in code if not p.is_file()]
    assert missing == []


# Appending a function to a module changes the code of exactly the entries that import it.
@pytest.mark.parametrize("module, changed", [
    ("fusion/degenerate.py", {"fusion"}),
    ("export/layout.py", {"review", "export/page-xml", "export/alto", "export/coco"}),
    ("contract.py", set(revisions.REVISIONS)),
    ("io.py", set()),   # infrastructure: where bytes go, never what they say
])
def test_a_module_changes_the_code_of_the_entries_that_import_it(tmp_path, module, changed):
    src = tmp_path / "newsbag"
    shutil.copytree(SRC, src, ignore=shutil.ignore_patterns("__pycache__"))
    with open(src / module, "a", encoding="utf-8") as f:
        f.write("\n\ndef appended_by_the_test():\n    return None\n")
    before, after = _now(SRC), _now(src)
    assert {key for key in after if after[key]["code"] != before[key]["code"]} == changed


def test_a_runner_family_s_code_is_every_helper_it_reaches(tmp_path):
    """Helpers imported through other helpers count: an edit to one reached only that way moves
    the family's hash; a helper it never reaches does not."""
    runners = tmp_path / "runners"
    runners.mkdir()
    (runners / "fam.tool.json").write_text('{"revision": 1}')
    (runners / "fam.py").write_text("import sys\nimport _a\n")
    (runners / "_a.py").write_text("def f():\n    from _b import x\n    return x\n")
    (runners / "_b.py").write_text("import _a, os\nx = 1\n")
    (runners / "_c.py").write_text("y = 2\n")
    _, code, root, _ = _entries(SRC, runners)["runner/fam"]
    assert [p.relative_to(root).as_posix() for p in code] == ["runners/fam.py", "runners/_a.py", "runners/_b.py"]
    before = _now(SRC, runners)["runner/fam"]["code"]
    (runners / "_c.py").write_text("y = 3\n")
    assert _now(SRC, runners)["runner/fam"]["code"] == before
    (runners / "_b.py").write_text("import _a, os\nx = 2\n")
    assert _now(SRC, runners)["runner/fam"]["code"] != before


def test_a_helper_reached_only_through_the_loop_changes_every_runner_family(tmp_path):
    """`_report.py` (the run report) is imported by `_loop.py` alone: an edit to it is an edit to
    every family that runs through the loop, which is all of them."""
    direct = [s.name for s in RUNNERS.glob("*.py") if not s.name.startswith("_")
              and any(isinstance(n, (ast.Import, ast.ImportFrom)) and "_report" in
                      ([a.name for a in n.names] if isinstance(n, ast.Import) else [n.module])
                      for n in ast.walk(ast.parse(s.read_text(encoding="utf-8"))))]
    assert direct == []
    runners = tmp_path / "runners"
    shutil.copytree(RUNNERS, runners, ignore=shutil.ignore_patterns("__pycache__"))
    with open(runners / "_report.py", "a", encoding="utf-8") as f:
        f.write("\n\ndef appended_by_the_test():\n    return None\n")
    before, after = _now(SRC, RUNNERS), _now(SRC, runners)
    changed = {key for key in after if after[key]["code"] != before[key]["code"]}
    assert changed == {f"runner/{spec.name[:-len('.tool.json')]}" for spec in RUNNERS.glob("*.tool.json")}


def test_infrastructure_names_modules_an_entry_imports():
    """No stale name in the list, and no content module hidden in it."""
    imported = set(import_closure(tuple(e for r in revisions.REVISIONS.values() for e in r.entries)))
    assert sorted(set(revisions.INFRASTRUCTURE) - imported - {"codegraph.py"}) == []
    named = {e for r in revisions.REVISIONS.values() for e in r.entries}
    content = [m for m in revisions.INFRASTRUCTURE
               if m in named or m.split("/")[0] in ("fusion", "review", "export")]
    assert content == []


def test_the_package_version_is_no_part_of_a_fingerprint(monkeypatch):
    """A release alone redoes nothing: only the code revisions move fingerprints."""
    import newsbag
    from newsbag import freshness

    before = freshness.fingerprint("x", 1)
    monkeypatch.setattr(newsbag, "__version__", "99.0")
    assert freshness.fingerprint("x", 1) == before


def _record(keys: list[str]) -> None:
    """Store the code hash and revision of `keys` (["--all"]: every entry) and keep the others."""
    now = _now()
    keys = sorted(now) if keys == ["--all"] else keys
    unknown = [k for k in keys if k not in now]
    if not keys or unknown:
        sys.exit(f"usage: {RECORD} KEY [KEY ...] | --all; "
                 f"{'unknown ' + ', '.join(unknown) + '; ' if unknown else ''}keys: {', '.join(sorted(now))}")
    stored = json.loads(STORED.read_text()) if STORED.is_file() else {}
    stored = {k: v for k, v in stored.items() if k in now} | {k: now[k] for k in keys}
    STORED.write_text(json.dumps(stored, indent=1, sort_keys=True) + "\n")
    print(f"recorded {len(keys)} code hash(es) in {STORED}: {', '.join(keys)}")


if __name__ == "__main__" and sys.argv[1:2] == ["--record"]:
    _record(sys.argv[2:])
