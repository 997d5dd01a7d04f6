"""`_report`: the report's page records, and the report writer's merge of this job's records over
another's."""

from __future__ import annotations

import json

import pytest


@pytest.mark.parametrize("skipped, theirs, mine, expected", [
    ({}, None, {}, {}),                                                           # nothing yet
    ({"a": "skip"}, {"a": "theirs", "b": "theirs"}, {}, {"a": "theirs", "b": "theirs"}),   # the file over skips
    ({"a": "skip"}, {"a": "theirs"}, {"a": "mine"}, {"a": "mine"}),               # this job over both
    ({"a": "skip"}, ["not", "a", "dict"], {"b": "mine"}, {"a": "skip", "b": "mine"}),   # a torn file counts as none
])
def test_merged_pages(skipped, theirs, mine, expected):
    import _report

    assert _report.merged_pages(skipped, theirs, mine) == expected


def _job(tmp_path, **extra) -> dict:
    return {"out_dir": str(tmp_path), "pages": [], "stage": "s", "variant": "v", "family": "f", **extra}


def test_the_report_merges_its_records_over_those_another_call_wrote_meanwhile(tmp_path):
    import _report
    import _writes

    path = tmp_path / "run_report.json"
    report = _report.Report(_job(tmp_path), path, {"old": {"status": "ok", "seconds": None}}, 1)
    report.record("p1", {"status": "ok", "seconds": 1.0}, "ok")
    report.write()
    other = json.loads(path.read_text())        # another call of the variant replaces the file
    other["pages"]["p2"] = {"status": "failed", "error": "E", "seconds": 2.0}
    _writes.atomic_write_json(path, other)
    report.record("p3", {"status": "empty", "seconds": 3.0}, "empty")
    report.end(completed=True, write=True)
    written = json.loads(path.read_text())
    assert sorted(written["pages"]) == ["old", "p1", "p2", "p3"]
    assert written["counts"] == {"ok": 1, "empty": 1, "failed": 0, "skipped": 1}
    assert written["page_totals"] == {"ok": 2, "empty": 1, "failed": 1}
    assert written["state"] == "finished" and "finished" in written


def test_a_job_that_ends_without_writing_leaves_no_report(tmp_path):
    import _report

    path = tmp_path / "run_report.json"
    report = _report.Report(_job(tmp_path), path, {}, 0)
    report.end(completed=False, write=False)
    assert not path.exists()
    assert report.data["state"] == "interrupted"
