import json

import pytest

from nbtest import run_cli, write_image


def _run_with_manifest(tmp_path, capsys):
    write_image(tmp_path / "in" / "p1.png")
    run = tmp_path / "run"
    code, _, err = run_cli(capsys, "pages", "--input-dir", tmp_path / "in", "--run-dir", run)
    assert code == 0, err
    return run, run / "manifests" / "pages.jsonl"


def test_every_manifest_line_records_the_run_format(tmp_path, capsys):
    from newsbag.manifest import RUN_FORMAT

    _, manifest = _run_with_manifest(tmp_path, capsys)
    assert [json.loads(line)["run_format"] for line in manifest.read_text().splitlines()] == [RUN_FORMAT]


@pytest.mark.parametrize("run_format,shown", [(None, "none"), (0, "0"), ("x", "x")])  # missing, older, garbage
@pytest.mark.parametrize("command", ["pages", "status"])
def test_a_manifest_of_another_run_format_is_refused_in_one_line(tmp_path, capsys, run_format, shown, command):
    """A run made by an incompatible newsbag was read by guesses about what older versions wrote:
    it is refused, naming the run dir and what to do, before anything is written."""
    from newsbag.manifest import RUN_FORMAT

    run, manifest = _run_with_manifest(tmp_path, capsys)
    rows = [{k: v for k, v in json.loads(line).items() if k != "run_format"} for line in manifest.read_text().splitlines()]
    manifest.write_text("".join(json.dumps(r if run_format is None else {**r, "run_format": run_format}) + "\n"
                                for r in rows))
    before = manifest.read_text()
    args = ["--input-dir", tmp_path / "in"] if command == "pages" else []
    code, out, err = run_cli(capsys, command, "--run-dir", run, *args)
    assert (code, out) == (2, "")
    assert err == (f"newsbag: error: {run} was made by an incompatible newsbag (run format {shown}, this newsbag "
                   f"writes {RUN_FORMAT}): start a new --run-dir, or run it with the newsbag that made it\n")
    assert manifest.read_text() == before
