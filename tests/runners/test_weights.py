"""runners/_weights.stage_to_local: concurrent jobs on one node share one finished copy and never break it."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

RUNNERS = Path(__file__).resolve().parents[2] / "runners"
sys.path.insert(0, str(RUNNERS))

import _weights  # noqa: E402


@pytest.fixture
def weights(tmp_path):
    src = tmp_path / "model"
    src.mkdir()
    for i in range(20):
        (src / f"shard{i}.bin").write_bytes(os.urandom(200_000))
    return src


def _stage_in_processes(src: Path, root: Path, n: int) -> list[str]:
    """Stage from n processes at once; each then re-reads every file it was handed."""
    code = textwrap.dedent(f"""
        import sys; sys.path.insert(0, {str(RUNNERS)!r})
        import _weights, pathlib
        dest = _weights.stage_to_local(pathlib.Path({str(src)!r}), pathlib.Path({str(root)!r}))
        total = sum(len(p.read_bytes()) for p in sorted(dest.iterdir()))
        print(dest, total)
    """)
    procs = [subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for _ in range(n)]
    outs = []
    for p in procs:
        out, err = p.communicate(timeout=120)
        assert p.returncode == 0, err
        outs.append(out.strip())
    return outs


def test_concurrent_jobs_share_one_complete_copy(tmp_path, weights):
    root = tmp_path / "node"
    outs = _stage_in_processes(weights, root, 4)
    assert len({o.split()[0] for o in outs}) == 1                     # one copy, the same for all
    assert {o.split()[1] for o in outs} == {str(20 * 200_000)}         # complete for every reader
    staged = root / "newsbag-weights"
    assert [p.name for p in staged.iterdir() if not p.name.startswith(".")] == [outs[0].split()[0].split("/")[-2]]
    assert not [p for p in staged.iterdir() if ".tmp-" in p.name]    # no half copies left behind


def test_a_finished_copy_is_never_deleted_or_rewritten(tmp_path, weights):
    root = tmp_path / "node"
    dest = _weights.stage_to_local(weights, root)
    inode = {p.name: p.stat().st_ino for p in dest.iterdir()}
    # A second job with the copy in use: it reuses it, without touching a file.
    with open(dest / "shard0.bin", "rb"):
        again = _weights.stage_to_local(weights, root)
    assert again == dest and {p.name: p.stat().st_ino for p in dest.iterdir()} == inode


def test_marker_is_part_of_the_copy_that_appears(tmp_path, weights, monkeypatch):
    """A job killed after the copy but before any marker leaves nothing a later job would trust or delete."""
    root = tmp_path / "node"
    real_replace = os.replace
    seen = {}

    def spy(a, b):
        seen["marker_before_visible"] = (Path(a) / _weights.STAGED_MARKER).is_file() if Path(a).is_dir() else \
            (Path(a).parent / _weights.STAGED_MARKER).is_file()
        return real_replace(a, b)

    monkeypatch.setattr(os, "replace", spy)
    monkeypatch.setattr(os, "rename", spy)
    _weights.stage_to_local(weights, root)
    assert seen == {"marker_before_visible": True}


def test_stage_root_prefers_a_node_persistent_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("SLURM_TMPDIR", str(tmp_path / "job"))
    monkeypatch.delenv("NEWSBAG_STAGE_DIR", raising=False)
    assert _weights.local_stage_root() == tmp_path / "job"
    monkeypatch.setenv("NEWSBAG_STAGE_DIR", str(tmp_path / "node"))
    assert _weights.local_stage_root() == tmp_path / "node"
