"""A run dir received from someone else (shared scratch, a tarball, a copied Slurm run): what its
files hold may not write outside it, append through a planted link, reach the operator's terminal
as control characters, or turn one page into two."""

import json
import os
import re
from pathlib import Path

import pytest

from nbtest import run_cli, write_fake_config, write_image

STAGES = [{"name": "fusion", "kind": "fusion"}, {"name": "review", "kind": "review"},
          {"name": "export", "kind": "export"}]
# C0 controls and DEL, C1 controls: what retitles or clears a terminal, or starts a forged line
CONTROL = re.compile(r"[\x00-\x1f\x7f\x80-\x9f]")


def _finished(tmp_path: Path, capsys, scans: Path | None = None) -> Path:
    """A run of one small page through every stage, two folders down from `tmp_path` (so that
    ``../`` escapes land inside the test's folder, where they are seen)."""
    if scans is None:
        scans = tmp_path / "scans"
        write_image(scans / "a.png", size=(120, 90))
    config = write_fake_config(tmp_path / "c.json", {"v": {}}, extra_stages=STAGES)
    run = tmp_path / "deep" / "er" / "run"
    code, _, err = run_cli(capsys, "run", scans, "--run-dir", run, "--config", config)
    assert code == 0, err
    return run


def _files_outside(tmp_path: Path, run: Path) -> dict[str, bytes | None]:
    """Everything under `tmp_path` but the run dir, with the content of its files."""
    return {str(p): (p.read_bytes() if p.is_file() else None)
            for p in tmp_path.rglob("*") if p != run and run not in p.parents}


def _append_line(manifest: Path, **change) -> None:
    first = json.loads(manifest.read_text().splitlines()[0])
    with manifest.open("a") as fh:
        fh.write(json.dumps({**first, **change}) + "\n")


# --- a page id is a file name, never a path ---------------------------------------------------


@pytest.mark.parametrize("command", ["run", "fuse", "review", "export", "evaluate"])
def test_a_page_id_that_climbs_out_of_the_run_is_refused_before_anything_is_written(tmp_path, capsys, command):
    """`../../../../pwned` made run, fuse, review and export write .json, .jpg and folders outside
    the run dir, with no model run: any file the user could write."""
    run = _finished(tmp_path, capsys)
    manifest = run / "manifests" / "pages.jsonl"
    _append_line(manifest, page_id="../../../../pwned")
    args = []
    if command == "evaluate":   # ground truth of the page: its layer is written per page id
        gt = tmp_path / "gt" / "annotations"
        gt.mkdir(parents=True)
        (gt / "a.json").write_text(json.dumps({"page_id": "../../../../pwned", "image": "images/b.png",
                                               "width": 120, "height": 90, "regions": []}))
        args = ["--gt", gt.parent]
    before = _files_outside(tmp_path, run)
    code, out, err = run_cli(capsys, command, "--run-dir", run, *args)
    assert (code, out) == (2, "")
    assert err.startswith(f"newsbag: error: {manifest}:2: bad page id '../../../../pwned' ("), err
    assert len(err.splitlines()) == 1
    assert _files_outside(tmp_path, run) == before
    assert not [p for p in tmp_path.rglob("*pwned*")]


@pytest.mark.parametrize("page_id,ok", [
    ("a-69aba0d0", True),           # what `page_id_for` makes
    ("issue1__p1.x-3fa9c2d1", True),
    ("-x-3fa9c2d1", True),          # a scan named "-x.png"
    ("p", True),                    # a short id a hand-made manifest gives
    ("..", False),                  # the parent folder
    (".", False),
    (".hidden", False),             # a hidden file, never listed again
    ("_failed", False),             # the folder of a stage's failure records
    ("a/b", False),                 # two path parts
    ("a\\b", False),
    ("", False),
    ("a\x1bb", False),
    ("x" * 201, False),             # no file system takes the name with its suffixes
    (7, False),                     # not a string
])
def test_the_manifest_reader_takes_only_ids_page_id_for_can_make(tmp_path, page_id, ok):
    from newsbag.errors import InputError
    from newsbag.manifest import manifest_page_ids, read_pages

    from nbtest import write_manifest

    run = tmp_path / "run"
    path = write_manifest(run, [{"page_id": "first", "path": "a.png", "image_path": "a.png", "width": 4,
                                 "height": 3, "sha256": "0"},
                                {"page_id": page_id, "path": "b.png", "image_path": "b.png", "width": 4,
                                 "height": 3, "sha256": "1"}])
    for read in (read_pages, manifest_page_ids):
        if ok:
            assert [p if isinstance(p, str) else p.page_id for p in read(run)] == ["first", page_id]
            continue
        with pytest.raises(InputError) as exc:
            read(run)
        assert str(exc.value).startswith(f"{path}:2: bad page id {page_id!r} (")


def test_every_id_page_id_for_makes_passes_the_reader():
    from newsbag.inputs import page_id_for
    from newsbag.rundir import is_page_id

    root = Path("/scans")
    for name in ("a.png", "-x.png", "..png", "._x.png", "__.png", "ä ö/ü.tif", "x" * 300 + ".png", ".png",
                 "a\x1bb.png", "../elsewhere/p.png"):
        assert is_page_id(page_id_for(root / name, root)), name


# --- control characters in names ------------------------------------------------------------


def test_control_characters_in_names_are_escaped_in_every_message(tmp_path, capsys):
    """A scan named with an escape sequence retitled and cleared the operator's terminal, and one
    with a newline forged a summary line, in pages, run, status and review messages."""
    scans = tmp_path / "scans"
    title = "x\x1b]0;PWNED\x07\x1b[2Jy"
    forged = "n\nrun: 9 page(s): 9 ok\x85"
    write_image(scans / f"{title}.png", size=(120, 90))
    (scans / f"{forged}.png").write_bytes(b"")          # rejected: named in pages, run and status
    (scans / f"{title}.tif").write_bytes(b"not a tiff")  # rejected: not an image
    run = tmp_path / "run"
    config = write_fake_config(tmp_path / "c.json", {"v": {}}, extra_stages=STAGES)
    said = [run_cli(capsys, "pages", scans, "--run-dir", run),
            run_cli(capsys, "run", scans, "--run-dir", run, "--config", config),
            run_cli(capsys, "status", "--run-dir", run)]
    os.unlink(scans / f"{title}.png")                   # its board cannot be drawn again: an error naming it
    said.append(run_cli(capsys, "review", "--run-dir", run, "--force"))
    for code, out, err in said:
        text = out + err
        assert not CONTROL.search(text.replace("\n", "")), text
        assert not any(line.startswith("run: 9 page(s)") for line in text.splitlines()), text
    shown_title = "x\\x1b]0;PWNED\\x07\\x1b[2Jy"
    shown_forged = "n\\x0arun: 9 page(s): 9 ok\\u0085"
    for code, out, err in said[:3]:                     # the rejected inputs, named
        assert f"{shown_forged}.png" in out + err and f"{shown_title}.tif" in out + err
    assert f"{shown_title}.png" in said[3][2]            # the page whose scan is gone


def test_printable_escapes_controls_and_keeps_the_rest():
    from newsbag.errors import printable

    assert printable("plain ä 日本 \\x") == "plain ä 日本 \\x"
    assert printable("a\x1b[2J\x07b\tc\x7f") == "a\\x1b[2J\\x07b\\x09c\\x7f"
    assert printable("line\nforged\r") == "line\\x0aforged\\x0d"
    assert printable("c1\x85\x9b") == "c1\\u0085\\u009b"
    assert printable(os.fsdecode(b"Z\xfcrich")) == "Z\\xfcrich"   # a non-UTF-8 name, as before


# --- a planted link in logs/ ------------------------------------------------------------------


def test_a_stage_log_planted_as_a_link_is_replaced_not_appended_through(tmp_path, capsys):
    run = _finished(tmp_path, capsys)
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me\n")
    log = run / "logs" / "fake.v.log"
    log.unlink()
    log.symlink_to(victim)
    code, _, err = run_cli(capsys, "run", "--run-dir", run, "--force")
    assert code == 0, err
    assert victim.read_text() == "keep me\n"
    assert not log.is_symlink() and log.read_text().startswith("=== ")


def test_a_ledger_planted_as_a_link_is_replaced_not_appended_through(tmp_path):
    from newsbag.io import append_jsonl

    victim = tmp_path / "victim.txt"
    victim.write_text("keep me\n")
    ledger = tmp_path / "logs" / "failures.jsonl"
    ledger.parent.mkdir()
    ledger.symlink_to(victim)
    append_jsonl(ledger, [{"page_id": "p", "error": "x"}])
    assert victim.read_text() == "keep me\n"
    assert not ledger.is_symlink() and [json.loads(line) for line in ledger.read_text().splitlines()] == [
        {"page_id": "p", "error": "x"}]


def test_a_job_ledger_planted_as_a_link_is_replaced_not_written_through(tmp_path):
    from newsbag.slurm.jobs import JOBS_FILE, record_job

    victim = tmp_path / "victim.txt"
    victim.write_text("no newline at the end")   # what a torn ledger line looks like: closed first
    run = tmp_path / "run"
    (run / JOBS_FILE).parent.mkdir(parents=True)
    (run / JOBS_FILE).symlink_to(victim)
    record_job(run, {"job_id": "1", "kind": "model"})
    assert victim.read_text() == "no newline at the end"
    assert not (run / JOBS_FILE).is_symlink()
    assert [json.loads(line) for line in (run / JOBS_FILE).read_text().splitlines() if line] == [
        {"job_id": "1", "kind": "model"}]


# --- bytes that are not UTF-8 -----------------------------------------------------------------


def test_a_manifest_line_that_is_not_utf8_is_one_line_naming_it(tmp_path, capsys):
    run = _finished(tmp_path, capsys)
    manifest = run / "manifests" / "pages.jsonl"
    good = manifest.read_bytes()
    manifest.write_bytes(good + b'{"page_id": "b\xff"}\n')
    column = len(b'{"page_id": "b') + 1
    for command in ("status", "run", "fuse", "review", "export"):
        code, out, err = run_cli(capsys, command, "--run-dir", run)
        assert (code, out, err) == (2, "", f"newsbag: error: {manifest}: line 2 column {column}: not UTF-8 text (byte 0xff)\n")


@pytest.mark.parametrize("damage", [b'{"path": "a\xff.png", "error": "x"}\n', b'{"path": \n'])
def test_a_damaged_rejected_list_is_a_warning_and_status_goes_on(tmp_path, capsys, damage):
    run = _finished(tmp_path, capsys)
    rejected = run / "manifests" / "rejected.jsonl"
    rejected.write_bytes(b'{"path": "/x/b.png", "error": "/x/b.png: empty", "kind": "empty"}\n' + damage)
    code, out, err = run_cli(capsys, "status", "--run-dir", run)
    assert code == 0, err
    assert f"WARNING: {rejected}:2: " in err or f"WARNING: {rejected}: line 2 " in err, err
    assert "rejected inputs 1 (empty 1)" in out and "fake/v " in out


# --- one page on two manifest lines ---------------------------------------------------------


def test_a_page_on_two_manifest_lines_is_named_and_counted_once(tmp_path, capsys):
    """status said `done 2 ... pending -1` for one page, and run deduplicated without a word."""
    run = _finished(tmp_path, capsys)
    manifest = run / "manifests" / "pages.jsonl"
    page_id = json.loads(manifest.read_text())["page_id"]
    _append_line(manifest)
    code, out, err = run_cli(capsys, "status", "--run-dir", run, "--json")
    assert code == 0, err
    assert f"{manifest}:2: page {page_id} is on line 1 too" in err
    info = json.loads(out)
    assert info["pages"] == 1
    counts = [(o["name"], o["done"], o["pending"]) for outs in info["builtin"].values() for o in outs]
    assert counts and all((done, pending) == (1, 0) for _, done, pending in counts), counts
    assert [(s["done"], s["pending"]) for s in info["sources"]] == [(1, 0)]
    code, out, err = run_cli(capsys, "run", "--run-dir", run)
    assert code == 0 and "nothing to do: 1 pages current" in err
