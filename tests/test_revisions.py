"""The guard of code revisions: a stage's code changes only together with its revision.

tests/data/stage_revisions.json stores, per entry of `newsbag.revisions` and per runner family
(``revision`` in its tool.json), the number and a hash of its code files. When the code's hash changed and the number did not, the test fails naming the entry:
bump it (the change makes other outputs: finished runs redo them), or, when the output cannot
change (a comment, a speed-up the pinned outputs confirm), record the new hash:

    python tests/test_revisions.py --record
"""

from __future__ import annotations

import hashlib
import json
import re
import sys
from pathlib import Path

import pytest

from newsbag import revisions
from newsbag.resources import runners_dir

SRC = Path(revisions.__file__).parent
RUNNERS = runners_dir()
STORED = Path(__file__).parent / "data" / "stage_revisions.json"
RECORD = "python tests/test_revisions.py --record"


def _code_hash(files: list[Path]) -> str:
    digest = hashlib.sha256()
    for path in sorted(files, key=lambda p: (p.parent.name, p.name)):
        digest.update(f"{path.parent.name}/{path.name}".encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()[:16]


def _entries() -> dict[str, tuple[int, list[Path], str]]:
    """key -> (revision now, its code files, where the revision is): every `revisions` entry, and
    each runner family (its script and the ``_*.py`` helpers it imports; ``revision`` in its tool.json)."""
    out = {key: (r.number, [SRC / f for f in r.code], "src/newsbag/revisions.py")
           for key, r in revisions.REVISIONS.items()}
    for spec in sorted(RUNNERS.glob("*.tool.json")):
        family = spec.name[:-len(".tool.json")]
        script = RUNNERS / f"{family}.py"
        helpers = set(re.findall(r"^\s*(?:from|import) (_\w+)", script.read_text(), re.M))
        code = [script, *(RUNNERS / f"{h}.py" for h in helpers if (RUNNERS / f"{h}.py").is_file())]
        out[f"runner/{family}"] = (json.loads(spec.read_text()).get("revision", 0), code, f"runners/{spec.name}")
    return out


def _now() -> dict[str, dict]:
    return {key: {"revision": number, "code": _code_hash(code)} for key, (number, code, _) in sorted(_entries().items())}


def _problem(key: str, stored: dict | None, now: dict) -> str | None:
    """What is wrong with entry `key` whose code and revision are `now` against the `stored` record; None: nothing."""
    if stored is None:
        return f"{key}: no stored code hash; run {RECORD}"
    if now["revision"] < stored["revision"]:
        return f"{key}: its revision went back from {stored['revision']} to {now['revision']}; revisions only grow"
    if now["revision"] != stored["revision"]:
        return f"{key}: revision {now['revision']} is new; run {RECORD} to record the code hash it stands for"
    if now["code"] != stored["code"]:
        _, code, where = _entries()[key]
        return (f"the code of {key} ({', '.join(f'{p.parent.name}/{p.name}' for p in code)}) changed: bump "
                f"{key} revision in {where}, or if the output cannot change, run {RECORD} to record the new hash")
    return None


@pytest.mark.parametrize("key", sorted(_entries()))
def test_a_stage_whose_code_changed_has_a_new_revision(key):
    problem = _problem(key, json.loads(STORED.read_text()).get(key), _now()[key])
    assert problem is None, problem


def test_the_guard_names_the_entry_to_bump_and_the_command_to_record():
    """One edit to the consensus code, with and without its revision bumped."""
    stored = {"revision": 3, "code": "a"}
    assert _problem("fusion/consensus", stored, {"revision": 3, "code": "a"}) is None
    assert _problem("fusion/consensus", stored, {"revision": 3, "code": "b"}).startswith(
        "the code of fusion/consensus (fusion/fuse.py, fusion/order.py, fusion/grid.py, fusion/rules.py, fusion/xycut.py, "
        "fusion/segments.py, newsbag/articles.py) changed: bump fusion/consensus "
        "revision in src/newsbag/revisions.py, or if the output cannot change, run python tests/test_revisions.py "
        "--record")
    assert "record the code hash" in _problem("fusion/consensus", stored, {"revision": 4, "code": "b"})
    assert "went back" in _problem("fusion/consensus", stored, {"revision": 2, "code": "a"})


def test_every_code_file_named_exists():
    missing = [p for _, code, _ in _entries().values() for p in code if not p.is_file()]
    assert missing == []


def test_the_package_version_is_no_part_of_a_fingerprint(monkeypatch):
    """A release alone redoes nothing: only the code revisions move fingerprints."""
    import newsbag
    from newsbag import freshness

    before = freshness.fingerprint("x", 1)
    monkeypatch.setattr(newsbag, "__version__", "99.0")
    assert freshness.fingerprint("x", 1) == before


if __name__ == "__main__" and sys.argv[1:] == ["--record"]:
    STORED.write_text(json.dumps(_now(), indent=1, sort_keys=True) + "\n")
    print(f"recorded {len(_now())} code hashes in {STORED}")
