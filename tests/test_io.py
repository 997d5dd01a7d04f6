import json

import pytest

from newsbag.io import dumps_compact, dumps_strict


@pytest.mark.parametrize("obj", [
    {"a": [1, 2.5, None], "b": {"c": "é"}},          # string keys: orjson's fast path
    {1: "x", "y": {2.5: [float("nan")]}},              # other keys: written as strings, as the stdlib does
    {"big": 2 ** 70},                                  # past 64 bits: the stdlib
])
def test_dumps_compact_is_the_strict_json_without_spaces(obj):
    assert json.loads(dumps_compact(obj)) == json.loads(dumps_strict(obj, separators=(",", ":")))


def test_atomic_write_takes_the_next_temp_name_when_one_is_taken_and_leaves_it(tmp_path, monkeypatch):
    import itertools
    import os

    from newsbag import io as nb_io, liveness

    monkeypatch.setattr(nb_io, "_TMP_SEQ", itertools.count(7))
    target = tmp_path / "deep" / "page.json"        # the folder is made on demand
    squatter = tmp_path / "deep" / f".page.json.{liveness.HOST}-{os.getpid()}-8.tmp"   # another job's (a reused pid)
    nb_io.atomic_write_bytes(target, b"one")         # takes -7
    squatter.write_bytes(b"theirs")
    nb_io.atomic_write_bytes(target, b"two")         # -8 is taken: -9
    assert target.read_bytes() == b"two" and squatter.read_bytes() == b"theirs"
    assert sorted(p.name for p in target.parent.iterdir()) == sorted([target.name, squatter.name])
    with nb_io.atomic_text_file(tmp_path / "other" / "table.tsv") as fh:
        fh.write("a\tb\n")
    assert (tmp_path / "other" / "table.tsv").read_text() == "a\tb\n"


def test_keep_same_leaves_a_file_that_holds_the_content_and_replaces_one_that_does_not(tmp_path):
    from newsbag.io import atomic_text_file, atomic_write_text

    def streamed(path, text, **kw):
        with atomic_text_file(path, **kw) as fh:
            fh.write(text)

    for n, write in enumerate((atomic_write_text, streamed)):
        path = tmp_path / f"t{n}.tsv"
        write(path, "a\tb\n")
        stamp = (path.stat().st_mtime_ns, path.stat().st_ino)
        write(path, "a\tb\n", keep_same=True)
        assert (path.stat().st_mtime_ns, path.stat().st_ino) == stamp
        write(path, "a\tc\n", keep_same=True)
        assert path.read_text() == "a\tc\n" and path.stat().st_ino != stamp[1]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["t0.tsv", "t1.tsv"]  # no temp file left


def test_a_pid_taken_by_a_process_that_started_after_the_last_write_is_a_gone_writer(tmp_path):
    """A runner that died long ago, whose pid a later process took, left a report saying
    running and temp files: its pid answers, but the process holding it started after the
    dead runner's last write, so it is another process (status said 'running' forever and
    the sweep kept the temp files)."""
    import os
    import subprocess
    import sys
    import time

    from newsbag import io as nb_io, liveness

    later = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        now = time.time()
        assert not liveness.writer_gone(liveness.HOST, later.pid, now, now)          # wrote after it started
        assert liveness.writer_gone(liveness.HOST, later.pid, now - 3600, now)       # last wrote an hour before it started
        temp = tmp_path / f".p1.json.{liveness.HOST}-{later.pid}-3.tmp"
        temp.write_bytes(b"half")
        assert not nb_io._temp_writer_gone(temp.name, str(tmp_path), now)
        os.utime(temp, (now - 3600, now - 3600))
        assert nb_io._temp_writer_gone(temp.name, str(tmp_path), now)
        nb_io.remove_dead_temps(tmp_path)
        assert not temp.exists()
    finally:
        later.kill()
        later.wait()


@pytest.mark.parametrize("compact", [True, False])
def test_volatile_keys_alone_do_not_rewrite_a_file(tmp_path, compact):
    """A page computed again with only its `seconds` changed keeps its file (mtime, inode) and
    the seconds it records; any other change is written whole, with the new seconds."""
    from newsbag.io import read_json, write_json

    path = tmp_path / "p.json"
    page = {"page_id": "p", "regions": [{"bbox_xyxy": [0, 0, 5, 5]}], "seconds": 0.25}
    write_json(path, page, compact=compact)
    stamp = (path.stat().st_mtime_ns, path.stat().st_ino)
    write_json(path, {**page, "seconds": 0.5}, compact=compact, volatile=("seconds",))
    assert (path.stat().st_mtime_ns, path.stat().st_ino) == stamp and read_json(path)["seconds"] == 0.25
    changed = {**page, "regions": [{"bbox_xyxy": [0, 0, 6, 5]}], "seconds": 0.5}
    write_json(path, changed, compact=compact, volatile=("seconds",))
    assert read_json(path) == changed and path.stat().st_ino != stamp[1]
    path.write_text("{torn")   # a file that is not JSON is replaced, not a reason to fail
    write_json(path, page, compact=compact, volatile=("seconds",))
    assert read_json(path) == page
