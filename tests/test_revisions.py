"""The guard of `newsbag.revisions`: a builtin stage's code changes only together with its revision.

tests/data/stage_revisions.json stores, per revision entry, the number and a hash of its code
files. When the code's hash changed and the number did not, the test fails naming the entry:
bump it (the change makes other outputs: finished runs redo them), or, when the output cannot
change (a comment, a speed-up the pinned outputs confirm), record the new hash:

    python tests/test_revisions.py --record
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

import pytest

from newsbag import revisions

SRC = Path(revisions.__file__).parent
STORED = Path(__file__).parent / "data" / "stage_revisions.json"
RECORD = "python tests/test_revisions.py --record"


def _code_hash(files: tuple[str, ...]) -> str:
    digest = hashlib.sha256()
    for name in sorted(files):
        digest.update(name.encode() + b"\0" + (SRC / name).read_bytes() + b"\0")
    return digest.hexdigest()[:16]


def _now() -> dict[str, dict]:
    return {key: {"revision": r.number, "code": _code_hash(r.code)} for key, r in sorted(revisions.REVISIONS.items())}


def _problem(key: str, stored: dict | None, now: dict) -> str | None:
    """What is wrong with entry `key` whose code and revision are `now` against the `stored` record; None: nothing."""
    if stored is None:
        return f"{key}: no stored code hash; run {RECORD}"
    if now["revision"] < stored["revision"]:
        return f"{key}: its revision went back from {stored['revision']} to {now['revision']}; revisions only grow"
    if now["revision"] != stored["revision"]:
        return f"{key}: revision {now['revision']} is new; run {RECORD} to record the code hash it stands for"
    if now["code"] != stored["code"]:
        return (f"the code of {key} ({', '.join(revisions.REVISIONS[key].code)}) changed: bump {key} revision in "
                f"src/newsbag/revisions.py, or if the output cannot change, run {RECORD} to record the new hash")
    return None


@pytest.mark.parametrize("key", sorted(revisions.REVISIONS))
def test_a_stage_whose_code_changed_has_a_new_revision(key):
    problem = _problem(key, json.loads(STORED.read_text()).get(key), _now()[key])
    assert problem is None, problem


def test_the_guard_names_the_entry_to_bump_and_the_command_to_record():
    """One edit to the consensus code, with and without its revision bumped."""
    stored = {"revision": 3, "code": "a"}
    assert _problem("fusion/consensus", stored, {"revision": 3, "code": "a"}) is None
    assert _problem("fusion/consensus", stored, {"revision": 3, "code": "b"}).startswith(
        "the code of fusion/consensus (fusion/fuse.py, fusion/order.py, articles.py) changed: bump fusion/consensus "
        "revision in src/newsbag/revisions.py, or if the output cannot change, run python tests/test_revisions.py "
        "--record")
    assert "record the code hash" in _problem("fusion/consensus", stored, {"revision": 4, "code": "b"})
    assert "went back" in _problem("fusion/consensus", stored, {"revision": 2, "code": "a"})


def test_every_code_file_named_exists():
    missing = [f for r in revisions.REVISIONS.values() for f in r.code if not (SRC / f).is_file()]
    assert missing == []


def test_the_package_version_is_no_part_of_a_fingerprint(monkeypatch):
    """A release alone redoes nothing: only the code revisions move fingerprints."""
    from newsbag import rundir

    before = rundir.fingerprint("x", 1)
    monkeypatch.setattr(rundir, "TOOL", "newsbag 99.0")
    assert rundir.fingerprint("x", 1) == before


if __name__ == "__main__" and sys.argv[1:] == ["--record"]:
    STORED.write_text(json.dumps(_now(), indent=1, sort_keys=True) + "\n")
    print(f"recorded {len(revisions.REVISIONS)} code hashes in {STORED}")
