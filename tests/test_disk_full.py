"""A full disk (ENOSPC) anywhere in the run dir: one line, exit 7, a run report if possible,
nothing half-written counted as finished, and the rerun after freeing space completes."""

from __future__ import annotations

import errno
import json
import re
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from newsbag import io as nb_io
from newsbag.errors import RunDirError
from newsbag.manifest import read_pages

from nbtest import FAKE_RUNNERS, run_cli


def fake_config(path: Path) -> Path:
    path.write_text(json.dumps({"version": 1, "runners_dir": str(FAKE_RUNNERS), "stages": [
        {"name": "fake", "family": "fake", "variants": {"v": {}}}, {"name": "fusion", "kind": "fusion"}]}))
    return path


def _strict(text):
    def refuse(token):
        raise ValueError(token)
    return json.loads(text, parse_constant=refuse)


def _assert_complete(run: Path) -> None:
    ids = {p.page_id for p in read_pages(run)}
    assert len(ids) == 5
    for variant in (run / "outputs" / "fusion").iterdir():
        if variant.is_dir() and not variant.name.startswith("_"):
            assert {p.stem for p in variant.glob("*.json")} == ids, variant
    for path in run.rglob("*.json"):
        _strict(path.read_text())  # nothing half-written anywhere
    assert not list(run.rglob("*.tmp"))


def test_atomic_write_names_the_path_and_the_space(tmp_path, monkeypatch):
    def full(fd, data, path):
        raise OSError(errno.ENOSPC, "No space left on device")
    monkeypatch.setattr(nb_io, "_write_file", full)
    target = tmp_path / "out" / "page.json"
    with pytest.raises(RunDirError) as err:
        nb_io.write_json(target, {"regions": list(range(500))})
    msg = str(err.value)
    assert msg.startswith(f"cannot write {target}: No space left on device; the write needs ")
    assert re.search(r"the write needs \d\.\d KB, [\d.]+ [KMGT]?B free there", msg), msg
    assert "free there; free space" in msg and "rerun the same command" in msg and "\n" not in msg
    assert err.value.exit_code == 7
    assert not list(target.parent.glob("*"))  # the temp file is gone, no half page


def test_disk_full_during_fusion_then_rerun(tmp_path, page_dir, capsys, monkeypatch):
    real = nb_io._write_file

    def full_in_fusion(fd, data, path):
        if "/outputs/fusion/" in str(path):
            raise OSError(errno.ENOSPC, "No space left on device")
        real(fd, data, path)

    monkeypatch.setattr(nb_io, "_write_file", full_in_fusion)
    run = tmp_path / "run"
    args = ["run", "--input-dir", page_dir, "--recursive", "--run-dir", run, "--config", fake_config(tmp_path / "c.json")]
    code, _, err = run_cli(capsys, *args)
    assert code == 7
    last = err.strip().splitlines()[-1]
    assert last.startswith(f"newsbag: error: cannot write {run / 'outputs' / 'fusion'}")
    assert "No space left on device" in last and "the write needs" in last
    report = json.loads((run / "reports" / "run_all.json").read_text())
    assert "No space left on device" in report["errors"][0]
    assert report["sources"][0]["counts"]["ok"] == 5  # the runner stage finished and says so
    assert not list(run.rglob("*.tmp"))
    monkeypatch.setattr(nb_io, "_write_file", real)
    code, _, err = run_cli(capsys, *args)
    assert code == 0, err
    _assert_complete(run)


@pytest.fixture
def small_disk(tmp_path):
    """A 160 KB tmpfs (needs root / CAP_SYS_ADMIN): fills up mid-run for real."""
    mnt = tmp_path / f"disk-{uuid.uuid4().hex[:6]}"
    mnt.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=160k", "tmpfs", str(mnt)], capture_output=True).returncode:
        pytest.skip("cannot mount a tmpfs here (not root)")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], capture_output=True)


def test_real_full_disk_then_freed(tmp_path, page_dir, small_disk):
    run = small_disk / "run"
    cmd = [sys.executable, "-m", "newsbag", "run", "--input-dir", str(page_dir), "--recursive", "--run-dir", str(run),
           "--config", str(fake_config(tmp_path / "c.json"))]
    first = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert first.returncode == 7, first.stderr
    assert "Traceback" not in first.stderr
    errors = [line for line in first.stderr.splitlines() if line.startswith("newsbag: error:")]
    assert len(errors) == 1 and f"cannot write {run}" in errors[0] and "No space left on device" in errors[0]
    assert "the write needs" in errors[0] and "free there" in errors[0]
    subprocess.run(["mount", "-o", "remount,size=64m", str(small_disk)], check=True)
    again = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert again.returncode == 0, again.stderr
    _assert_complete(run)
    assert json.loads((run / "reports" / "run_all.json").read_text())["errors"] == []


def test_a_ledger_append_on_a_full_disk_fails_in_one_line_and_leaves_whole_lines(small_disk):
    """os.write on a nearly full disk writes what fits and returns the count: taken as done, the
    ledger kept a torn line (and the next append glued onto it) and most records were lost
    without a word."""
    ledger = small_disk / "logs" / "failures.jsonl"
    nb_io.append_jsonl(ledger, [{"page_id": "p0", "error": "before"}])
    before = ledger.read_bytes()
    (small_disk / "fill").write_bytes(b"\0" * (shutil.disk_usage(small_disk).free - 12_000))  # ~12 KB left
    with pytest.raises(RunDirError, match=f"cannot write {ledger}: No space left on device"):
        nb_io.append_jsonl(ledger, [{"page_id": f"p{i}", "error": "x" * 200} for i in range(1, 400)])
    assert ledger.read_bytes() == before  # no torn line: a later append starts on a line of its own


def test_a_file_size_limit_is_named_as_such_not_as_a_full_disk(tmp_path):
    """Under ``ulimit -f 200`` a write fails with EFBIG while the disk has room: the advice to free
    space sent users to delete files on a disk with gigabytes free."""
    script = ("import resource, sys\n"
              "resource.setrlimit(resource.RLIMIT_FSIZE, (200 * 1024, resource.getrlimit(resource.RLIMIT_FSIZE)[1]))\n"
              "from newsbag import io\n"
              "from newsbag.errors import RunDirError\n"
              "try:\n"
              "    io.atomic_write_bytes(sys.argv[1], bytes(1_300_000))\n"
              "except RunDirError as exc:\n"
              "    print(exc)\n")
    target = tmp_path / "big.json"
    out = subprocess.run([sys.executable, "-c", script, str(target)], capture_output=True, text=True, timeout=60)
    msg = out.stdout.strip()
    assert msg.startswith(f"cannot write {target}: File too large; the write needs 1.3 MB, "), (msg, out.stderr)
    assert "over the file size limit (ulimit -f: 200 KB)" in msg
    assert "free space" not in msg and "free there" not in msg and "raise the limit" in msg
    assert not list(tmp_path.glob(".*.tmp"))


@pytest.fixture
def no_inodes(tmp_path):
    """A tmpfs with room for bytes and 4 inodes (needs root): every new file fails with ENOSPC."""
    mnt = tmp_path / f"inodes-{uuid.uuid4().hex[:6]}"
    mnt.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=16m,nr_inodes=4", "tmpfs", str(mnt)],
                      capture_output=True).returncode:
        pytest.skip("cannot mount a tmpfs here (not root)")
    try:
        for i in range(8):   # take what inodes there are
            try:
                (mnt / f"f{i}").write_bytes(b"x")
            except OSError:
                break
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], capture_output=True)


def test_a_disk_out_of_inodes_is_named_as_such_not_as_short_of_bytes(no_inodes):
    target = no_inodes / "page.json"
    with pytest.raises(RunDirError) as err:
        nb_io.write_json(target, {"regions": []})
    msg = str(err.value)
    assert msg.startswith(f"cannot write {target}: No space left on device; ")
    assert "no free inodes left there" in msg and "remove files" in msg, msg
    assert "free space" not in msg
